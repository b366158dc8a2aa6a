// BasicBlock (see basic_block.hpp).
#include "nn/basic_block.hpp"

#include "autograd/functions.hpp"

namespace ddp::nn {

BasicBlock::BasicBlock(std::int64_t in_channels, std::int64_t out_channels, std::int64_t stride,
                       Generator& gen)
    : in_channels_(in_channels), out_channels_(out_channels), stride_(stride) {
  // Registration order = the order of PyTorch's __init__ = the state_dict order.
  conv1_ = register_module("conv1", std::make_shared<Conv2d>(in_channels, out_channels, 3,
                                                             stride, 1, /*bias=*/false, gen));
  register_module("bn1", std::make_shared<BatchNorm2d>(out_channels));
  conv2_ = register_module("conv2", std::make_shared<Conv2d>(out_channels, out_channels, 3, 1,
                                                             1, /*bias=*/false, gen));
  register_module("bn2", std::make_shared<BatchNorm2d>(out_channels));
  shortcut_ = register_module("shortcut", std::make_shared<Sequential>());
  if (stride != 1 || in_channels != out_channels) {
    shortcut_->push_back(std::make_shared<Conv2d>(in_channels, out_channels, 1, stride, 0,
                                                  /*bias=*/false, gen));
    shortcut_->push_back(std::make_shared<BatchNorm2d>(out_channels));
  }
}

Variable BasicBlock::forward(const Variable& x) {
  Variable out = relu(bn1()((*conv1_)(x)));
  out = bn2()((*conv2_)(out));
  return relu(out + (*shortcut_)(x));
}

std::string BasicBlock::describe() const {
  return detail::concat("BasicBlock(", in_channels_, " -> ", out_channels_, ", stride ",
                        stride_, shortcut_->empty() ? ", identity shortcut)" : ")");
}

}  // namespace ddp::nn
