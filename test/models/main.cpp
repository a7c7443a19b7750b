// Boost.Test entry point of the model layer's suite.
#define BOOST_TEST_MODULE mira_models
#include <boost/test/unit_test.hpp>

#include "common/run_co.hpp"

using mira::test::ignore_sigpipe;
BOOST_TEST_GLOBAL_FIXTURE(ignore_sigpipe);
