// Exercise 07.2: a gradient is ready, a bucket goes (tutorial/ch07_multinode/README.md#exercise-2).
// Your copy: tutorial/ch07_multinode/mine/reducer_ready.cpp (tools/exercise start 07.2).
// Write Reducer::mark_ready and Reducer::launch_ready_buckets (their members are in
// dist/parallel/reducer.hpp); check them with tools/exercise check 07.2.
#include "dist/parallel/reducer.hpp"

#include "base/error.hpp"

namespace ddp {

void Reducer::mark_ready(std::size_t parameter) {
  (void)parameter;
  DDP_FAIL("exercise 07.2 is not done yet: see tutorial/ch07_multinode/README.md#exercise-2");
}

void Reducer::launch_ready_buckets() {
  DDP_FAIL("exercise 07.2 is not done yet: see tutorial/ch07_multinode/README.md#exercise-2");
}

}  // namespace ddp
