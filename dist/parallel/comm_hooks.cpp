// Communication hooks (see comm_hooks.hpp). Chapter 07.
//
// Reading order: bfloat16 rounding; the packing; the hook (launch, then finish).
#include "dist/parallel/comm_hooks.hpp"

#include <bit>
#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/error.hpp"

namespace ddp {

// Note [bf16 through all_gather]
// ------------------------------
// PyTorch's fp16_compress_hook casts the bucket to fp16, all-reduces in fp16 and casts
// back: half the bytes of a float32 all-reduce, because NCCL sums fp16 on the wire. Our
// backends sum only float32, and a float32 sum of two packed 16-bit patterns is garbage.
// What every backend can do with any bit pattern is MOVE it: all_gather. So each rank
// sends its bucket rounded to bf16 (S/2 bytes for a float32 bucket of S bytes), receives
// every other rank's, and sums the W parts itself. Bytes received per rank:
//
//     bf16 all_gather:        (W-1) * S/2
//     ring all-reduce (fp32): 2(W-1)/W * S          ratio: W/4
//
// Half at W = 2, the same at W = 4, MORE beyond (twice at W = 8): every rank receives
// everything instead of a 1/W share of it. That is why PyTorch's hook needs a collective
// that reduces in 16 bits; with ours, the compression pays off on 2 and 3 ranks only.
// What it costs in accuracy: bf16 keeps float32's exponent range (a tiny gradient does not
// underflow to zero, as it would in fp16) but 8 significant bits, a relative rounding error
// of at most 2^-8 per rank's value. The sum itself is float32, in rank order on every rank:
// the same additions everywhere, so the replicas stay bit-identical (a sum in arrival order
// would not, and the replicas would drift apart).

// ---- bfloat16 -------------------------------------------------------------------------

std::uint16_t to_bf16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  // NaN: the rounding below could carry a NaN whose payload sits in the low bits into Inf
  // (0x7f800001 -> 0x7f80). Keep sign and high payload, set the quiet bit: still a NaN.
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  }
  // Round to nearest, ties to even: add just under half an ulp of bf16 (0x7fff), plus one
  // when the kept part is odd, and cut. A carry out of the mantissa bumps the exponent,
  // which is right (0x3f7fffff -> 1.0), and past the largest finite value gives Inf.
  const std::uint32_t lsb = (bits >> 16) & 1u;
  return static_cast<std::uint16_t>((bits + 0x7fffu + lsb) >> 16);
}

float from_bf16(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

// ---- The packing ----------------------------------------------------------------------

void pack_bf16(std::span<const float> values, std::span<float> packed) {
  const auto n = static_cast<std::int64_t>(values.size());
  DDP_CHECK(static_cast<std::int64_t>(packed.size()) == bf16_packed_slots(n), "pack_bf16: ", n,
            " values need ", bf16_packed_slots(n), " slots, got ", packed.size());
  for (std::int64_t k = 0; k < bf16_packed_slots(n); ++k) {
    const std::uint32_t low = to_bf16(values[2 * k]);
    const std::uint32_t high = 2 * k + 1 < n ? to_bf16(values[2 * k + 1]) : 0u;
    packed[k] = std::bit_cast<float>(low | (high << 16));
  }
}

void unpack_bf16(std::span<const float> packed, std::span<float> values) {
  const auto n = static_cast<std::int64_t>(values.size());
  DDP_CHECK(static_cast<std::int64_t>(packed.size()) == bf16_packed_slots(n), "unpack_bf16: ", n,
            " values need ", bf16_packed_slots(n), " slots, got ", packed.size());
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t slot = std::bit_cast<std::uint32_t>(packed[i / 2]);
    values[i] = from_bf16(static_cast<std::uint16_t>(i % 2 == 0 ? slot : slot >> 16));
  }
}

// ---- The hook -------------------------------------------------------------------------

namespace {

// One bucket's buffers between launch and finish; the collective reads and writes them
// until its Work completes, so the hook keeps them alive.
struct InFlight {
  Tensor sent;      // (slots) on the bucket's device: this rank's packed bucket
  Tensor gathered;  // (W * slots) on the bucket's device: every rank's, rank r at r*slots
};

// Several buckets are in flight at once (launched during backward, finished together at
// its end), so the state is keyed by the bucket: its memory, which the Reducer keeps for
// the bucket's lifetime. A rebuild makes new buckets, at new addresses.
struct Bf16State {
  std::unordered_map<const void*, InFlight> in_flight;
};

}  // namespace

CommHook bf16_compress_hook() {
  auto state = std::make_shared<Bf16State>();
  auto launch = [state](ProcessGroup& group, Tensor& bucket) -> std::shared_ptr<Work> {
    DDP_CHECK(bucket.dtype() == DType::Float32 && bucket.is_contiguous(),
              group.who("bf16_compress_hook"), ": expects a contiguous float32 bucket, got ",
              bucket.describe());
    // The rounding is bit work the tensor library has no op for: on the host. For a CUDA
    // bucket that is a copy down here (it waits for backward's kernels) and one up.
    const Tensor values = bucket.cpu();
    const std::int64_t n = values.numel(), slots = bf16_packed_slots(n);
    Tensor packed = empty({slots});
    pack_bf16({values.data<float>(), static_cast<std::size_t>(n)},
              {packed.data<float>(), static_cast<std::size_t>(slots)});
    InFlight& buffers = state->in_flight[bucket.raw_data()];
    buffers.sent = packed.to(bucket.device());
    buffers.gathered = empty({group.size() * slots},
                             TensorOptions{.dtype = DType::Float32, .device = bucket.device()});
    return group.all_gather(buffers.gathered, buffers.sent);
  };
  auto finish = [state](ProcessGroup& group, Tensor& bucket) {
    const auto found = state->in_flight.find(bucket.raw_data());
    DDP_CHECK(found != state->in_flight.end(), group.who("bf16_compress_hook"),
              ": finish for a bucket (",
              bucket.describe(),
              ") that this hook did not launch\nhint: give every Reducer "
              "its own bf16_compress_hook()");
    const Tensor gathered = found->second.gathered.cpu();
    state->in_flight.erase(found);
    const std::int64_t n = bucket.numel(), slots = bf16_packed_slots(n);
    const auto size = static_cast<std::size_t>(n);
    // The average, written straight into a CPU bucket; a CUDA one gets a copy of it.
    Tensor average = bucket.is_cuda() ? empty({n}) : bucket;
    const std::span<float> total{average.data<float>(), size};
    const float* parts = gathered.data<float>();
    const auto slots_of = [&](int r) {
      return std::span<const float>{parts + r * slots, static_cast<std::size_t>(slots)};
    };
    // Note [bf16 through all_gather]: rank 0's part, plus rank 1's, ... in this order.
    unpack_bf16(slots_of(0), total);
    std::vector<float> part(size);
    for (int r = 1; r < group.size(); ++r) {
      unpack_bf16(slots_of(r), part);
      for (std::size_t i = 0; i < size; ++i) total[i] += part[i];
    }
    const float inverse = 1.0f / static_cast<float>(group.size());  // as allreduce_hook
    for (float& x : total) x *= inverse;
    if (bucket.is_cuda()) bucket.copy_(average.view(bucket.shape()));
  };
  return CommHook{"bf16 all_gather", std::move(launch), std::move(finish)};
}

}  // namespace ddp
