// Whether operations on Variables record a graph. Chapter 03.
//
// Inside a NoGradGuard scope (evaluation, optimizer updates, DDP's parameter broadcast)
// ops compute values only: no Node is created and nothing is saved for backward.
// The switch is per thread, as in PyTorch.
#pragma once

namespace ddp {

bool grad_enabled();

class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace ddp
