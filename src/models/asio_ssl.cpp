// Asio's SSL support, compiled once (BOOST_ASIO_SEPARATE_COMPILATION is set on mira::asio, which
// compiles the rest in src/asio.cpp): here, so only the model layer links OpenSSL.
#include <boost/asio/ssl/impl/src.hpp>
