// The stop agreement: after every step the ranks agree on whether to stop, so that a stop
// signal that reached one rank ends the run for all of them after the same step. Chapter
// 08. The handler that records the signal is stop_request.cpp's; what happens after the
// agreed step (the checkpoint, the exit code 75) is run_epochs' (trainer.cpp) and main's.
#include "tools/ddp_train/trainer.hpp"

#include <cstdint>
#include <span>

#include "tools/ddp_train/stop_request.hpp"

namespace ddp::train {

// Note [Agreeing to stop]
// A signal reaches the ranks at different times: ddprun forwards it to one after the
// other, SLURM signals each task, a user may `kill` one rank. A rank that stopped alone
// would leave the others waiting in the next step's all-reduce until --timeout. So after
// every step each rank contributes the signal it has seen (0: none) to a one-element
// all-reduce with Max, and all of them act on the result: they stop after the same step,
// with the same model, and rank 0 saves it. The cost is one 8-byte all-reduce per step,
// a round trip (tens of microseconds over loopback tcp, a few over NCCL) against a step's
// milliseconds (on a GPU it adds no wait: train_step already reads the loss back every
// step); checking every K steps would divide it by K and delay the stop by up to K
// steps, and riding on the gradients' all-reduce would tie this file to the Reducer.
// The signal handler itself only records the number: stop_request.cpp.
bool Trainer::stop_agreed() {
  std::int64_t sig = stop_signal();
  if (group_) {
    Tensor flag = from_data(std::span<const std::int64_t>(&sig, 1), {1}).to(device_);
    group_->all_reduce(flag, ReduceOp::Max)->wait();
    sig = flag.to_vector<std::int64_t>()[0];
  }
  stop_signal_ = static_cast<int>(sig);
  return sig != 0;
}

}  // namespace ddp::train
