// BatchNorm2d (see batch_norm2d.hpp).
#include "nn/batch_norm2d.hpp"

#include "autograd/functions.hpp"

namespace ddp::nn {

BatchNorm2d::BatchNorm2d(std::int64_t num_features, double eps, double momentum)
    : num_features_(num_features), eps_(eps), momentum_(momentum) {
  DDP_CHECK(num_features > 0, "BatchNorm2d(", num_features, "): needs at least one channel");
  weight_ = register_parameter("weight", ones({num_features}));
  bias_ = register_parameter("bias", zeros({num_features}));
  running_mean_ = register_buffer("running_mean", zeros({num_features}));
  running_var_ = register_buffer("running_var", ones({num_features}));
}

Variable BatchNorm2d::forward(const Variable& x) {
  DDP_CHECK(x.dim() == 4 && x.size(1) == num_features_, describe(), ": expected input (B, ",
            num_features_, ", H, W), got ", x.data().describe());
  return batch_norm(x, weight_, bias_, running_mean_.data(), running_var_.data(),
                    is_training(), momentum_, eps_);
}

std::string BatchNorm2d::describe() const {
  return detail::concat("BatchNorm2d(", num_features_, ")");
}

}  // namespace ddp::nn
