// predict_memory: what a rank holds in parameters, gradients and optimizer state under each
// way of synchronising the model, from the ZeRO paper's accounting. Chapter 09; ddp-train
// --print-memory and bench_sharded_step print it beside what tensor/memory.hpp counted.
//
// Note [The memory prediction]
// In fp32, for P parameters, W ranks and K bytes of optimizer state per parameter (SGD
// with momentum: 4, AdamW: 8):
//              parameters       gradients          optimizer state
//   none       4P               4P                 K P
//   zero1      4P               4P + 4P/W          K P / W
//   zero2      4P               4P / W             K P / W
//   fsdp       4P / W           4P / W             K P / W
// P/W is a shard with its padding (fewer than W elements per flat buffer: ShardLayout).
// zero1 keeps DDP's gradients and a copy of its slice; under fsdp the parameters are the
// shards between uses (at most two units whole while one computes). The parameters' row
// also holds the buffers (BatchNorm's statistics), replicated under every way: their bytes
// are added. Activations and communication buffers depend on the batch and the buckets:
// not predicted.
#pragma once

#include <string_view>

#include "nn/module.hpp"

namespace ddp {

struct MemoryPrediction {
  double parameters = 0.0;  // bytes, buffers included
  double gradients = 0.0;
  double optimizer_state = 0.0;
};

// `shard`: "none", "zero1", "zero2" or "fsdp" (anything else: ddp::Error).
MemoryPrediction predict_memory(std::string_view shard, const nn::Module& model, int world,
                                double state_bytes_per_parameter);

}  // namespace ddp
