// FlatParameter (see flat_parameter.hpp): flattening, and the gradients' way into a
// padded buffer or into this rank's slice.
#include "dist/parallel/flat_parameter.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "autograd/grad_mode.hpp"
#include "base/error.hpp"
#include "nn/clip_grad.hpp"
#include "tensor/memory.hpp"

namespace ddp {

FlatParameter::FlatParameter(std::vector<Variable> parameters, int rank, int world)
    : parameters_(std::move(parameters)), rank_(rank) {
  DDP_CHECK(!parameters_.empty(), "FlatParameter: no parameters");
  const Device device = parameters_.front().device();
  std::int64_t numel = 0;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const Tensor& p = parameters_[i].data();
    DDP_CHECK(p.dtype() == DType::Float32 && p.device() == device, "FlatParameter: parameter ",
              i, " is ", p.describe(), "; every parameter must be float32 on ", device.str());
    offsets_.push_back(numel);
    numel += p.numel();
  }
  layout_ = make_shard_layout(numel, world);
  NoGradGuard no_grad;
  {
    const memory::Scope model_state(memory::Category::Parameters);
    flat_ = zeros({layout_.padded_numel()}, {.device = device});
  }
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    Tensor& p = parameters_[i].data();  // the parameter's own handle: reseated below
    Tensor place = flat_.narrow(0, offsets_[i], p.numel());
    place.copy_(p.reshape({p.numel()}));
    p = place.view(p.shape());  // the old storage is freed when nothing else holds it
  }
}

const Tensor& FlatParameter::gradient(std::size_t i, const std::string& who) const {
  const Tensor& grad = parameters_[i].grad();
  DDP_CHECK(grad.defined(), who, ": parameter ", i,
            " has no gradient in this step; sharded training needs every parameter's "
            "(hint: every parameter must take part in the loss)");
  return grad;
}

Tensor FlatParameter::shard() const {
  return flat_.narrow(0, layout_.begin(rank_), layout_.shard_numel);
}

void FlatParameter::copy_gradients(Tensor& padded, const std::string& who) const {
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const Tensor& grad = gradient(i, who);
    padded.narrow(0, offsets_[i], grad.numel()).copy_(grad.reshape({grad.numel()}));
  }
  const std::int64_t padding = layout_.padded_numel() - layout_.numel;
  if (padding > 0) padded.narrow(0, layout_.numel, padding).zero_();
}

void FlatParameter::copy_shard_gradients(Tensor& shard, const std::string& who) const {
  // Every parameter checked, not only those in this rank's slice: a missing gradient must
  // stop every rank here, not one rank while the others wait in the next collective.
  for (std::size_t i = 0; i < parameters_.size(); ++i) static_cast<void>(gradient(i, who));
  const std::int64_t begin = layout_.begin(rank_), end = layout_.real_end(rank_);
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const std::int64_t first = std::max(begin, offsets_[i]);
    const std::int64_t last = std::min(end, offsets_[i] + parameters_[i].numel());
    if (first >= last) continue;  // parameter i lies outside this rank's slice
    const Tensor& grad = gradient(i, who);
    shard.narrow(0, first - begin, last - first)
        .copy_(grad.reshape({grad.numel()}).narrow(0, first - offsets_[i], last - first));
  }
}

double clip_shard_gradients(const std::vector<Variable>& shards, double max_norm,
                            ProcessGroup& group) {
  NoGradGuard no_grad;
  const double local = nn::grad_norm_squared(shards);
  // On the shards' device: NCCL all-reduces GPU memory only.
  Tensor total =
      from_data(std::vector<float>{static_cast<float>(local)}, {1}, shards.front().device());
  group.all_reduce(total, ReduceOp::Sum)->wait();
  const double norm = std::sqrt(static_cast<double>(total.cpu().item<float>()));
  nn::scale_grads(shards, nn::clip_coefficient(norm, max_norm));
  return norm;
}

}  // namespace ddp
