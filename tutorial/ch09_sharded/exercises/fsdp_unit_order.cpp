// Exercise 09.3: when FSDP gathers and frees a unit (tutorial/ch09_sharded/README.md#exercise-3).
// Your copy: tutorial/ch09_sharded/mine/fsdp_unit_order.cpp (tools/exercise start 09.3).
// Write the three hooks as dist/parallel/fully_sharded_data_parallel.hpp's schedule says;
// check them with tools/exercise check 09.3.
#include "base/error.hpp"
#include "dist/parallel/fully_sharded_data_parallel.hpp"

namespace ddp {

void FullyShardedDataParallel::before_forward(std::size_t u) {
  (void)u;
  DDP_FAIL("exercise 09.3 is not done yet: see tutorial/ch09_sharded/README.md#exercise-3");
}

Variable FullyShardedDataParallel::after_forward(std::size_t u, const Variable& output) {
  (void)u, (void)output;
  DDP_FAIL("exercise 09.3 is not done yet: see tutorial/ch09_sharded/README.md#exercise-3");
}

void FullyShardedDataParallel::gather_for_backward(std::size_t u) {
  (void)u;
  DDP_FAIL("exercise 09.3 is not done yet: see tutorial/ch09_sharded/README.md#exercise-3");
}

}  // namespace ddp
