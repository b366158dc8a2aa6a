// Names of the reduce operations, for messages (who(), a sub-group's too), the argument
// checks, the host staging of CUDA tensors (Note [Staging CUDA tensors off the compute
// stream], process_group.hpp), and the store's part of an orderly end (Note [An orderly
// end]).
#include "dist/process_group.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dist/launch_env.hpp"
#include "tensor/cuda/device_info.hpp"  // use_device
#include "tensor/cuda/streams.hpp"
#include "base/error.hpp"
#include "base/who.hpp"

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

ProcessGroup::ProcessGroup(int rank, int size, std::chrono::milliseconds timeout,
                           InParent in_parent)
    : rank_(rank), size_(size), timeout_(timeout), in_parent_(std::move(in_parent)),
      host_(host_name()) {}

std::string ProcessGroup::who() const {
  const std::string about = backend_name() + ", " + host_;
  if (in_parent_.ranks.empty()) return rank_label(rank(), size(), about);
  const std::string group = list_ranks(in_parent_.ranks);
  const std::string parent = rank_label(in_parent_.rank, in_parent_.size, "");
  if (rank() < 0) return detail::concat(parent, " (", about, "), not in group ", group);
  return detail::concat(rank_label(rank(), size(), ""), " of group ", group, " (", about,
                        ", parent ", parent, ")");
}

std::unique_ptr<ProcessGroup> ProcessGroup::split(const std::vector<int>& ranks) {
  DDP_FAIL(who(), ": new_group(", list_ranks(ranks), "): this group does not make sub-groups "
           "(tcp, mpi and nccl groups do, a wrapper around one does not)\nhint: call "
           "new_group on the group it wraps, before wrapping");
}

std::string ProcessGroup::who(std::string_view speaker) const {
  return detail::concat(speaker, " on ", who());
}

std::string ProcessGroup::where(const char* collective) const {
  return detail::concat(who(), " ", collective);
}

void ProcessGroup::check_tensor(const Tensor& t, const char* collective, const char* name) const {
  DDP_CHECK(t.defined(), where(collective), ": ", name, " is undefined");
  DDP_CHECK(t.is_contiguous(), where(collective), ": ", name, " (", t.describe(),
            ") must be contiguous\nhint: pass t.contiguous() and copy the result back");
}

void ProcessGroup::check_root(const char* collective, int root) const {
  DDP_CHECK(root >= 0 && root < size(), where(collective), ": root ", root,
            " is not a rank of this group of ", size());
}

void ProcessGroup::check_all_gather(const Tensor& output, const Tensor& input) const {
  DDP_CHECK(input.dtype() == output.dtype(), where("all_gather"), ": input is ", input.describe(),
            " but output is ", output.describe());
  DDP_CHECK(output.numel() == input.numel() * size(), where("all_gather"), ": output has ",
            output.numel(), " elements, expected size() * input.numel() = ", size(), " * ",
            input.numel());
}

void ProcessGroup::check_reduce_scatter(const Tensor& output, const Tensor& input) const {
  DDP_CHECK(input.dtype() == output.dtype(), where("reduce_scatter"), ": input is ",
            input.describe(), " but output is ", output.describe());
  DDP_CHECK(input.numel() == output.numel() * size(), where("reduce_scatter"), ": input has ",
            input.numel(), " elements, expected size() * output.numel() = ", size(), " * ",
            output.numel());
}

namespace detail {

void leave_store(Store& store, const std::string& prefix, int rank, int size,
                 std::chrono::milliseconds patience) noexcept {
  using Clock = std::chrono::steady_clock;
  const std::string count_key = prefix + "/done";
  try {
    store.set(prefix + "/done/" + std::to_string(rank), "1");
    store.add(count_key, 1);
    if (rank != 0) return;  // rank 0's store must outlive us, not the other way round
    const Clock::time_point deadline = Clock::now() + patience;
    while (store.add(count_key, 0) < size) {
      if (Clock::now() >= deadline) {
        std::vector<int> missing;
        for (int r = 0; r < size; ++r) {
          if (!store.check({prefix + "/done/" + std::to_string(r)})) missing.push_back(r);
        }
        std::fprintf(stderr,
                     "ddp: %s: destroy(): %s never said done within %lld ms; the store stops "
                     "now and they may see it vanish\nhint: every rank calls destroy() (or "
                     "lets its group go) at the end\n",
                     rank_label(0, size, host_name()).c_str(), name_ranks(missing).c_str(),
                     static_cast<long long>(patience.count()));
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  } catch (const std::exception& e) {  // the store is gone: nobody is left to wait for
    std::fprintf(stderr, "ddp: %s: destroy(): the store did not answer: %s\n",
                 rank_label(rank, size, host_name()).c_str(), e.what());
  }
}

ComputeMark mark_compute_stream(const Tensor& a, const Tensor& b) {
  if (a.defined() && a.is_cuda()) return cuda::record_on_compute_stream(a.device().index);
  if (b.defined() && b.is_cuda()) return cuda::record_on_compute_stream(b.device().index);
  return nullptr;
}

Tensor host_copy(const Tensor& t, const ComputeMark& ready) {
  if (!t.is_cuda()) return t;
  Tensor host = host_buffer_like(t);
  staged_copy(t, host, ready);
  return host;
}

Tensor host_buffer_like(const Tensor& t) {
  if (!t.is_cuda()) return t;
  // The communication thread starts on GPU 0: it adopts the tensor's GPU before its first
  // CUDA call, or the pinned allocation would make a context on GPU 0 (cuda::use_device).
  cuda::use_device(t.device().index);
  return empty_pinned(t.shape(), t.dtype());
}

void staged_copy(const Tensor& src, const Tensor& dst, const ComputeMark& ready) {
  if (!src.is_cuda() && !dst.is_cuda()) {
    Tensor(dst).copy_(src);  // a handle on the same storage
    return;
  }
  cuda::use_device(src.is_cuda() ? src.device().index : dst.device().index);
  cuda::copy_on_copy_stream(src, dst, ready.get());
}

void copy_back(const Tensor& t, const Tensor& host, const ComputeMark& ready) {
  if (t.is_cuda()) staged_copy(host, t, ready);
}

std::string quote_failure_report(int peer, const std::string& report) {
  std::string out = concat("\n  rank ", peer, " had failed first:");
  std::size_t begin = 0;
  while (begin < report.size()) {
    const std::size_t end = std::min(report.find('\n', begin), report.size());
    out += "\n    " + report.substr(begin, end - begin);
    begin = end + 1;
  }
  return out;
}

}  // namespace detail

}  // namespace ddp
