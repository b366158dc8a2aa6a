// ReLU (see relu.hpp).
#include "nn/relu.hpp"

#include "autograd/functions.hpp"

namespace ddp::nn {

Variable ReLU::forward(const Variable& x) { return relu(x); }

}  // namespace ddp::nn
