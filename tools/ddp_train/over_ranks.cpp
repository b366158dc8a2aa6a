// What the Trainer does with the other ranks besides training: sums (the epoch's loss,
// the evaluation's counts), gathers (checkpoint sums, checks), and failing together
// (together: an error on one rank stops them all instead of leaving the others waiting).
// Chapter 06. Without a group each of them is this rank's own value.
#include "tools/ddp_train/trainer.hpp"

#include <exception>
#include <span>
#include <string>
#include <vector>

#include "base/who.hpp"  // name_ranks

namespace ddp::train {

void Trainer::together(const char* what, const std::function<void()>& action) {
  std::exception_ptr error;
  try {
    action();
  } catch (...) {
    error = std::current_exception();
  }
  if (!group_) {
    if (error) std::rethrow_exception(error);
    return;
  }
  const std::vector<std::int64_t> failed = gather_over_ranks({error ? 1 : 0});
  if (error) std::rethrow_exception(error);  // this rank's own message
  std::vector<int> ranks;
  for (int r = 0; r < world_size(); ++r) {
    if (failed[static_cast<std::size_t>(r)] != 0) ranks.push_back(r);
  }
  DDP_CHECK(ranks.empty(), "stopping: ", name_ranks(ranks), " failed ", what,
            " (its own message says why)");
}

void Trainer::sum_over_ranks(std::vector<double>& values, std::vector<std::int64_t>& counts) {
  if (!group_) return;
  // float32 on the wire (what every backend reduces); the counts exactly, as int64.
  std::vector<float> narrowed(values.begin(), values.end());
  Tensor v =
      from_data(std::span<const float>(narrowed), {static_cast<std::int64_t>(narrowed.size())})
          .to(device_);
  Tensor c =
      from_data(std::span<const std::int64_t>(counts), {static_cast<std::int64_t>(counts.size())})
          .to(device_);
  if (!values.empty()) group_->all_reduce(v)->wait();
  if (!counts.empty()) group_->all_reduce(c)->wait();
  const std::vector<float> summed = v.to_vector<float>();
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = summed[i];
  counts = c.to_vector<std::int64_t>();
}

std::vector<std::int64_t> Trainer::gather_over_ranks(const std::vector<std::int64_t>& mine) {
  if (!group_) return mine;
  const auto n = static_cast<std::int64_t>(mine.size());
  Tensor input = from_data(std::span<const std::int64_t>(mine), {n}).to(device_);
  Tensor all = empty({n * world_size()}, TensorOptions{.dtype = DType::Int64, .device = device_});
  group_->all_gather(all, input)->wait();
  return all.to_vector<std::int64_t>();
}

}  // namespace ddp::train
