// Exercise 09.2: the ring's two halves (tutorial/ch09_sharded/README.md#exercise-2).
// Your copy: tutorial/ch09_sharded/mine/plain_ring_halves.cpp (tools/exercise start 09.2).
// Write plain_ring_reduce_scatter and plain_ring_all_gather as dist/plain_ring.hpp
// describes them; check them with tools/exercise check 09.2.
#include "base/error.hpp"
#include "dist/plain_ring.hpp"

namespace ddp {

void plain_ring_reduce_scatter(std::span<float> data, int rank, int size, const RingLinks& links) {
  (void)data, (void)rank, (void)size, (void)links;
  DDP_FAIL("exercise 09.2 is not done yet: see tutorial/ch09_sharded/README.md#exercise-2");
}

void plain_ring_all_gather(std::span<float> data, int rank, int size, const RingLinks& links) {
  (void)data, (void)rank, (void)size, (void)links;
  DDP_FAIL("exercise 09.2 is not done yet: see tutorial/ch09_sharded/README.md#exercise-2");
}

}  // namespace ddp
