// Runs Catch2's session over the test cases linked into this program: what the two main()s
// of the tests call (catch_main.cpp, cuda_main.cpp). Catch2 declares its Session only
// where its implementation is compiled, which is catch_session.cpp, once for all programs.
#pragma once

namespace ddp::test {

int run_catch_session(int argc, char** argv);

}  // namespace ddp::test
