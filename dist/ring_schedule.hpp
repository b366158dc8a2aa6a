// The ring schedule: the all-reduce algorithm of chapter 05 in two small functions, used
// by both rings of ProcessGroupTcp (the plain one, dist/plain_ring.hpp, and the pipelined
// one). Exercise 05.1 writes them (tutorial/ch05_rendezvous/README.md#exercise-1).
#pragma once

#include <cstdint>
#include <utility>

namespace ddp {

// Note [Ring schedule]
// --------------------
// The tensor is cut into `size` chunks. In the reduce-scatter, every rank at every step
// sends one chunk to its right and receives one from its left, which it adds into its
// own copy of that chunk; the chunk it sends next is the one it just received. After
// size-1 steps each chunk has passed through every rank, and rank r holds the full sum
// of chunk r. The all-gather then passes the finished chunks around the ring the same
// way, copying instead of adding. For 4 ranks (S = sends chunk, R = receives chunk):
//
//   step  phase            rank 0    rank 1    rank 2    rank 3
//    0    reduce-scatter   S3 R2     S0 R3     S1 R0     S2 R1
//    1    reduce-scatter   S2 R1     S3 R2     S0 R3     S1 R0
//    2    reduce-scatter   S1 R0     S2 R1     S3 R2     S0 R3     -> rank r owns chunk r
//    3    all-gather       S0 R3     S1 R0     S2 R1     S3 R2
//    4    all-gather       S3 R2     S0 R3     S1 R0     S2 R1
//    5    all-gather       S2 R1     S3 R2     S0 R3     S1 R0     -> everyone has all
//
// Read a column down: what rank r receives at step s it sends at step s+1. Read a row
// across: rank r sends what rank r+1 receives. Each rank sends 2(size-1)/size of the
// tensor in total, whatever the number of ranks: that is why the ring is
// bandwidth-optimal, and why its time hardly grows with the world size.

// Which chunk rank `rank` sends to its right neighbour, and which it receives from its
// left, at step `step` of an all-reduce over `size` ranks; steps [0, size-1) are the
// reduce-scatter (the received chunk is reduced into ours), steps [size-1, 2(size-1))
// the all-gather (the received chunk overwrites ours). See Note [Ring schedule] above.
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
