// Exercise 05.2: the plain ring all-reduce (tutorial/ch05_rendezvous/README.md#exercise-2).
// Your copy: tutorial/ch05_rendezvous/mine/plain_ring.cpp (tools/exercise start 05.2).
// Write the function that dist/plain_ring.hpp declares, with ring_all_reduce_step and
// ring_chunk (dist/ring_schedule.hpp); check it with tools/exercise check 05.2.
#include "dist/plain_ring.hpp"

#include "dist/ring_schedule.hpp"
#include "base/error.hpp"

namespace ddp {

void plain_ring_all_reduce(std::span<float> data, int rank, int size, const RingLinks& links) {
  (void)data, (void)rank, (void)size, (void)links;
  DDP_FAIL("exercise 05.2 is not done yet: see tutorial/ch05_rendezvous/README.md#exercise-2");
}

}  // namespace ddp
