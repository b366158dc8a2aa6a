// algbw and busbw: how fast a collective ran, in nccl-tests' definitions (its
// doc/PERFORMANCE.md), for every program that prints them. Chapter 05 ("algbw and busbw").
//
//   algbw = bytes / time             what the caller experiences
//   busbw = algbw * 2(w-1)/w         all_reduce: a ring sends 2(w-1)/w of the tensor over
//                                    each link, so busbw is one link's traffic, comparable
//                                    with the link's speed and across world sizes
#pragma once

#include <cstdint>

namespace ddp {

// Bytes per second of a collective over `bytes` that took `seconds` per call.
inline double algbw(std::int64_t bytes, double seconds) {
  return static_cast<double>(bytes) / seconds;
}

// Bytes per second on each link of an all_reduce over `world` ranks (0 at world = 1).
inline double all_reduce_busbw(std::int64_t bytes, double seconds, int world) {
  return algbw(bytes, seconds) * 2.0 * (world - 1) / world;
}

}  // namespace ddp
