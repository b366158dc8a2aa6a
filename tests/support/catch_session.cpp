// Catch2's implementation, reporters included, compiled once for every test program; the
// two main()s (catch_main.cpp, cuda_main.cpp) call run_catch_session. (Each used to
// compile all of Catch2 itself, about 12 s a copy on this 2-core box.)
#define CATCH_CONFIG_RUNNER
#include "tests/support/catch_config.hpp"  // before catch.hpp: Note [Console width]
#include <catch2/catch.hpp>

#include "tests/support/catch_session.hpp"

int ddp::test::run_catch_session(int argc, char** argv) {
  return Catch::Session().run(argc, argv);
}
