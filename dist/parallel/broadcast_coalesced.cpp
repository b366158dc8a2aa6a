// broadcast_coalesced and broadcast_buffers (see broadcast_coalesced.hpp).
#include "dist/parallel/broadcast_coalesced.hpp"

#include "autograd/grad_mode.hpp"

namespace ddp {

void broadcast_coalesced(ProcessGroup& group, const std::vector<Tensor>& tensors, int root) {
  if (tensors.empty()) return;
  std::int64_t total = 0;
  for (const Tensor& t : tensors) total += t.numel();
  Tensor flat =
      empty({total}, TensorOptions{.dtype = tensors[0].dtype(), .device = tensors[0].device()});
  std::int64_t offset = 0;
  for (const Tensor& t : tensors) {
    flat.narrow(0, offset, t.numel()).view(t.shape()).copy_(t);
    offset += t.numel();
  }
  group.broadcast(flat, root)->wait();
  offset = 0;
  for (Tensor t : tensors) {  // a handle: copy_ writes into the caller's storage
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.shape()));
    offset += t.numel();
  }
}

void broadcast_buffers(const nn::Module& module, ProcessGroup& group, int root) {
  NoGradGuard no_grad;
  std::vector<Tensor> floats, int64s;
  for (const auto& [name, b] : module.named_buffers()) {
    (b.dtype() == DType::Int64 ? int64s : floats).push_back(b);
  }
  broadcast_coalesced(group, floats, root);
  broadcast_coalesced(group, int64s, root);
}

}  // namespace ddp
