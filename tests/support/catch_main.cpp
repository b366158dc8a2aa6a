// main() of every test that runs without a GPU (ddp_add_test, cmake/DdpTesting.cmake):
// what Catch2's CATCH_CONFIG_MAIN writes, over its implementation in catch_session.cpp
// (with a console wide enough for our messages, Note [Console width]).
#include "tests/support/catch_session.hpp"

int main(int argc, char** argv) { return ddp::test::run_catch_session(argc, argv); }
