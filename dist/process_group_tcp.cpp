// ProcessGroupTcp (see process_group_tcp.hpp), in reading order: the set-up, the queue and
// its thread, the end, and the collectives, each cut into a RingPlan for the ring. Chapter
// 05. The rest of the group has files of its own: connecting the ring, tcp_ring_connect.cpp;
// running a RingPlan, pipelined_ring.cpp; a failure's report and the neighbour it names,
// tcp_ring_failures.cpp. The ring schedule they follow is ring_schedule.cpp, the plain ring
// plain_ring.cpp and its halves plain_ring_halves.cpp.
#include "dist/process_group_tcp.hpp"

#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "base/deadline.hpp"
#include "base/error.hpp"
#include "base/trace.hpp"
#include "dist/host_reduce.hpp"
#include "dist/launch_env.hpp"  // host_name
#include "dist/tcp_store.hpp"  // kStoreConflictKey

namespace ddp {

// ==== Set-up ============================================================================

ProcessGroupTcp::ProcessGroupTcp(std::shared_ptr<Store> store, int rank, int size,
                                 std::chrono::milliseconds timeout, std::string prefix,
                                 std::optional<LinkEmulation> link, InParent in_parent)
    : ProcessGroup(rank, size, timeout, std::move(in_parent)),
      store_(std::move(store)),
      prefix_(std::move(prefix)),
      scratch_(kScratchBytes),
      link_config_(link),
      link_(link ? std::make_unique<EmulatedLink>(*link) : nullptr) {
  DDP_CHECK(store_ != nullptr, "ProcessGroupTcp needs a store");
  DDP_CHECK(size >= 1 && rank >= 0 && rank < size, "ProcessGroupTcp: rank ", rank,
            " of world size ", size, "\nhint: ranks are 0 .. world_size-1");
  if (const char* ring = std::getenv("DDP_TCP_RING"); ring != nullptr && *ring != '\0') {
    const std::string choice = ring;
    DDP_CHECK(choice == "plain" || choice == "pipelined", "DDP_TCP_RING='", choice,
              "': expected 'plain' (dist/plain_ring.hpp) or 'pipelined' (the default)");
    plain_ring_ = choice == "plain";
    DDP_CHECK(!(plain_ring_ && link_), "DDP_TCP_RING=plain cannot pace an emulated link "
              "(DDP_TCP_LINK): the pipelined ring does that");
  }
  const Clock::time_point deadline = deadline_after(timeout);
  if (size > 1) connect_ring(deadline);
  // DDP_TCP_LINK_SCOPE=between-hosts: a right neighbour on this host gets the plain socket.
  if (link_ && link_->link().between_hosts_only && right_host_ == host_name()) link_.reset();
  // Two processes claimed one rank (Note [Claiming a rank], tcp_store.cpp): the ring may
  // have connected with one of each. Say so now rather than at the first collective.
  if (store_->check({kStoreConflictKey})) {
    DDP_FAIL(who(), ": ", store_->get(kStoreConflictKey, std::chrono::milliseconds(0)));
  }
  if (size > 1) {  // shared memory when every rank is here (Note [Shared-memory all-reduce])
    const bool wanted = ShmGroup::wanted_by_env() && !link_ && !plain_ring_;
    // A rank that stops the others wrote its report first (on_failure): a short wait, not
    // none, so that the store's round trip has time to bring it.
    auto report_of = [this](int r) {
      try {
        return store_->get(prefix_ + "/failure/" + std::to_string(r), kReportTimeout);
      } catch (...) {  // none, or the store went down with that rank
        return std::string();
      }
    };
    shm_ = ShmGroup::open_if_one_host(*store_, prefix_, rank, size, wanted, deadline, who(),
                                      report_of);
  }
  thread_ = std::thread([this] { communication_loop(); });
}

std::unique_ptr<ProcessGroup> ProcessGroupTcp::split(const std::vector<int>& ranks) {
  std::string prefix = prefix_ + "/group" + std::to_string(groups_made_++);
  const auto me = std::find(ranks.begin(), ranks.end(), rank());
  if (me == ranks.end()) return nullptr;
  return std::make_unique<ProcessGroupTcp>(store_, static_cast<int>(me - ranks.begin()),
                                           static_cast<int>(ranks.size()), timeout(),
                                           std::move(prefix), link_config_,
                                           InParent{ranks, rank(), size()});
}

std::optional<LinkEmulation> ProcessGroupTcp::link() const {
  if (!link_) return std::nullopt;
  return link_->link();
}

std::string ProcessGroupTcp::description() const {
  if (plain_ring_) return "tcp (plain ring)";
  if (shm_) return "tcp (shared memory)";
  if (link_config_ && !link_) {  // between hosts only, and our right neighbour is here
    return "tcp (emulated link " + link_config_->describe() + "; none to our right neighbour)";
  }
  return link_ ? "tcp (emulated link " + link_->link().describe() + ")" : "tcp";
}

// ==== The queue and the communication thread ============================================

std::shared_ptr<Work> ProcessGroupTcp::enqueue(std::string description,
                                               std::function<void()> run) {
  auto work = std::make_shared<FutureWork>(who() + ": " + description, timeout());
  {
    std::lock_guard lock(mutex_);
    if (stop_) {  // destroy() has run: no thread is left to run it
      work->fail(std::make_exception_ptr(
          Error(work->description() + ": the process group was destroyed first")));
      return work;
    }
    queue_.push_back(Task{work, std::move(description), std::move(run)});
    ++queued_;
  }
  queue_cv_.notify_one();
  return work;
}

void ProcessGroupTcp::communication_loop() {
  trace::set_thread_name("tcp communication");
  // An emulated link wakes this thread every few microseconds to hand on arrived bytes;
  // Linux's default timer slack (50 us) would add that much to each of those sleeps.
  if (link_) ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  for (;;) {
    // Note [Spin, then sleep] (pipelined_ring.cpp): the next collective often comes
    // within microseconds.
    for (const Clock::time_point until = Clock::now() + kSpin;
         queued_.load() == 0 && !stop_ && Clock::now() < until;) {
      ::sched_yield();
    }
    Task task;
    {
      std::unique_lock lock(mutex_);
      queue_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) break;
      task = std::move(queue_.front());
      queue_.pop_front();
      --queued_;
      busy_ = true;
    }
    current_ = task.description;
    current_deadline_ = deadline_after(timeout());
    ++sequence_;
    std::exception_ptr error;
    try {
      DDP_CHECK(broken_.empty(), who(), ": ", current_, " refused: this process group failed "
                "earlier and cannot be used again:\n", broken_);
      std::optional<trace::Span> span;  // the collective on this thread's track
      if (trace::enabled()) span.emplace("comm", task.description);
      task.run();
    } catch (const std::exception& e) {
      if (broken_.empty()) on_failure(e.what());
      error = std::current_exception();
    }
    {
      // Idle again before the Work finishes: its waiter may call destroy() next, which
      // must see an orderly end (Note [An orderly end]).
      std::lock_guard lock(mutex_);
      busy_ = false;
    }
    if (error) {
      task.work->fail(error);
    } else {
      task.work->finish();
    }
  }
  // Destroyed: whatever is still queued fails, nobody waits for it forever.
  std::lock_guard lock(mutex_);
  for (Task& task : queue_) {
    task.work->fail(std::make_exception_ptr(
        Error(task.work->description() + ": the process group was destroyed first")));
  }
  queue_.clear();
  queued_ = 0;
}

// ==== The end =============================================================================

ProcessGroupTcp::~ProcessGroupTcp() { destroy(); }

void ProcessGroupTcp::destroy() {
  if (destroyed_.exchange(true)) return;
  bool orderly = false;  // nothing queued or running: the end after a final barrier
  {
    std::lock_guard lock(mutex_);
    orderly = queue_.empty() && !busy_;
    stop_ = true;
  }
  queue_cv_.notify_all();
  if (thread_.joinable()) thread_.join();  // broken_ is ours to read from here on
  // After the final barrier nothing is in flight on either link, and nothing unread sits
  // in our receive queue: close() sends a FIN, which the neighbour reads as an orderly
  // end (a reset comes only from closing with unread bytes).
  left_.close();
  right_.close();
  // Collectives cut short, or an abort, are no orderly end: the peers are failing too,
  // and nobody waits for them.
  if (orderly && broken_.empty() && !aborted_) {
    detail::leave_store(*store_, prefix_, rank(), size(), std::min(timeout(), kLeavePatience));
  }
}

void ProcessGroupTcp::abort() noexcept {
  aborted_ = true;
  if (shm_) shm_->abort(rank());
  left_.shutdown();
  right_.shutdown();
}

// ==== The collectives ===================================================================

void ProcessGroupTcp::check_tensor(const Tensor& t, const char* collective,
                                   const char* name) const {
  ProcessGroup::check_tensor(t, collective, name);
  DDP_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::Int64, where(collective), ": ", name,
            " is ", t.describe(), "; the tcp backend reduces float32 and int64");
}

namespace {

std::string describe(const char* call, const Tensor& t, const char* extra = "") {
  return detail::concat(call, " of ", t.numel(), " ", dtype_name(t.dtype()), extra);
}

}  // namespace

std::shared_ptr<Work> ProcessGroupTcp::all_reduce(Tensor& tensor, ReduceOp op) {
  check_tensor(tensor, "all_reduce", "tensor");
  Tensor t = tensor;  // shares the storage; the copy lives as long as the task
  const std::string extra = std::string(" (") + to_string(op) + ")";
  // CUDA tensors go through host memory: copied down once the compute stream reaches
  // `ready` (where the caller is now), the ring, copied back up; all off the compute
  // stream (Note [Staging CUDA tensors off the compute stream], dist/process_group.hpp).
  detail::ComputeMark ready = detail::mark_compute_stream(t);
  return enqueue(describe("all_reduce", t, extra.c_str()), [this, t, op, ready]() mutable {
    Tensor host = detail::host_copy(t, ready);
    if (shm_ && host.dtype() == DType::Float32) {
      shm_->all_reduce(host.data<float>(), host.numel(), op, shm_call());
    } else if (shm_) {
      shm_->all_reduce(host.data<std::int64_t>(), host.numel(), op, shm_call());
    } else if (host.dtype() == DType::Float32 && plain_ring_ &&
        (op == ReduceOp::Sum || op == ReduceOp::Avg)) {
      plain_all_reduce(host.data<float>(), host.numel(), op);
    } else if (host.dtype() == DType::Float32) {
      ring_all_reduce(host.data<float>(), host.numel(), op);
    } else {
      ring_all_reduce(host.data<std::int64_t>(), host.numel(), op);
    }
    detail::copy_back(t, host, ready);
  });
}

// The all-reduce: the reduce-scatter steps, then the all-gather steps of Note [Ring
// schedule], over nearly equal chunks, run as one stream (Note [One stream],
// pipelined_ring.cpp).
template <typename T>
void ProcessGroupTcp::ring_all_reduce(T* data, std::int64_t n, ReduceOp op) {
  const int w = size();
  if (w == 1) return;
  const auto bytes = static_cast<std::size_t>(n) * sizeof(T);
  if (takes_small_all_reduce(bytes, w)) {
    small_all_reduce(data, n, op);  // Note [Small all-reduce]
    return;
  }
  auto chunk = [n, w](int c) { return ring_chunk(n, w, c); };
  RingPlan<T> plan;
  plan.op = op;
  const auto [first_begin, first_end] = chunk(ring_all_reduce_step(rank(), w, 0).send_chunk);
  plan.first = {data + first_begin, first_end - first_begin, false};
  for (int step = 0; step < 2 * (w - 1); ++step) {
    const RingStep s = ring_all_reduce_step(rank(), w, step);
    const auto [begin, end] = chunk(s.recv_chunk);
    plan.steps.push_back({data + begin, end - begin, s.reduce});
  }
  plan.send_all_but_last_step();
  run_ring(plan);
  // Every rank divides the same sums the same way: the results stay identical.
  if (op == ReduceOp::Avg) detail::divide(data, n, w);
}

// The plain ring's two links, each send and receive bounded by the collective's deadline;
// a link that fails is named.
RingLinks ProcessGroupTcp::plain_links() {
  auto named = [this](bool left, auto&& io) {
    try {
      io();
    } catch (const Error& e) {
      DDP_FAIL(who(), ": ", current_, ": ", neighbour_name(left), ": ", e.what());
    }
  };
  return RingLinks{
      [this, named](std::span<const float> chunk) {
        named(false, [&] { right_.send_all(chunk.data(), chunk.size_bytes(), current_deadline_); });
        payload_sent_ += static_cast<std::int64_t>(chunk.size_bytes());
      },
      [this, named](std::span<float> chunk) {
        named(true, [&] { left_.recv_all(chunk.data(), chunk.size_bytes(), current_deadline_); });
      }};
}

void ProcessGroupTcp::plain_all_reduce(float* data, std::int64_t n, ReduceOp op) {
  plain_ring_all_reduce({data, static_cast<std::size_t>(n)}, rank(), size(), plain_links());
  if (op == ReduceOp::Avg) detail::divide(data, n, size());
}

// data: size() chunks of n; afterwards chunk rank() holds the reduction (Note [All-reduce =
// reduce-scatter + all-gather], plain_ring.hpp).
void ProcessGroupTcp::plain_reduce_scatter(float* data, std::int64_t n, ReduceOp op) {
  plain_ring_reduce_scatter({data, static_cast<std::size_t>(n * size())}, rank(), size(),
                            plain_links());
  if (op == ReduceOp::Avg) detail::divide(data + rank() * n, n, size());
}

std::shared_ptr<Work> ProcessGroupTcp::all_gather(Tensor& output, const Tensor& input) {
  check_tensor(input, "all_gather", "input");
  check_tensor(output, "all_gather", "output");
  check_all_gather(output, input);
  Tensor out = output;
  Tensor in = input;
  detail::ComputeMark ready = detail::mark_compute_stream(in, out);
  return enqueue(describe("all_gather", in), [this, out, in, ready]() mutable {
    Tensor host = detail::host_buffer_like(out);
    const std::int64_t n = in.numel();
    // Our own piece first, at its place: chunk rank() of the output.
    Tensor flat = host.reshape({host.numel()});
    detail::staged_copy(in.reshape({n}), flat.narrow(0, rank() * n, n), ready);
    if (shm_) {
      const std::size_t bytes = static_cast<std::size_t>(n) * element_size(host.dtype());
      auto* all = static_cast<std::byte*>(host.raw_data());
      shm_->all_gather(all + static_cast<std::size_t>(rank()) * bytes, all, bytes, shm_call());
    } else if (host.dtype() == DType::Float32 && plain_ring_) {
      plain_ring_all_gather(std::span(host.data<float>(), host.numel()), rank(), size(),
                            plain_links());
    } else if (host.dtype() == DType::Float32) {
      ring_all_gather(host.data<float>(), n);
    } else {
      ring_all_gather(host.data<std::int64_t>(), n);
    }
    detail::copy_back(out, host, ready);
  });
}

std::shared_ptr<Work> ProcessGroupTcp::reduce_scatter(Tensor& output, const Tensor& input,
                                                      ReduceOp op) {
  check_tensor(input, "reduce_scatter", "input");
  check_tensor(output, "reduce_scatter", "output");
  check_reduce_scatter(output, input);
  Tensor out = output;
  Tensor in = input;
  const std::string extra = std::string(" (") + to_string(op) + ")";
  detail::ComputeMark ready = detail::mark_compute_stream(in, out);
  std::string what = describe("reduce_scatter", in, extra.c_str());
  return enqueue(std::move(what), [this, out, in, op, ready]() mutable {
    // The input is const: reduce in a copy of it, then hand out our chunk.
    Tensor work = in.is_cuda() ? detail::host_copy(in, ready) : in.clone();
    const std::int64_t n = out.numel();
    // shm_ writes our block's result over our block of the input as it goes: each piece
    // of it is in a slot by then.
    if (shm_ && work.dtype() == DType::Float32) {
      float* all = work.data<float>();
      shm_->reduce_scatter(all, all + rank() * n, n, op, shm_call());
    } else if (shm_) {
      std::int64_t* all = work.data<std::int64_t>();
      shm_->reduce_scatter(all, all + rank() * n, n, op, shm_call());
    } else if (work.dtype() == DType::Float32 && plain_ring_ &&
        (op == ReduceOp::Sum || op == ReduceOp::Avg)) {
      plain_reduce_scatter(work.data<float>(), n, op);
    } else if (work.dtype() == DType::Float32) {
      ring_reduce_scatter(work.data<float>(), n, op);
    } else {
      ring_reduce_scatter(work.data<std::int64_t>(), n, op);
    }
    Tensor ours = work.reshape({work.numel()}).narrow(0, rank() * n, n).reshape(out.shape());
    detail::staged_copy(ours, out, ready);
  });
}

// Note [Small all-reduce]
// -----------------------
// The ring moves few bytes but takes 2(size-1) dependent steps: a chunk must be
// reduced at one rank before the next can add to it, and the finished chunks must go
// round again. For a small tensor the bytes cost nothing and the steps everything: each
// is a send, a wake-up of the neighbour, a receive (tens of microseconds on one host, a
// network's latency across hosts). So below kSmallAllReduceBytes every rank's whole
// tensor goes round the ring instead, an all-gather of size-1 steps, and each rank then
// reduces the size() tensors itself. Every rank adds the same numbers in the same order
// (rank 0's, then rank 1's, ...), so their float sums agree to the bit, as the ring's do
// (a ring chunk is summed once, at one rank, and copied to the others). Each rank sends
// (size-1)·S bytes instead of 2(size-1)/size·S: the same at 2 ranks, twice as much at 4,
// which is why this is for small tensors only. With a latency L a step, over a link of
// rate B, that is (size-1)·(L + S/B) against the ring's 2(size-1)·L + 2(size-1)/size·S/B.
// The path is taken while each rank sends at most kSmallAllReduceBytes on it, (size-1)·S:
// up to 64 KiB at 2 ranks, 21 KiB at 4. Measured on the 2-core dev box (bench/README.md,
// "small messages"), at 4 ranks it won at 16 KiB and lost at 64 KiB.
template <typename T>
void ProcessGroupTcp::small_all_reduce(T* data, std::int64_t n, ReduceOp op) {
  const int w = size();
  // all: (w, n), row r = rank r's tensor, in scratch_ (free: the all-gather's steps copy
  // straight into place, they never reduce through it).
  T* all = reinterpret_cast<T*>(scratch_.data());
  const auto row_bytes = static_cast<std::size_t>(n) * sizeof(T);
  // An empty tensor's data() is null, and memcpy from null is undefined even for 0 bytes
  // (UBSan says so): skip the copies, not the ring, whose headers every rank exchanges.
  if (row_bytes > 0) std::memcpy(all + rank() * n, data, row_bytes);
  ring_all_gather(all, n, /*spin=*/true);
  if (row_bytes > 0) std::memcpy(data, all, row_bytes);
  for (int r = 1; r < w; ++r) {
    detail::combine(data, all + r * n, static_cast<std::size_t>(n), op);
  }
  if (op == ReduceOp::Avg) detail::divide(data, n, w);
}

// The all-gather steps alone, on chunks of n: rank r's own data is chunk r.
template <typename T>
void ProcessGroupTcp::ring_all_gather(T* data, std::int64_t n, bool spin) {
  const int w = size();
  if (w == 1) return;
  RingPlan<T> plan;
  plan.spin = spin;
  plan.first = {data + rank() * n, n, false};
  for (int step = w - 1; step < 2 * (w - 1); ++step) {
    plan.steps.push_back({data + ring_all_reduce_step(rank(), w, step).recv_chunk * n, n, false});
  }
  plan.send_all_but_last_step();
  run_ring(plan);
}

// The reduce-scatter steps alone, on chunks of n: afterwards chunk r holds the result.
template <typename T>
void ProcessGroupTcp::ring_reduce_scatter(T* data, std::int64_t n, ReduceOp op) {
  const int w = size();
  if (w > 1) {
    RingPlan<T> plan;
    plan.op = op;
    plan.first = {data + ring_all_reduce_step(rank(), w, 0).send_chunk * n, n, false};
    for (int step = 0; step < w - 1; ++step) {
      plan.steps.push_back({data + ring_all_reduce_step(rank(), w, step).recv_chunk * n, n, true});
    }
    plan.send_all_but_last_step();
    run_ring(plan);
  }
  if (op == ReduceOp::Avg) detail::divide(data + rank() * n, n, w);
}

std::shared_ptr<Work> ProcessGroupTcp::broadcast(Tensor& tensor, int root) {
  check_tensor(tensor, "broadcast", "tensor");
  check_root("broadcast", root);
  Tensor t = tensor;
  const std::string extra = " from rank " + std::to_string(root);
  detail::ComputeMark ready = detail::mark_compute_stream(t);
  return enqueue(describe("broadcast", t, extra.c_str()), [this, t, root, ready]() mutable {
    Tensor host = detail::host_copy(t, ready);
    auto* data = static_cast<std::byte*>(host.raw_data());
    const std::size_t bytes = static_cast<std::size_t>(host.numel()) * element_size(host.dtype());
    if (shm_) {
      shm_->broadcast(data, bytes, root, shm_call());
    } else {
      ring_broadcast(data, bytes, root);
    }
    detail::copy_back(t, host, ready);
  });
}

// A pipeline around the ring from `root`: each rank passes on every byte as soon as it
// has it, except the last one before the root, which only receives.
void ProcessGroupTcp::ring_broadcast(std::byte* data, std::size_t bytes, int root) {
  if (size() == 1) return;
  const auto n = static_cast<std::int64_t>(bytes);
  RingPlan<std::byte> plan;
  if (rank() == root) {
    plan.first = {data, n, false};
    plan.send_total = n;
  } else {
    plan.steps.push_back({data, n, false});
    const bool last = neighbour(false) == root;
    plan.send_total = last ? 0 : n;
  }
  run_ring(plan);
}

std::shared_ptr<Work> ProcessGroupTcp::barrier() {
  // An all-reduce of one number: its result depends on every rank's input, so no rank
  // can finish it before all have entered.
  return enqueue("barrier", [this] {
    if (shm_) {
      shm_->barrier(shm_call());
      return;
    }
    std::int64_t one = 1;
    ring_all_reduce(&one, 1, ReduceOp::Sum);
  });
}

}  // namespace ddp
