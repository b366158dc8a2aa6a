// ResNetMnist (see resnet_mnist.hpp).
#include "nn/resnet_mnist.hpp"

#include "autograd/functions.hpp"

namespace ddp::nn {

ResNetMnist::ResNetMnist(Generator& gen, std::int64_t width) : width_(width) {
  DDP_CHECK(width >= 1, "ResNetMnist: width must be an integer >= 1, got ", width);
  const std::int64_t c = 16 * width;  // the stem's channels; the blocks double them twice
  conv_ = register_module("conv", std::make_shared<Conv2d>(1, c, 3, 1, 1, /*bias=*/false, gen));
  register_module("bn", std::make_shared<BatchNorm2d>(c));
  block1_ = register_module("block1", std::make_shared<BasicBlock>(c, c, 1, gen));
  block2_ = register_module("block2", std::make_shared<BasicBlock>(c, 2 * c, 2, gen));
  block3_ = register_module("block3", std::make_shared<BasicBlock>(2 * c, 4 * c, 2, gen));
  fc_ = register_module("fc", std::make_shared<Linear>(4 * c, kNumClasses, /*bias=*/true, gen));
}

Variable ResNetMnist::forward(const Variable& x) {
  DDP_CHECK(x.dim() == 4 && x.size(1) == 1, "ResNetMnist: expected images (B, 1, H, W), got ",
            x.data().describe());
  Variable h = relu(bn()((*conv_)(x)));
  h = (*block3_)((*block2_)((*block1_)(h)));
  return (*fc_)(global_avg_pool2d(h));  // (B, 64K, 7, 7) -> (B, 64K) -> (B, 10)
}

std::string ResNetMnist::describe() const {
  return width_ == 1 ? "ResNetMnist" : detail::concat("ResNetMnist(width ", width_, ")");
}

}  // namespace ddp::nn
