// Linear (see linear.hpp).
#include "nn/linear.hpp"

#include <cmath>

#include "autograd/functions.hpp"
#include "nn/init.hpp"

namespace ddp::nn {

Linear::Linear(std::int64_t in_features, std::int64_t out_features, bool bias, Generator& gen)
    : in_features_(in_features), out_features_(out_features) {
  DDP_CHECK(in_features > 0 && out_features > 0, "Linear(", in_features, ", ", out_features,
            "): the sizes must be positive");
  Tensor w = empty({out_features, in_features});
  kaiming_uniform_(w, std::sqrt(5.0), gen);
  weight_ = register_parameter("weight", w);
  if (bias) {
    Tensor b = empty({out_features});
    bias_uniform_(b, in_features, gen);
    bias_ = register_parameter("bias", b);
  }
}

Variable Linear::forward(const Variable& x) { return linear(x, weight_, bias_); }

std::string Linear::describe() const {
  return detail::concat("Linear(", in_features_, " -> ", out_features_,
                        bias_.defined() ? ")" : ", no bias)");
}

}  // namespace ddp::nn
