// Boost.Test entry point of the integration suite (real child processes).
#define BOOST_TEST_MODULE mira_integration
#include <boost/test/unit_test.hpp>

#include "common/run_co.hpp"

using mira::test::ignore_sigpipe;
BOOST_TEST_GLOBAL_FIXTURE(ignore_sigpipe);
