// When FSDP gathers and frees a unit around its forward and backward (the schedule of
// fully_sharded_data_parallel.hpp). This file holds exactly the functions of exercise 09.3:
// the exercise build links the participant's copy in its place (tutorial/EXERCISES.md).
#include "autograd/ops/backward_hook.hpp"
#include "dist/parallel/fully_sharded_data_parallel.hpp"

namespace ddp {

// Unit u's forward hook, before its ops: its full parameters must be here; the next unit's
// all-gather starts now, so that it travels while u computes.
void FullyShardedDataParallel::before_forward(std::size_t u) {
  wait_gathered(u);
  if (options_.prefetch && u + 1 < units_.size()) start_gather(u + 1);
}

// Unit u's forward hook, after its ops: the full parameters go. Autograd still holds views
// of them for the backward, so the output carries a hook that gathers them again when the
// gradient reaches it, before any of u's backward ops runs. The last unit is the first
// whose backward runs, right after the loss: when a backward will follow, it stays whole
// (PyTorch's FSDP keeps the root's parameters after forward for the same reason).
Variable FullyShardedDataParallel::after_forward(std::size_t u, const Variable& output) {
  const bool backward_follows = output.requires_grad();
  if (!backward_follows || u + 1 < units_.size()) free_full(u);
  if (!backward_follows) return output;
  return ddp::before_backward(output, [this, u] { gather_for_backward(u); });
}

// The gradient has reached unit u's output: gather u again (into the very memory autograd's
// saved views point at), and start on u-1, whose backward comes next.
void FullyShardedDataParallel::gather_for_backward(std::size_t u) {
  wait_gathered(u);
  if (options_.prefetch && u > 0) start_gather(u - 1);
}

}  // namespace ddp
