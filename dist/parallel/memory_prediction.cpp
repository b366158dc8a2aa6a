// predict_memory (see memory_prediction.hpp): Note [The memory prediction] in numbers.
#include "dist/parallel/memory_prediction.hpp"

#include "base/error.hpp"

namespace ddp {

MemoryPrediction predict_memory(std::string_view shard, const nn::Module& model, int world,
                                double state_bytes_per_parameter) {
  DDP_CHECK(shard == "none" || shard == "zero1" || shard == "zero2" || shard == "fsdp",
            "predict_memory: shard '", shard, "' is not none, zero1, zero2 or fsdp");
  const double p = static_cast<double>(model.num_parameters());
  const double w = static_cast<double>(world);
  const double slice = 4.0 * p / w;
  double buffers = 0.0;
  for (const auto& [name, b] : model.named_buffers()) {
    buffers += static_cast<double>(b.numel()) * static_cast<double>(element_size(b.dtype()));
  }
  const double k = state_bytes_per_parameter;
  return {.parameters = (shard == "fsdp" ? slice : 4.0 * p) + buffers,
          .gradients = shard == "none" ? 4.0 * p : shard == "zero1" ? 4.0 * p + slice : slice,
          .optimizer_state = shard == "none" ? k * p : k * p / w};
}

}  // namespace ddp
