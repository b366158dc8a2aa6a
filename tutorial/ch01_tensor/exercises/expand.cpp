// Exercise 01.2: expand, a broadcast view (tutorial/ch01_tensor/README.md#exercise-2).
// Your copy: tutorial/ch01_tensor/mine/expand.cpp (tools/exercise start 01.2).
// Write Tensor::expand (tensor/tensor.hpp): the same storage and offset, new sizes, and
// strides that make every repeated index read the same element. Check it with
// tools/exercise check 01.2.
#include "tensor/tensor.hpp"

namespace ddp {

Tensor Tensor::expand(const Shape& shape) const {
  (void)shape;
  DDP_FAIL("exercise 01.2 is not done yet: see tutorial/ch01_tensor/README.md#exercise-2");
}

}  // namespace ddp
