// The Reducer (see reducer.hpp). Chapter 07.
//
// Reading order: the bucket assignment; construction (buckets, views, hooks); one
// backward pass (prepare, the hook, launching, the end-of-backward callback); the
// rebuild after the first step; the table and the timeline's row.
#include "dist/parallel/reducer.hpp"

#include <algorithm>
#include <optional>
#include <sstream>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "autograd/engine.hpp"
#include "autograd/grad_mode.hpp"
#include "dist/all_gather_text.hpp"
#include "dist/parallel/ledger.hpp"
#include "base/error.hpp"
#include "base/trace.hpp"

namespace ddp {

// Note [Why buckets]
// ------------------
// Backward produces gradients from the last layer to the first. An all-reduce launched
// as soon as a group of gradients is final runs on the network while backward computes
// the layers before them: by the time backward ends, only the last bucket's all-reduce
// (the first layers' gradients) is still to come. One all-reduce per parameter would
// overlap just as well but pays the per-collective latency 29 times (161 for a
// ResNet-50); one all-reduce of everything (chapter 06) pays it once but cannot start
// before backward ends. Buckets of a few MiB are the compromise: few collectives, most
// of them hidden. The first bucket is small (1 MiB) so that the network starts early;
// the cost model in cost_model.hpp predicts the best cap for a given link.
//
// Note [Launch order]
// -------------------
// Every rank must launch the same collectives in the same order (the ring matches them
// by position). The order gradients become ready can differ between ranks: threads,
// a branch one rank skipped. So buckets are launched strictly in bucket order: bucket k
// goes only once it and every bucket before it are complete. A rank whose bucket 2 is
// complete before bucket 1 holds it back; that costs a little overlap, never a deadlock.
//
// Note [A divisor per iteration]
// ------------------------------
// A comm hook's finish leaves the average over the group's W ranks (its contract, and
// what bf16_compress_hook does too). Inside chapter 08's Join, fewer ranks may have
// contributed, and the average may be wanted over those d ranks only (Note [Which
// divisor] in join.cpp). The divisor comes with each forward (prepare_for_backward), and
// after the hook the Reducer rescales the bucket by W/d: every hook works unchanged, at
// the price of one more float32 rounding in the iterations where d != W (none at all
// outside a Join, or with divide_by_initial_world_size, where d == W).

// ---- The bucket assignment ------------------------------------------------------------

namespace {
// The bytes of `floats` float32 gradients: what a bucket cap counts.
std::int64_t gradient_bytes(std::int64_t floats) {
  return floats * static_cast<std::int64_t>(sizeof(float));
}
}  // namespace

// assign_buckets: in assign_buckets.cpp (exercise 07.1).

CommHook allreduce_hook() {
  return CommHook{
      "all-reduce",
      [](ProcessGroup& group, Tensor& bucket) { return group.all_reduce(bucket, ReduceOp::Sum); },
      // Note [Averaging gradients] in distributed_data_parallel.cpp: sum, then / W.
      [](ProcessGroup& group, Tensor& bucket) {
        bucket.mul_(1.0f / static_cast<float>(group.size()));
      }};
}

// ---- Construction ---------------------------------------------------------------------

Reducer::Reducer(std::vector<std::pair<std::string, Variable>> parameters, ProcessGroup& group,
                 ReducerOptions options)
    : parameters_(std::move(parameters)),
      group_(group),
      options_(options),
      hook_(allreduce_hook()) {
  DDP_CHECK(!parameters_.empty(), who(), ": the model has no parameters to reduce");
  DDP_CHECK(options_.bucket_cap_bytes > 0 && options_.first_bucket_bytes > 0, who(),
            ": bucket caps must be positive (bucket_cap_bytes ", options_.bucket_cap_bytes,
            ", first_bucket_bytes ", options_.first_bucket_bytes, ")");
  const Device device = parameters_[0].second.device();
  std::vector<std::int64_t> bytes;
  for (const auto& [name, p] : parameters_) {
    DDP_CHECK(p.requires_grad() && p.data().dtype() == DType::Float32, who(), ": parameter '", name,
              "' is ", p.data().describe(),
              "; the Reducer takes float32 parameters that "
              "require grad");
    DDP_CHECK(p.device() == device, who(), ": parameter '", name, "' is on ", p.device().str(),
              " but '", parameters_[0].first, "' is on ", device.str(),
              "\nhint: move the whole model (module.to(device)) before wrapping it in DDP");
    bytes.push_back(gradient_bytes(p.numel()));
  }
  // Backward produces the last registered parameters' gradients first.
  std::vector<std::size_t> order(parameters_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = order.size() - 1 - i;
  build_buckets(
      assign_buckets(bytes, order, options_.first_bucket_bytes, options_.bucket_cap_bytes));
  check_same_assignment();

  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    hook_ids_.push_back(parameters_[i].second.register_grad_ready_hook(
        [this, i](const Variable&) { on_gradient_ready(i); }));
  }
}

Reducer::~Reducer() {
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    parameters_[i].second.remove_grad_ready_hook(hook_ids_[i]);
  }
}

// Allocates one flat buffer per bucket and makes each parameter's gradient a view of its
// place there, keeping any gradient it already held (an accumulation in progress, or the
// gradients of the buckets being replaced by a rebuild).
void Reducer::build_buckets(const std::vector<std::vector<std::size_t>>& assignment) {
  NoGradGuard no_grad;
  std::vector<Bucket> buckets(assignment.size());
  std::vector<Slot> slots(parameters_.size());
  for (std::size_t b = 0; b < assignment.size(); ++b) {
    Bucket& bucket = buckets[b];
    bucket.parameters = assignment[b];
    std::int64_t total = 0;
    for (std::size_t k = 0; k < bucket.parameters.size(); ++k) {
      const std::size_t i = bucket.parameters[k];
      bucket.offsets.push_back(total);
      slots[i] = Slot{b, k};
      total += parameters_[i].second.numel();
    }
    bucket.flat = zeros(
        {total}, TensorOptions{.dtype = DType::Float32, .device = parameters_[0].second.device()});
  }
  buckets_ = std::move(buckets);
  slots_ = std::move(slots);
  // Gradients already there move into the buckets; the others stay undefined until
  // prepare_for_backward.
  zero_filled_.resize(parameters_.size(), false);
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (parameters_[i].second.grad().defined()) attach_gradient(i);
  }
}

Tensor Reducer::bucket_view(std::size_t parameter) const {
  const Slot& slot = slots_[parameter];
  const Bucket& bucket = buckets_[slot.bucket];
  const Variable& p = parameters_[parameter].second;
  return bucket.flat.narrow(0, bucket.offsets[slot.index], p.numel()).view(p.shape());
}

// PyTorch's gradient_as_bucket_view: the gradient IS the bucket's memory. Backward's
// AccumulateGrad adds into a defined gradient in place (autograd/node.cpp), so once the
// view is attached (and zeroed), backward writes straight into the bucket.
void Reducer::attach_gradient(std::size_t parameter) {
  const Variable& p = parameters_[parameter].second;
  const Tensor view = bucket_view(parameter);
  const Tensor& grad = p.grad();
  const bool attached = grad.defined() && grad.storage() == view.storage() &&
                        grad.offset() == view.offset() && grad.strides() == view.strides();
  if (attached) return;
  Tensor target = view;  // a handle: writes land in the bucket
  if (grad.defined()) {
    target.copy_(grad);
  } else {
    target.zero_();
  }
  zero_filled_[parameter] = !grad.defined();
  p.set_grad(view);
}

// ---- One backward pass ----------------------------------------------------------------

void Reducer::prepare_for_backward(const Variable& output, bool sync, int divisor) {
  // A backward that threw half-way (hooks fired, no end-of-backward callback), or one
  // whose reduction failed: buckets were left unreduced on this rank, maybe reduced on
  // others, and the ranks' collectives are out of step.
  DDP_CHECK(!broken_ && !(expecting_backward_ && callback_queued_), who(),
            ": a forward began, but the last backward did not finish its reduction (it "
            "threw): the ranks are out of step\nhint: end the job (chapter 08 covers "
            "recovery)");
  check_divisor(divisor);
  if (rebuild_due_) rebuild_from_arrival_order();
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < parameters_.size(); ++i) attach_gradient(i);
  expecting_backward_ = true;
  sync_ = sync;
  divisor_ = divisor;
  callback_queued_ = false;
  ready_.assign(parameters_.size(), false);
  for (Bucket& bucket : buckets_) {
    bucket.pending = bucket.parameters.size();
    bucket.work = nullptr;
  }
  next_bucket_ = 0;
  arrival_order_.clear();
  unused_.clear();
  if (sync && options_.find_unused_parameters) unused_ = unused_in_graph(output);
}

// The grad-ready hook of parameter i: its gradient for this backward is final.
void Reducer::on_gradient_ready(std::size_t parameter) {
  DDP_CHECK(expecting_backward_, who(), ": parameter '", parameters_[parameter].first,
            "' got a gradient in a backward that no forward through DistributedDataParallel "
            "prepared\nhint: call ddp(x), not the wrapped module, before each backward");
  if (!callback_queued_) {
    callback_queued_ = true;
    queue_backward_callback([this] { finish_backward(); });
    // Parameters the graph does not reach will get no hook: they are ready now (with
    // a zero contribution, should a zero_grad() since the forward have detached them).
    for (const std::size_t i : unused_) {
      attach_gradient(i);
      mark_ready(i);
    }
  }
  // A user's zero_grad() between forward and backward detaches the view: re-attach.
  attach_gradient(parameter);
  zero_filled_[parameter] = false;  // it holds a real gradient now
  if (sync_) {
    arrival_order_.push_back(parameter);  // unused ones not: they would lead the rebuild
    mark_ready(parameter);
  }
}

// mark_ready and launch_ready_buckets: in reducer_ready.cpp (exercise 07.2).

namespace {
// The category of the Reducer's instants on the timeline; launches_row() draws them.
constexpr std::string_view kTraceCategory = "reducer";
}  // namespace

// Launches bucket b's reduction through the comm hook, recording it for the timeline
// (chapter 07) and the ledger (chapter 08).
void Reducer::launch_bucket(std::size_t b) {
  if (trace::enabled()) trace::instant(kTraceCategory, detail::concat("bucket ", b, ": launch"));
  // A watched group (chapter 08) records the bucket with the collective it launches.
  const ledger::Label label(detail::concat("bucket ", b));
  buckets_[b].work = hook_.launch(group_, buckets_[b].flat);
}

// Runs once backward has finished (queue_backward_callback): every gradient this rank
// will produce exists. Waits for every bucket, then the gradients are averages.
void Reducer::finish_backward() {
  try {
    reduce_buckets();
  } catch (...) {
    broken_ = true;  // Note: prepare_for_backward refuses from now on
    wait_for_launched();
    throw;
  }
  expecting_backward_ = false;
}

void Reducer::drop_zero_filled_gradients() {
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (zero_filled_[i]) parameters_[i].second.set_grad(Tensor());
  }
}

void Reducer::reduce_buckets() {
  if (!sync_) {                    // no_sync: the gradients stay local, accumulated in the buckets
    drop_zero_filled_gradients();  // those no backward wrote to keep none, as before
    return;
  }
  std::vector<std::string> missing;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (!ready_[i]) missing.push_back(parameters_[i].first);
  }
  if (!missing.empty()) {
    std::string names;
    for (std::size_t k = 0; k < missing.size() && k < 8; ++k) names += " " + missing[k];
    if (missing.size() > 8) names += detail::concat(" (and ", missing.size() - 8, " more)");
    DDP_FAIL(who(), ": ", missing.size(), " parameter", missing.size() == 1 ? "" : "s",
             " got no gradient in this backward:", names,
             "\nhint: a parameter that does not take part in the loss cannot be reduced: "
             "its bucket never completes. Pass find_unused_parameters (--find-unused-"
             "parameters) if the model skips parts of itself on some steps, or make every "
             "parameter contribute");
  }
  // With find_unused_parameters, which parameters did ANY rank use? One more small
  // all-reduce, after the last bucket on every rank.
  Tensor used;
  std::shared_ptr<Work> used_work;
  if (options_.find_unused_parameters) {
    used =
        ones({static_cast<std::int64_t>(parameters_.size())}, TensorOptions{.dtype = DType::Int64});
    for (const std::size_t i : unused_) used.data<std::int64_t>()[i] = 0;
    used = used.to(buckets_[0].flat.device());
    used_work = group_.all_reduce(used, ReduceOp::Sum);
  }
  // block_stream: on NCCL the GPU's compute stream waits for each bucket (the host goes on
  // queueing the optimizer's kernels); on tcp and mpi the host waits (Work::block_stream).
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    {
      std::optional<trace::Span> wait;  // the exposed communication, if any
      if (trace::enabled()) wait.emplace("wait", detail::concat("wait for bucket ", b));
      DDP_CHECK(bucket.work != nullptr, who(), ": bucket ", b,
                " was never launched, though backward has finished (launch_ready_buckets)");
      // Taken out of the bucket before the wait: if the wait throws, wait_for_launched (on
      // the way out) must not wait for this collective again, a second timeout.
      const std::shared_ptr<Work> work = std::exchange(bucket.work, nullptr);
      work->block_stream();
    }
    hook_.finish(group_, bucket.flat);
    apply_divisor(bucket.flat);
  }
  if (used_work) {
    used_work->wait();
    const std::vector<std::int64_t> users = used.to_vector<std::int64_t>();
    // Used nowhere, and no gradient before (only the zeros the Reducer put there): leave
    // it without one, as PyTorch does, so that the optimizer skips it (weight decay and
    // momentum included).
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
      if (users[i] == 0 && zero_filled_[i]) parameters_[i].second.set_grad(Tensor());
      if (users[i] > 0) zero_filled_[i] = false;  // it holds the average of real gradients
    }
  }
  if (rebuilds_ == 0 && options_.rebuild_buckets) rebuild_due_ = true;
}

void Reducer::wait_for_launched() {
  for (Bucket& bucket : buckets_) {
    if (!bucket.work) continue;
    try {
      bucket.work->wait();
    } catch (...) {  // the error being reported says more than this one
    }
    bucket.work = nullptr;
  }
}

void Reducer::check_divisor(int divisor) const {
  DDP_CHECK(divisor >= 1 && divisor <= group_.size(), who(), ": divisor ", divisor,
            " for the summed gradients; it must count contributing ranks, 1 to ", group_.size());
}

void Reducer::apply_divisor(Tensor& bucket) const {
  if (divisor_ == group_.size()) return;  // the hook has divided by W already
  bucket.mul_(static_cast<float>(group_.size()) / static_cast<float>(divisor_));
}

// The parameters whose AccumulateGrad the graph of `output` does not reach: backward will
// never call their hooks. (PyTorch walks the graph the same way, at the same moment.)
std::vector<std::size_t> Reducer::unused_in_graph(const Variable& output) const {
  std::unordered_set<const Node*> seen;
  if (output.defined() && output.requires_grad()) {
    std::vector<const Node*> stack{output.gradient_edge().get()};
    while (!stack.empty()) {
      const Node* node = stack.back();
      stack.pop_back();
      if (node == nullptr || !seen.insert(node).second) continue;
      for (const auto& next : node->next_functions()) stack.push_back(next.get());
    }
  }
  std::vector<std::size_t> unused;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (!seen.contains(parameters_[i].second.gradient_edge().get())) unused.push_back(i);
  }
  return unused;
}

// ---- The rebuild ----------------------------------------------------------------------

// After the first synchronised backward, the buckets are regrouped in the order the
// gradients really arrived: registration order is only a guess (a model may register a
// layer it uses first last). Ranks may have seen different orders, so all adopt rank 0's
// (broadcast), and the new assignment is checked to be the same everywhere.
void Reducer::rebuild_from_arrival_order() {
  rebuild_due_ = false;
  rebuilds_ = 1;
  const auto n = static_cast<std::int64_t>(parameters_.size());
  Tensor order = empty({n}, TensorOptions{.dtype = DType::Int64});
  std::int64_t* data = order.data<std::int64_t>();
  for (std::int64_t k = 0; k < n; ++k) {
    data[k] = k < static_cast<std::int64_t>(arrival_order_.size())
                  ? static_cast<std::int64_t>(arrival_order_[k])
                  : -1;
  }
  // On the parameters' device: NCCL moves GPU memory only.
  Tensor shared = order.to(parameters_[0].second.device());
  group_.broadcast(shared, /*root=*/0)->wait();
  order = shared.cpu();
  data = order.data<std::int64_t>();
  std::vector<std::size_t> agreed;
  std::vector<bool> listed(parameters_.size(), false);
  for (std::int64_t k = 0; k < n; ++k) {
    const std::int64_t i = data[k];
    if (i < 0 || i >= n || listed[i]) continue;
    listed[i] = true;
    agreed.push_back(static_cast<std::size_t>(i));
  }
  // Parameters rank 0 did not see (unused in its first step) go last, in reverse order.
  for (std::size_t i = parameters_.size(); i-- > 0;) {
    if (!listed[i]) agreed.push_back(i);
  }
  std::vector<std::int64_t> bytes;
  for (const auto& [name, p] : parameters_) bytes.push_back(gradient_bytes(p.numel()));
  const auto assignment =
      assign_buckets(bytes, agreed, options_.first_bucket_bytes, options_.bucket_cap_bytes);
  if (assignment == bucket_assignment()) return;
  build_buckets(assignment);
  check_same_assignment();
}

void Reducer::check_same_assignment() const {
  std::string mine;
  for (const auto& bucket : bucket_assignment()) {
    for (const std::size_t i : bucket) mine += std::to_string(i) + " ";
    mine += "| ";
  }
  const std::vector<std::string> all =
      all_gather_text(group_, mine, parameters_[0].second.device());
  for (std::size_t r = 1; r < all.size(); ++r) {
    DDP_CHECK(all[r] == all[0], who(), ": rank ", r,
              " grouped the parameters into other "
              "buckets than rank 0 (rank 0: ",
              all[0], "; rank ", r, ": ", all[r],
              ")"
              "\nhint: every rank must use the same bucket caps and the same model");
  }
}

// ---- Reporting ------------------------------------------------------------------------

std::vector<std::vector<std::size_t>> Reducer::bucket_assignment() const {
  std::vector<std::vector<std::size_t>> assignment;
  for (const Bucket& bucket : buckets_) assignment.push_back(bucket.parameters);
  return assignment;
}

std::string Reducer::describe_buckets() const {
  std::ostringstream out;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& bucket = buckets_[b];
    const std::int64_t floats = bucket.flat.numel();
    out << "bucket " << b << ": " << bucket.parameters.size() << " parameter"
        << (bucket.parameters.size() == 1 ? "" : "s") << ", " << floats << " floats ("
        << (gradient_bytes(floats) + kKiB / 2) / kKiB << " KiB):";
    for (const std::size_t i : bucket.parameters) out << ' ' << parameters_[i].first;
    out << '\n';
  }
  return out.str();
}

// launch_bucket's instants, "bucket 12: launch", each drawn as the digit before the colon.
trace::InstantRow Reducer::launches_row() {
  auto digit = [](std::string_view name) {
    const std::size_t colon = name.find(':');
    return colon == std::string_view::npos || colon == 0 ? char{0} : name[colon - 1];
  };
  return trace::InstantRow{
      .category = std::string(kTraceCategory), .title = "bucket launches", .mark = digit};
}

void Reducer::set_comm_hook(CommHook hook) {
  DDP_CHECK(!expecting_backward_, who(), ": set_comm_hook during a backward pass");
  DDP_CHECK(hook.launch && hook.finish, who(), ": comm hook '", hook.name,
            "' needs both launch and finish");
  hook_ = std::move(hook);
}

std::string Reducer::who() const { return group_.who("Reducer"); }

}  // namespace ddp
