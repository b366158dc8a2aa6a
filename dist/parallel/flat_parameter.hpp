// FlatParameter: a group of parameters moved into one flat buffer, padded to a multiple of
// the world size, so that one collective moves the whole group and each rank owns one
// even slice of it. Chapter 09; PyTorch's FSDP has the same object under the same name.
//
//   parameters  w1 (3x4)  b1 (4)  w2 (4x2)           -> flat: 12 + 4 + 8 = 24 elements
//   world 5:    ShardLayout S = 5, padded 25          -> rank r owns flat[5r, 5r + 5)
//
// The constructor copies each parameter's values into the buffer and makes the parameter
// a view of its place there: the model computes with the flat buffer from then on, and
// what is written into the buffer (an all-gather of the updated shards) is what the model
// sees. The padding is zero and stays zero.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/variable.hpp"
#include "dist/parallel/shard_layout.hpp"
#include "dist/process_group.hpp"

namespace ddp {

class FlatParameter {
 public:
  // `parameters`: float32, contiguous or not, all on one device, at least one.
  FlatParameter(std::vector<Variable> parameters, int rank, int world);

  const std::vector<Variable>& parameters() const { return parameters_; }
  std::int64_t offset(std::size_t i) const { return offsets_[i]; }  // parameter i in flat()
  const ShardLayout& layout() const { return layout_; }
  int rank() const { return rank_; }
  Tensor& flat() { return flat_; }                   // (padded_numel)
  const Tensor& flat() const { return flat_; }
  Tensor shard() const;                              // (S): this rank's slice of flat(), a view

  // Copies the parameters' gradients into `padded` (padded_numel), the padding zeroed; a
  // parameter without a gradient is an error naming it and `who`.
  void copy_gradients(Tensor& padded, const std::string& who) const;
  // Copies this rank's slice of the parameters' gradients into `shard` (S); the padding
  // part is left as it is (zero, when `shard` started zero). Every parameter must have a
  // gradient, also those outside the slice (the same error on every rank).
  void copy_shard_gradients(Tensor& shard, const std::string& who) const;

 private:
  const Tensor& gradient(std::size_t i, const std::string& who) const;  // defined, or Error

  std::vector<Variable> parameters_;
  std::vector<std::int64_t> offsets_;
  int rank_;
  ShardLayout layout_;
  Tensor flat_;
};

// The sharded wrappers' clip_grad_norm (ZeRO-2, FSDP), over the gradients of this rank's
// slices (`shards`, each with its averaged gradient): each rank's sum of squares (the
// padding adds zeros), one all-reduce of that number on the shards' device, then
// nn::clip_grad_norm's coefficient on every slice. Returns the global norm, as
// nn::clip_grad_norm does on one rank.
double clip_shard_gradients(const std::vector<Variable>& shards, double max_norm,
                            ProcessGroup& group);

}  // namespace ddp
