// The ring all-reduce in its plainest form: chapter 05's algorithm (Note [Ring schedule],
// ring_schedule.hpp) with nothing else, for float32 sums. Read it first; the pipelined
// ring that ProcessGroupTcp runs by default (pipelined_ring.cpp) does the same thing
// faster, and chapter 05's page says what each of its changes buys.
//
// With DDP_TCP_RING=plain, ProcessGroupTcp runs its float32 sum and average all-reduces
// through this function (every rank of the job must say the same). Exercise 05.2 writes
// it (tutorial/ch05_rendezvous/README.md#exercise-2).
#pragma once

#include <functional>
#include <span>

namespace ddp {

// A rank's two links on the ring. Both block until every element has gone or come.
struct RingLinks {
  std::function<void(std::span<const float> chunk)> send_right;  // to rank + 1
  std::function<void(std::span<float> chunk)> receive_left;      // from rank - 1, filled
};

// Sums `data` over the `size` ranks of the ring, in place: afterwards every rank holds the
// same sums. Every rank calls it with as many elements. Throws what the links throw.
void plain_ring_all_reduce(std::span<float> data, int rank, int size, const RingLinks& links);

}  // namespace ddp
