// main() of every test that runs without a GPU (ddp_add_test, cmake/DdpTesting.cmake):
// Catch2's own, with a console wide enough for our messages (Note [Console width]).
#define CATCH_CONFIG_MAIN
#include "tests/support/catch_config.hpp"  // before catch.hpp: it reads the width
#include <catch2/catch.hpp>
