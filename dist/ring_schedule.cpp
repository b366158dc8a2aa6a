// The ring schedule (see ring_schedule.hpp). This file holds exactly the two functions of
// exercise 05.1: the exercise build links the participant's copy in its place
// (tutorial/EXERCISES.md, Note [How an exercise replaces the reference]).
#include "dist/ring_schedule.hpp"

#include <algorithm>

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

namespace {
int mod(int a, int m) { return ((a % m) + m) % m; }
}  // namespace

RingStep ring_all_reduce_step(int rank, int size, int step) {
  if (step < size - 1) {  // reduce-scatter
    return {mod(rank - step - 1, size), mod(rank - step - 2, size), true};
  }
  const int t = step - (size - 1);  // all-gather
  return {mod(rank - t, size), mod(rank - t - 1, size), false};
}

std::pair<std::int64_t, std::int64_t> ring_chunk(std::int64_t n, int size, int chunk) {
  const std::int64_t base = n / size;
  const std::int64_t extra = n % size;  // the first `extra` chunks get one more
  const std::int64_t begin = chunk * base + std::min<std::int64_t>(chunk, extra);
  return {begin, begin + base + (chunk < extra ? 1 : 0)};
}

}  // namespace ddp
