// Communication hooks for the Reducer beyond its default all-reduce (chapter 07):
// bf16_compress_hook, our version of PyTorch's fp16_compress_hook.
//
// A hook (CommHook, reducer.hpp) decides what happens to a bucket between "ready" and
// "averaged". This one rounds the bucket to bfloat16 before it leaves the rank, so every
// gradient crosses the wire with 8 bits of mantissa instead of 24. Our tensors are only
// float32/int64 and no backend reduces in 16 bits, so the hook gathers instead of reducing:
// Note [bf16 through all_gather] in comm_hooks.cpp says what that costs on the wire. The
// rounding and the packing are plain functions, tested on their own.
#pragma once

#include <cstdint>
#include <span>

#include "dist/parallel/reducer.hpp"

namespace ddp {

// ---- bfloat16 -------------------------------------------------------------------------

// bfloat16 is the top half of a float32: sign, the same 8 exponent bits, 7 mantissa bits.
// to_bf16 rounds to nearest, ties to even (IEEE's default, PyTorch's .to(torch.bfloat16));
// Inf stays Inf, NaN stays a NaN (a quiet one), subnormals round like any other value, and
// a float32 above the largest bf16 (3.3895e38) by half an ulp or more becomes Inf.
std::uint16_t to_bf16(float value);
float from_bf16(std::uint16_t bits);  // exact: every bf16 is a float32

// The wire format: two bf16 values per float32 slot, value 2k in the low 16 bits of slot
// k, value 2k+1 in the high bits; an odd count pads its last slot with a zero. A slot is a
// bit pattern, not a number: move it, never compute with it.
constexpr std::int64_t bf16_packed_slots(std::int64_t values) { return (values + 1) / 2; }
// values: (n) -> packed: (bf16_packed_slots(n)), rounded with to_bf16.
void pack_bf16(std::span<const float> values, std::span<float> packed);
// packed: (bf16_packed_slots(n)) -> values: (n), exactly the bf16 values that were packed.
void unpack_bf16(std::span<const float> packed, std::span<float> values);

// ---- The hook -------------------------------------------------------------------------

// launch: rounds the bucket to bf16, packs it and starts ONE all_gather of the packed
// buffers. finish: unpacks every rank's part, sums them in float32 in rank order (the same
// additions on every rank, so the replicas stay bit-identical) and multiplies by 1/W.
// Each call makes a hook with its own state (the buffers in flight, per bucket): give
// every Reducer its own. CUDA buckets go through host memory (the rounding is bit work that
// the tensor library has no op for): one copy down and one up per bucket.
CommHook bf16_compress_hook();

}  // namespace ddp
