// two_level_all_reduce (see two_level_group.hpp). This file holds exactly the function of
// exercise 07.3: the exercise build links the participant's copy in its place
// (tutorial/EXERCISES.md, Note [How an exercise replaces the reference]).
#include "dist/two_level_group.hpp"

#include <cstdint>

#include "dist/host_reduce.hpp"  // divide

namespace ddp {

void two_level_all_reduce(Tensor& tensor, ReduceOp op, ProcessGroup& node, ProcessGroup& across) {
  const std::int64_t n = tensor.numel();
  const int local = node.size();
  const std::int64_t slice_n = (n + local - 1) / local;  // a slice for each local rank
  Tensor flat = tensor.view({n});
  // The reduce-scatter takes local · slice_n elements: pad when L does not divide n.
  Tensor whole = flat;
  if (slice_n * local != n) {
    whole = zeros({slice_n * local}, TensorOptions{tensor.dtype()});
    whole.narrow(0, 0, n).copy_(flat);
  }
  Tensor slice = empty({slice_n}, TensorOptions{tensor.dtype()});
  // Avg: sums at both levels, one division by all the ranks at the end.
  const ReduceOp level_op = op == ReduceOp::Avg ? ReduceOp::Sum : op;
  node.reduce_scatter(slice, whole, level_op)->wait();  // 1. my node's sum of my slice
  across.all_reduce(slice, level_op)->wait();            // 2. every node's, for my slice
  if (op == ReduceOp::Avg) {
    const int world = node.size() * across.size();
    if (tensor.dtype() == DType::Float32) {
      detail::divide(slice.data<float>(), slice_n, world);
    } else {
      detail::divide(slice.data<std::int64_t>(), slice_n, world);
    }
  }
  node.all_gather(whole, slice)->wait();  // 3. every slice, from the node's ranks
  if (whole.raw_data() != flat.raw_data()) flat.copy_(whole.narrow(0, 0, n));
}

}  // namespace ddp
