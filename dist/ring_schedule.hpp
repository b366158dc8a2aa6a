// The ring schedule: the all-reduce algorithm of chapter 05 in two small functions, used
// by both rings of ProcessGroupTcp (the plain one, dist/plain_ring.hpp, and the pipelined
// one). Exercise 05.1 writes them (tutorial/ch05_rendezvous/README.md#exercise-1).
#pragma once

#include <cstdint>
#include <utility>

namespace ddp {

// Which chunk rank `rank` sends to its right neighbour, and which it receives from its
// left, at step `step` of an all-reduce over `size` ranks; steps [0, size-1) are the
// reduce-scatter (the received chunk is reduced into ours), steps [size-1, 2(size-1))
// the all-gather (the received chunk overwrites ours). See Note [Ring schedule] in
// ring_schedule.cpp.
struct RingStep {
  int send_chunk;
  int recv_chunk;
  bool reduce;
};
RingStep ring_all_reduce_step(int rank, int size, int step);

// Chunk `chunk` of `n` elements cut into `size` nearly equal chunks: [begin, end). The
// first n % size chunks have one element more.
std::pair<std::int64_t, std::int64_t> ring_chunk(std::int64_t n, int size, int chunk);

}  // namespace ddp
