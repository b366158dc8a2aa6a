// Philox4x32-10, the counter-based random number generator of Salmon et al. (SC'11),
// used by cuRAND, JAX and PyTorch's CUDA generator. Chapter 01 (random numbers).
//
// Why counter-based: the i-th random number is a pure function of (seed, i). The CPU
// loop and a GPU thread that both compute element i therefore get the SAME value, with
// no shared state between threads. `Generator` (random.hpp) only keeps an offset.
#pragma once

#include <cmath>
#include <cstdint>

#include "tensor/op_math.hpp"  // DDP_HOST_DEVICE

namespace ddp::philox {

struct Uint4 {
  std::uint32_t x, y, z, w;
};

DDP_HOST_DEVICE inline std::uint32_t mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t* hi) {
  const std::uint64_t product = static_cast<std::uint64_t>(a) * b;
  *hi = static_cast<std::uint32_t>(product >> 32);
  return static_cast<std::uint32_t>(product);
}

// Ten rounds of multiply-xor mixing; returns four independent 32-bit random words.
DDP_HOST_DEVICE inline Uint4 philox4x32_10(Uint4 counter, std::uint32_t key0, std::uint32_t key1) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    std::uint32_t hi0, hi1;
    const std::uint32_t lo0 = mulhilo(kMul0, counter.x, &hi0);
    const std::uint32_t lo1 = mulhilo(kMul1, counter.z, &hi1);
    counter = {hi1 ^ counter.y ^ key0, lo1, hi0 ^ counter.w ^ key1, lo0};
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return counter;
}

// The four random words for element `index` of the stream named by `seed`.
DDP_HOST_DEVICE inline Uint4 random_words(std::uint64_t seed, std::uint64_t index) {
  const Uint4 counter{static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
                      0u, 0u};
  return philox4x32_10(counter, static_cast<std::uint32_t>(seed),
                       static_cast<std::uint32_t>(seed >> 32));
}

// Uniform in [0, 1): the top 24 bits of a word, the most a float's mantissa can hold.
DDP_HOST_DEVICE inline float uniform01(std::uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

// Uniform in [low, high). low + (high - low) * u can round up to high itself for u just
// below 1 (u = 1 - 2^-24 with low 1, high 2 lands halfway between 2 - 2^-23 and 2, and
// ties go to 2); such a draw, about one in 2^24, is folded back to low.
DDP_HOST_DEVICE inline float uniform_in(float low, float high, std::uint32_t word) {
  const float x = low + (high - low) * uniform01(word);
  return x < high ? x : low;
}

// Standard normal by Box-Muller from two words. Computed in double on both devices:
// CUDA's and glibc's double log/cos are accurate to an ulp or two, so after rounding
// to float the CPU and the GPU agree (float logf/cosf differ more between the two).
DDP_HOST_DEVICE inline float standard_normal(std::uint32_t word0, std::uint32_t word1) {
  const double u1 = (static_cast<double>(word0 >> 8) + 1.0) * (1.0 / 16777216.0);  // (0, 1]
  const double u2 = static_cast<double>(word1 >> 8) * (1.0 / 16777216.0);          // [0, 1)
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  return static_cast<float>(sqrt(-2.0 * log(u1)) * cos(kTwoPi * u2));
}

}  // namespace ddp::philox
