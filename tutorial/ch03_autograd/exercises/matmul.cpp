// Exercise 03.1: matmul and its backward (tutorial/ch03_autograd/README.md#exercise-1).
// Your copy: tutorial/ch03_autograd/mine/matmul.cpp (tools/exercise start 03.1).
// Write matmul(a, b) on Variables (autograd/functions.hpp): the forward with ddp::matmul,
// recorded with make_result and a Node whose backward gives dA = dC B^T and dB = A^T dC
// (autograd/ops/linear.cpp's LinearBackward is a model). Check it with
// tools/exercise check 03.1 (gradcheck: finite differences).
#include "autograd/function.hpp"
#include "autograd/functions.hpp"
#include "tensor/ops.hpp"

namespace ddp {

Variable matmul(const Variable& a, const Variable& b) {
  (void)a, (void)b;
  DDP_FAIL("exercise 03.1 is not done yet: see tutorial/ch03_autograd/README.md#exercise-1");
}

}  // namespace ddp
