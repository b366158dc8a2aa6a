// ResNetMnist (see resnet_mnist.hpp).
#include "nn/resnet_mnist.hpp"

#include "autograd/functions.hpp"

namespace ddp::nn {

ResNetMnist::ResNetMnist(Generator& gen) {
  conv_ = register_module("conv", std::make_shared<Conv2d>(1, 16, 3, 1, 1, /*bias=*/false, gen));
  register_module("bn", std::make_shared<BatchNorm2d>(16));
  block1_ = register_module("block1", std::make_shared<BasicBlock>(16, 16, 1, gen));
  block2_ = register_module("block2", std::make_shared<BasicBlock>(16, 32, 2, gen));
  block3_ = register_module("block3", std::make_shared<BasicBlock>(32, 64, 2, gen));
  fc_ = register_module("fc", std::make_shared<Linear>(64, kNumClasses, /*bias=*/true, gen));
}

Variable ResNetMnist::forward(const Variable& x) {
  DDP_CHECK(x.dim() == 4 && x.size(1) == 1, "ResNetMnist: expected images (B, 1, H, W), got ",
            x.data().describe());
  Variable h = relu(bn()(conv_->forward(x)));
  h = block3_->forward(block2_->forward(block1_->forward(h)));
  return fc_->forward(global_avg_pool2d(h));  // (B, 64, 7, 7) -> (B, 64) -> (B, 10)
}

}  // namespace ddp::nn
