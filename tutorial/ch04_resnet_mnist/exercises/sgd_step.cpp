// Exercise 04.1: SGD's update (tutorial/ch04_resnet_mnist/README.md#exercise-1).
// Your copy: tutorial/ch04_resnet_mnist/mine/sgd_step.cpp (tools/exercise start 04.1).
// Write SGD::step with the formulas of nn/sgd.hpp (torch.optim.SGD's): weight decay,
// momentum with dampening, Nesterov, in place, under NoGradGuard. Check it with
// tools/exercise check 04.1.
#include "autograd/grad_mode.hpp"
#include "nn/sgd.hpp"

namespace ddp::nn {

void SGD::step() {
  DDP_FAIL("exercise 04.1 is not done yet: see tutorial/ch04_resnet_mnist/README.md#exercise-1");
}

}  // namespace ddp::nn
