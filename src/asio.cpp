// The one translation unit that compiles Asio (BOOST_ASIO_SEPARATE_COMPILATION is set on the
// mira target), so no other file pays for its implementation.
#include <boost/asio/impl/src.hpp>
