// Conv2d (see conv2d.hpp).
#include "nn/conv2d.hpp"

#include <cmath>

#include "autograd/functions.hpp"
#include "nn/init.hpp"

namespace ddp::nn {

Conv2d::Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel,
               std::int64_t stride, std::int64_t padding, bool bias, Generator& gen)
    : in_channels_(in_channels),
      out_channels_(out_channels),
      kernel_(kernel),
      stride_(stride),
      padding_(padding) {
  DDP_CHECK(in_channels > 0 && out_channels > 0 && kernel > 0 && stride > 0 && padding >= 0,
            "Conv2d(", in_channels, ", ", out_channels, ", kernel ", kernel, ", stride ", stride,
            ", padding ", padding, "): sizes and stride must be positive, padding >= 0");
  Tensor w = empty({out_channels, in_channels, kernel, kernel});
  kaiming_uniform_(w, std::sqrt(5.0), gen);
  weight_ = register_parameter("weight", w);
  if (bias) {
    Tensor b = empty({out_channels});
    bias_uniform_(b, fan_in(w), gen);
    bias_ = register_parameter("bias", b);
  }
}

Variable Conv2d::forward(const Variable& x) {
  return conv2d(x, weight_, bias_, stride_, padding_);
}

std::string Conv2d::describe() const {
  return detail::concat("Conv2d(", in_channels_, " -> ", out_channels_, ", ", kernel_, "x",
                        kernel_, ", stride ", stride_, ", pad ", padding_,
                        bias_.defined() ? ")" : ", no bias)");
}

}  // namespace ddp::nn
