// Names of the reduce operations, for messages, and the host staging of CUDA tensors
// (see dist/process_group.hpp).
#include "dist/process_group.hpp"

namespace ddp {

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

namespace detail {

Tensor host_copy(const Tensor& t) {
  if (!t.is_cuda()) return t;
  Tensor host = empty_pinned(t.shape(), t.dtype());
  host.copy_(t);
  return host;
}

Tensor host_buffer_like(const Tensor& t) {
  return t.is_cuda() ? empty_pinned(t.shape(), t.dtype()) : t;
}

}  // namespace detail

}  // namespace ddp
