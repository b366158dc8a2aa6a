// The ring all-reduce in its plainest form: chapter 05's algorithm (Note [Ring schedule],
// ring_schedule.hpp) with nothing else, for float32 sums. Read it first; the pipelined
// ring that ProcessGroupTcp runs by default (pipelined_ring.cpp) does the same thing
// faster, and chapter 05's page says what each of its changes buys.
//
// With DDP_TCP_RING=plain, ProcessGroupTcp runs its float32 sum and average all-reduces
// through this function (every rank of the job must say the same). Exercise 05.2 writes
// it (tutorial/ch05_rendezvous/README.md#exercise-2). Chapter 09 cuts it in its two halves,
// a reduce-scatter and an all-gather, which the same group then runs on their own
// (plain_ring_halves.cpp, exercise 09.2).
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

// ---- The two halves (chapter 09) ----
// Note [All-reduce = reduce-scatter + all-gather]
// -----------------------------------------------
// Steps [0, size-1) of the schedule (Note [Ring schedule]) are a reduce-scatter on their
// own: afterwards rank r's chunk r holds the sum over the ranks of their chunk r, and it
// has sent (size-1)/size of the tensor. Steps [size-1, 2(size-1)) are an all-gather: the
// finished chunk r goes from rank r round the ring, copied, not added, until every rank
// has every chunk; (size-1)/size of the tensor again. The all-reduce is the two run one
// after the other, and sharded training (ZeRO-2, FSDP) runs them apart: the reduce-scatter
// of the gradients after backward, each rank stepping its own chunk, the all-gather of the
// parameters after the step (or before the next forward).

// The reduce-scatter half: afterwards chunk `rank` of `data` (ring_chunk(n, size, rank),
// ring_schedule.hpp) holds the sum over the ranks of their chunk `rank`; the other chunks
// hold partial sums, of no use to the caller. Same arguments as plain_ring_all_reduce.
void plain_ring_reduce_scatter(std::span<float> data, int rank, int size, const RingLinks& links);

// The all-gather half: every rank's chunk `rank` of `data` is the input; afterwards every
// rank holds every rank's chunk at its place. What the other chunks held before is lost.
void plain_ring_all_gather(std::span<float> data, int rank, int size, const RingLinks& links);

}  // namespace ddp
