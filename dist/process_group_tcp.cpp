// ProcessGroupTcp (see process_group_tcp.hpp), in reading order: the set-up, the queue and
// its thread, the collectives, and the full-duplex step under them. The ring schedule they
// follow is in ring_schedule.cpp, the plain ring in plain_ring.cpp.
#include "dist/process_group_tcp.hpp"

#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <type_traits>

#include "base/deadline.hpp"
#include "dist/launch_env.hpp"  // host_name, process_label
#include "dist/plain_ring.hpp"
#include "dist/socket.hpp"      // resolve_ipv4
#include "dist/tcp_store.hpp"
#include "base/error.hpp"
#include "base/errno_text.hpp"
#include "base/trace.hpp"

namespace ddp {

// ==== Set-up ============================================================================

namespace {

constexpr std::uint32_t kRingMagic = 0x474e4952;  // "RING": the first bytes on a ring link

// The address other hosts reach us at. Through a TCPStore it is the address of the
// interface our store connection left from (loopback when the store is on 127.0.0.1);
// otherwise (a FileStore) whatever our host name resolves to.
std::string reachable_address(Store& store) {
  if (auto* tcp = dynamic_cast<TCPStore*>(&store)) return tcp->local_address();
  const std::string address = resolve_ipv4(host_name());
  return address.empty() ? "127.0.0.1" : address;
}

}  // namespace

ProcessGroupTcp::ProcessGroupTcp(std::shared_ptr<Store> store, int rank, int size,
                                 std::chrono::milliseconds timeout, std::string prefix,
                                 std::optional<LinkEmulation> link)
    : ProcessGroup(rank, size),
      store_(std::move(store)),
      timeout_(timeout),
      prefix_(std::move(prefix)),
      scratch_(kScratchBytes),
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
  if (size > 1) connect_ring(deadline_after(timeout_));
  // Two processes claimed one rank (Note [Claiming a rank], tcp_store.cpp): the ring may
  // have connected with one of each. Say so now rather than at the first collective.
  if (store_->check({kStoreConflictKey})) {
    DDP_FAIL(who(), ": ", store_->get(kStoreConflictKey, std::chrono::milliseconds(0)));
  }
  thread_ = std::thread([this] { communication_loop(); });
}

std::optional<LinkEmulation> ProcessGroupTcp::link() const {
  if (!link_) return std::nullopt;
  return link_->link();
}

std::string ProcessGroupTcp::description() const {
  if (plain_ring_) return "tcp (plain ring)";
  return link_ ? "tcp (emulated link " + link_->link().describe() + ")" : "tcp";
}

// Each rank listens, publishes where, connects to its right neighbour and accepts its
// left one. The connects cannot deadlock: the kernel completes a connection to a
// listening socket before anyone calls accept().
void ProcessGroupTcp::connect_ring(Clock::time_point deadline) {
  const int right_rank = neighbour(false);
  const int left_rank = neighbour(true);
  Socket listener = Socket::listen(reachable_address(*store_), 0);
  address_ = format_address(listener.local_address(), listener.local_port());
  // The host and the process first: whoever has read our address can read them (see
  // below), and name this process when it is lost.
  store_->set(prefix_ + "/host/" + std::to_string(rank()), host_name());
  store_->set(prefix_ + "/process/" + std::to_string(rank()), process_label());
  store_->set(prefix_ + "/addr/" + std::to_string(rank()), address_);

  const std::string right_key = prefix_ + "/addr/" + std::to_string(right_rank);
  try {
    right_address_ = store_->get(right_key, timeout_);
  } catch (const Error& e) {
    DDP_FAIL(who(), ": rank ", right_rank, " (our right neighbour) never published its ring "
             "address (store key \"", right_key, "\") within ", timeout_.count(), " ms\n  (",
             e.what(), ")\nhint: did rank ", right_rank, " start, and with the same world size?");
  }
  const auto [right_host, right_port] = split_address(right_address_);
  try {
    right_ = Socket::connect(right_host, right_port, deadline);
  } catch (const Error& e) {
    // A loopback address from another host is the usual culprit with a FileStore: a host
    // name that resolves to 127.0.1.1, as Debian's /etc/hosts makes it. (Ranks on two
    // hosts may still share a loopback, in containers or the local test cluster: only
    // failing to connect tells.)
    std::string right_machine;
    try {
      right_machine = store_->get(prefix_ + "/host/" + std::to_string(right_rank),
                                  std::chrono::milliseconds(0));
    } catch (const Error&) {
    }
    const bool loopback = right_host.starts_with("127.") || right_host == "::1";
    DDP_FAIL(who(), ": cannot reach rank ", right_rank, " (right neighbour) at ",
             right_address_, "\n  (", e.what(), ")\nhint: ",
             loopback && !right_machine.empty() && right_machine != host_name()
                 ? detail::concat("rank ", right_rank, " runs on ", right_machine,
                                  " but published a loopback address: its host name resolves "
                                  "to one (/etc/hosts); use a TCPStore (init env:// or tcp://), "
                                  "or make host names resolve to the network's addresses")
                 : std::string("a firewall between the hosts, or the wrong interface? Each "
                               "rank listens where its store connection leaves from"));
  }
  // Introduce ourselves: the left neighbour checks it is talking to the right rank, and
  // that both run the same ring (the plain and the pipelined one cut chunks differently).
  const std::uint32_t hello[4] = {kRingMagic, static_cast<std::uint32_t>(rank()),
                                  static_cast<std::uint32_t>(size()), plain_ring_ ? 1u : 0u};
  right_.send_all(hello, sizeof hello, deadline);

  while (!left_.valid()) {
    Socket s = listener.accept(deadline);
    DDP_CHECK(s.valid(), who(), ": rank ", left_rank, " (our left neighbour) never connected to ",
              address_, " within ", timeout_.count(), " ms\n",
              "hint: did rank ", left_rank, " start? Is this address reachable from its host?");
    std::uint32_t got[4] = {};
    try {
      s.recv_all(got, sizeof got, deadline);
    } catch (const Error&) {
      continue;  // not one of ours (a port scanner, say): wait for the real one
    }
    if (got[0] != kRingMagic) continue;
    DDP_CHECK(got[1] == static_cast<std::uint32_t>(left_rank) &&
                  got[2] == static_cast<std::uint32_t>(size()),
              who(), ": expected rank ", left_rank, " of ", size(), " on the ring, but rank ",
              got[1], " of ", got[2], " connected\nhint: two jobs share one store prefix?");
    const auto ring_name = [](bool plain) { return plain ? "plain" : "pipelined"; };
    DDP_CHECK(got[3] == hello[3], who(), ": rank ", left_rank, " (our left neighbour) runs the ",
              ring_name(got[3] == 1), " ring, this rank the ", ring_name(plain_ring_),
              " one\nhint: set DDP_TCP_RING the same on every rank (mpirun passes it on "
              "only with -x DDP_TCP_RING)");
    left_address_ = s.peer_name();
    left_ = std::move(s);
  }
  // Both neighbours published their process before their address: read at once, no wait.
  auto process_of = [this](int r) -> std::string {
    try {
      return store_->get(prefix_ + "/process/" + std::to_string(r), std::chrono::milliseconds(0));
    } catch (const Error&) {
      return "";
    }
  };
  left_process_ = process_of(left_rank);
  right_process_ = process_of(right_rank);
}

// ==== The queue and the communication thread ============================================

std::shared_ptr<Work> ProcessGroupTcp::enqueue(std::string description,
                                               std::function<void()> run) {
  auto work = std::make_shared<FutureWork>(who() + ": " + description);
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
    // Note [Spin, then sleep]: the next collective often comes within microseconds.
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
    current_deadline_ = deadline_after(timeout_);
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

// The first failure breaks the group for good: the ring's byte streams are out of step.
// We leave a report in the store (so ranks that only see our connection close can say
// why), then shut our sockets, so both neighbours stop waiting on us at once.
void ProcessGroupTcp::on_failure(const std::string& message) {
  broken_ = message;
  try {
    store_->set(prefix_ + "/failure/" + std::to_string(rank()), message, kReportTimeout);
  } catch (...) {  // the store may have died with the rank that failed us: nothing to add
  }
  left_.shutdown();
  right_.shutdown();
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
    detail::leave_store(*store_, prefix_, rank(), size(), std::min(timeout_, kLeavePatience));
  }
}

void ProcessGroupTcp::abort() noexcept {
  aborted_ = true;
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

// dst[i] = dst[i] (op) src[i]. Avg sums here and divides once at the end.
template <typename T>
void combine(T* dst, const T* src, std::size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      for (std::size_t i = 0; i < n; ++i) dst[i] += src[i];
      break;
    case ReduceOp::Max:
      for (std::size_t i = 0; i < n; ++i) dst[i] = std::max(dst[i], src[i]);
      break;
    case ReduceOp::Min:
      for (std::size_t i = 0; i < n; ++i) dst[i] = std::min(dst[i], src[i]);
      break;
  }
}

// Integer division truncates toward zero, as the interface promises for int64.
template <typename T>
void divide(T* data, std::int64_t n, int size) {
  for (std::int64_t i = 0; i < n; ++i) data[i] /= static_cast<T>(size);
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
    if (host.dtype() == DType::Float32 && plain_ring_ &&
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
// schedule], over nearly equal chunks, run as one stream (Note [One stream]).
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
  if (op == ReduceOp::Avg) divide(data, n, w);
}

// The plain ring on the two links, each send and receive bounded by the collective's
// deadline; a link that fails is named.
void ProcessGroupTcp::plain_all_reduce(float* data, std::int64_t n, ReduceOp op) {
  auto named = [this](bool left, auto&& io) {
    try {
      io();
    } catch (const Error& e) {
      DDP_FAIL(who(), ": ", current_, ": ", neighbour_name(left), ": ", e.what());
    }
  };
  const RingLinks links{
      [&](std::span<const float> chunk) {
        named(false, [&] { right_.send_all(chunk.data(), chunk.size_bytes(), current_deadline_); });
      },
      [&](std::span<float> chunk) {
        named(true, [&] { left_.recv_all(chunk.data(), chunk.size_bytes(), current_deadline_); });
      }};
  plain_ring_all_reduce({data, static_cast<std::size_t>(n)}, rank(), size(), links);
  if (op == ReduceOp::Avg) divide(data, n, size());
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
    if (host.dtype() == DType::Float32) {
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
    if (work.dtype() == DType::Float32) {
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
  for (int r = 1; r < w; ++r) combine(data, all + r * n, static_cast<std::size_t>(n), op);
  if (op == ReduceOp::Avg) divide(data, n, w);
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
  if (op == ReduceOp::Avg) divide(data + rank() * n, n, w);
}

std::shared_ptr<Work> ProcessGroupTcp::broadcast(Tensor& tensor, int root) {
  check_tensor(tensor, "broadcast", "tensor");
  check_root("broadcast", root);
  Tensor t = tensor;
  const std::string extra = " from rank " + std::to_string(root);
  detail::ComputeMark ready = detail::mark_compute_stream(t);
  return enqueue(describe("broadcast", t, extra.c_str()), [this, t, root, ready]() mutable {
    Tensor host = detail::host_copy(t, ready);
    ring_broadcast(static_cast<std::byte*>(host.raw_data()),
                   static_cast<std::size_t>(host.numel()) * element_size(host.dtype()), root);
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
    std::int64_t one = 1;
    ring_all_reduce(&one, 1, ReduceOp::Sum);
  });
}

// ==== The engine: one stream each way ==================================================
//
// Note [One stream]
// -----------------
// Read the table of Note [Ring schedule] down a column: what a rank receives at step s
// is exactly what it sends at step s+1. So a whole ring collective is, for one rank,
// two byte streams: in from the left, the chunks of steps 0, 1, 2, ... in order; out to
// the right, the first chunk, then the same received chunks again, each byte as soon
// as it has arrived (and, in a reduce step, been added to ours). No rank waits for a
// step to end before the next begins: the ring is a pipeline, byte by byte. A RingPlan
// lists the pieces; the broadcast is the same engine with an empty first piece.
//
// Both directions move at once (Note: done one after the other, both neighbours could
// sit in send() with full kernel buffers and nobody receiving). Both sockets are
// non-blocking and one loop moves whatever each can take: send what the right socket
// accepts, receive what the left has; only when neither moved, sleep in poll() on both.
// Received bytes of a reduce step land in scratch_ and are combined into the tensor at
// once (Note [Scratch size]). Left out, because they measured slower on loopback: fixed
// socket buffer sizes (they switch off Linux's autotuning), spinning before poll() in
// large transfers, and vmsplice() + splice() sends, which would also need an
// acknowledgement at the end of every collective (a page still queued for the neighbour
// would change under it). The figures: bench/README.md, "Chapter 05: the ring's speed".
//
// Note [Spin, then sleep]
// -----------------------
// A thread asleep (in poll(), or on the queue's condition variable) costs its waker a
// system call and itself a trip through the scheduler before it runs again: tens of
// microseconds on a busy host, as much as a whole small all-reduce moves bytes. So
// where the next event is usually microseconds away, the thread first looks again for
// a while (kSpin), calling sched_yield() between looks so that a rank sharing its core
// with the neighbour it waits for lets that neighbour run: the communication thread,
// for the next collective, after each one (back-to-back calls, a Reducer's buckets);
// and the small all-reduce (Note [Small all-reduce]), for its neighbour's bytes. The
// ring's large transfers do not spin: there the sleeps are long, and spinning cost
// them 10% at 64 MiB (Note [One stream]). The caller's own Work::wait() still sleeps.

// Note [Scratch size]
// -------------------
// One would expect a scratch buffer that fits in the L2 cache (512 KiB a core on the dev
// box) to be fastest. It is not: each turn of the loop below receives at most a scratch
// buffer's worth, then passes the reduced bytes on, and every send may wake the
// neighbour, a context switch that costs more here than the cache misses it saves. 4 MiB
// lets one recv() take nearly all that has arrived: on the dev box it was faster than
// 1 MiB and 256 KiB at 16-64 MiB in every comparison, and the same below, for 3 MiB more
// memory a group (bench/README.md, "Chapter 05: the ring's speed").
//
// Note [4K aliasing]
// ------------------
// scratch_ starts on a page boundary (a PageBuffer), and that is worth 5-25 % of an
// all-reduce of 1 MiB or more here. recv() is a copy, from the kernel's buffers to ours.
// A copy whose destination lies 1 to 31 bytes past its source, counted modulo 4 KiB,
// runs about three times slower on this box's CPU (AMD Zen 3): by their low 12 address
// bits the loads look as if they read what the stores just wrote, and wait for them
// (Intel's optimisation manual calls it "4K aliasing"). Where the kernel's bytes sit is
// not ours to choose, but on loopback their page offsets follow the stream's own bytes
// (the header below shows it), so where our buffer starts decides: a receive buffer 1-31
// bytes past a page boundary took about three times as long as one on it. A std::vector of
// a few MiB starts 16 bytes past a page (malloc's header), and so did our scratch buffer
// until it became a PageBuffer.
// The copy steps receive straight into the tensor, where the same rule holds: there the
// distance is set by where the tensor starts (64 bytes past a page, for a large
// aligned_alloc(64)) and by the header in front of the stream (Note [Collective
// check]). With the 128-byte header the tensor's bytes land 64 bytes behind the
// stream's: fast (a 48-byte header put them 16 ahead, and made large all-reduces up to 2x
// slower). A tensor that starts elsewhere (a view at an odd offset) works the same, and
// may run slower. The figures: bench/README.md, "Chapter 05: the ring's speed".
//
// Note [Send slices]
// ------------------
// A non-blocking send() takes all that fits in the socket's buffer, and Linux grows that
// buffer to several MiB: one call can copy for milliseconds, during which this thread
// receives nothing, its left neighbour's bytes pile up, and the ring runs in lurches
// (timed inside this loop at 16 MiB, np=2: a third of the time asleep in poll()).
// Capping each send at kSendSliceBytes alternates the two directions in pieces that
// still amortise the system call (14-21 % faster at 16-64 MiB on the dev box, the same
// below: bench/README.md, "Chapter 05: the ring's speed").
//
// Note [Where the ranks run]
// --------------------------
// On one host, placement matters more than anything in this loop. A neighbour's send
// wakes us with a "sync" wake-up, and when the other cores are busy Linux puts the woken
// thread on the sender's core: both ranks then share one core while another sits on the
// rest of the machine's load. Pinning each rank to its own core (taskset, or a launcher
// that binds as mpirun does by default for np <= 2) halved the np=2 all-reduce's time at
// 4 KiB-1 MiB on the loaded dev box. Nothing in this file pins threads: placement is the
// launcher's decision, not the backend's.
//
// Failures are named here: which neighbour, which rank, which address. A neighbour that
// closed its end (it died, or failed and shut its sockets) shows as EOF on the left
// socket, or as EPIPE/ECONNRESET or EOF on the right one; the right socket is watched
// only while we still owe it bytes: a neighbour that has finished may close it.

// Note [Collective check]
// -----------------------
// Every rank must call the same collectives, in the same order, with the same sizes. The
// ring cannot tell by itself: it moves bytes. If one rank all-reduced 6 floats while its
// neighbour all-reduced 4, they would combine the wrong bytes, one of them could finish
// "successfully" with garbage, and the bytes left over would corrupt the next collective.
// So each out-stream begins with a header of kHeaderBytes: a magic number, the
// collective's number in this group, and its description ("all_reduce of 6 float32
// (sum)": call, count, dtype, and op or root). A rank takes none of its left neighbour's
// data before that neighbour's header has matched its own. It costs 128 bytes a link
// per collective and no extra wait: the header travels in front of the data.

namespace {

constexpr std::size_t kHeaderBytes = 128;  // not 48: Note [4K aliasing]
constexpr std::uint32_t kHeaderMagic = 0x52504444;  // "DDPR" on the wire
// Layout: u32 magic, u32 description length, u64 sequence, description (zero-padded).
constexpr std::size_t kHeaderText = kHeaderBytes - 16;
using Header = std::array<std::byte, kHeaderBytes>;

Header make_header(std::uint64_t sequence, const std::string& description) {
  Header h{};
  const std::uint32_t length =
      static_cast<std::uint32_t>(std::min(description.size(), kHeaderText));
  std::memcpy(h.data(), &kHeaderMagic, 4);
  std::memcpy(h.data() + 4, &length, 4);
  std::memcpy(h.data() + 8, &sequence, 8);
  std::memcpy(h.data() + 16, description.data(), length);
  return h;
}

}  // namespace

void ProcessGroupTcp::check_header(const std::byte* theirs, const std::byte* ours) const {
  if (std::memcmp(theirs, ours, kHeaderBytes) == 0) return;
  std::uint32_t magic = 0, length = 0;
  std::uint64_t sequence = 0;
  std::memcpy(&magic, theirs, 4);
  std::memcpy(&length, theirs + 4, 4);
  std::memcpy(&sequence, theirs + 8, 8);
  DDP_CHECK(magic == kHeaderMagic && length <= kHeaderText, who(), ": ", current_, ": ",
            neighbour_name(true), " sent bytes that are not the start of a collective");
  const std::string description(reinterpret_cast<const char*>(theirs) + 16, length);
  DDP_FAIL(who(), ": ", neighbour_name(true), " is in another collective: its collective #",
           sequence, " is ", description, ", this rank's #", sequence_, " is ", current_,
           "\nhint: every rank must call the same collectives in the same order, with the "
           "same sizes, dtypes, ops and roots");
}

template <typename T>
void ProcessGroupTcp::run_ring(const RingPlan<T>& plan) {
  using Piece = typename RingPlan<T>::Piece;
  const std::size_t kElement = sizeof(T);
  // The out-stream: plan.first, then plan.steps (pieces of the in-stream, once in).
  auto send_piece = [&plan](std::size_t i) -> const Piece& {
    return i == 0 ? plan.first : plan.steps[i - 1];
  };
  const std::size_t first_bytes = static_cast<std::size_t>(plan.first.n) * kElement;
  const std::size_t send_total = static_cast<std::size_t>(plan.send_total) * kElement;
  std::size_t recv_total = 0;
  for (const Piece& p : plan.steps) recv_total += static_cast<std::size_t>(p.n) * kElement;

  std::size_t sent = 0;           // bytes of the out-stream sent
  std::size_t send_index = 0;     // ... in piece send_piece(send_index)
  std::size_t send_offset = 0;    // ... at this byte
  std::size_t received = 0;       // bytes of the in-stream landed (and reduced) in place
  std::size_t recv_index = 0;     // ... in piece plan.steps[recv_index]
  std::size_t recv_offset = 0;    // ... at this byte
  std::size_t pending = 0;        // bytes in scratch_ not yet combined (< one element)
  // Note [Collective check]: our header goes out first, the left's comes in first.
  const Header ours = make_header(sequence_, current_);
  Header theirs{};
  std::size_t header_sent = 0;
  std::size_t header_received = 0;

  // Note [Collective check], the race: a neighbour that finds our header wrong fails and
  // closes its links, and our next send to it can fail (the unread rest of our stream
  // turned its close into a reset) before we have read ITS header, which it sent before
  // it closed and which is already here. So a failed send reads the left's header first:
  // "in another collective", naming both calls, says more than "closed the connection"
  // (seen once with two ranks, in a full `ctest -j10` on a 16-core host).
  auto check_left_header_now = [&] {
    while (header_received < kHeaderBytes) {
      const Socket::IoResult r =
          left_.recv_some(theirs.data() + header_received, kHeaderBytes - header_received);
      if (r.status != Socket::IoStatus::Ok) return;  // not there (yet): nothing to say
      header_received += r.bytes;
    }
    check_header(theirs.data(), ours.data());  // throws when the two disagree
  };

  // One non-blocking send to the right, one receive from the left: the bytes moved (0
  // when the socket is not ready), or the failure, naming the neighbour.
  auto send_right = [&](const std::byte* from, std::size_t len) -> std::size_t {
    const Socket::IoResult r = right_.send_some(from, len);
    if (r.status == Socket::IoStatus::Ok) return r.bytes;
    if (r.status != Socket::IoStatus::WouldBlock) {
      check_left_header_now();
      fail_peer(false, PeerFault::Closed,
                r.status == Socket::IoStatus::Closed
                    ? std::string("closed the connection")
                    : "failed: " + errno_text(r.error));
    }
    return 0;
  };
  // Out to the right: into the socket, or onto the emulated wire (Note [Link model] in
  // dist/link_emulation.cpp), which hands the bytes to the socket as they arrive.
  auto push_right = [&](const std::byte* from, std::size_t len) -> std::size_t {
    return link_ ? link_->accept(from, len, Clock::now()) : send_right(from, len);
  };
  auto receive_left = [this](std::byte* into, std::size_t room) -> std::size_t {
    const Socket::IoResult r = left_.recv_some(into, room);
    if (r.status == Socket::IoStatus::Ok) return r.bytes;
    if (r.status != Socket::IoStatus::WouldBlock) {
      fail_peer(true, PeerFault::Closed,
                r.status == Socket::IoStatus::Closed
                    ? std::string("closed the connection")
                    : "failed: " + errno_text(r.error));
    }
    return 0;
  };

  Clock::time_point idle_since{};  // when the loop last stopped moving bytes (plan.spin)
  while (header_sent < kHeaderBytes || header_received < kHeaderBytes || sent < send_total ||
         received < recv_total || (link_ && !link_->empty())) {
    bool moved = false;

    // Out: the header, then what has arrived may go on, never more.
    const std::size_t may_send = std::min(send_total, first_bytes + received);
    if (header_sent < kHeaderBytes) {
      const std::size_t n = push_right(ours.data() + header_sent, kHeaderBytes - header_sent);
      header_sent += n;
      moved = n > 0;
    }
    if (header_sent == kHeaderBytes && sent < may_send) {
      const Piece& piece = send_piece(send_index);
      const std::size_t piece_bytes = static_cast<std::size_t>(piece.n) * kElement;
      const std::size_t len =  // Note [Send slices]
          std::min({piece_bytes - send_offset, may_send - sent, kSendSliceBytes});
      const auto* from = reinterpret_cast<const std::byte*>(piece.data) + send_offset;
      const std::size_t n = push_right(from, len);
      sent += n;
      send_offset += n;
      moved = moved || n > 0;
    }
    // In: the header, checked; then data, straight into place for a copy, through
    // scratch_ for a reduce.
    if (header_received < kHeaderBytes) {
      const std::size_t n =
          receive_left(theirs.data() + header_received, kHeaderBytes - header_received);
      header_received += n;
      moved = moved || n > 0;
      if (header_received == kHeaderBytes) check_header(theirs.data(), ours.data());
    }
    if (header_received == kHeaderBytes && received < recv_total) {
      const Piece& piece = plan.steps[recv_index];
      const std::size_t piece_bytes = static_cast<std::size_t>(piece.n) * kElement;
      auto* dst = reinterpret_cast<std::byte*>(piece.data) + recv_offset;
      std::byte* into = piece.reduce ? scratch_.data() + pending : dst;  // Note [4K aliasing]
      const std::size_t room = piece.reduce
                                   ? std::min(scratch_.size(), piece_bytes - recv_offset) - pending
                                   : piece_bytes - recv_offset;
      const std::size_t got = receive_left(into, room);
      if (got > 0) {
        moved = true;
        std::size_t landed = got;
        if (piece.reduce) {
          pending += got;
          landed = pending / kElement * kElement;  // whole elements only
          if constexpr (std::is_arithmetic_v<T>) {  // (broadcast moves bytes, never reduces)
            combine(reinterpret_cast<T*>(dst), reinterpret_cast<const T*>(scratch_.data()),
                    landed / kElement, plan.op);
          }
          pending -= landed;
          std::memmove(scratch_.data(), scratch_.data() + landed, pending);  // a split element
        }
        received += landed;
        recv_offset += landed;
      }
    }
    // The emulated wire hands on all that has arrived by now, stretch after stretch.
    for (const Clock::time_point now = Clock::now(); link_ && !link_->empty();) {
      const std::span<const std::byte> due = link_->due(now);
      const std::size_t n = due.empty() ? 0 : send_right(due.data(), due.size());
      if (n == 0) break;
      link_->delivered(n);
      moved = true;
    }
    // Step over finished (and empty) pieces.
    while (send_index <= plan.steps.size() && sent < send_total &&
           send_offset == static_cast<std::size_t>(send_piece(send_index).n) * kElement) {
      ++send_index;
      send_offset = 0;
    }
    while (recv_index < plan.steps.size() &&
           recv_offset == static_cast<std::size_t>(plan.steps[recv_index].n) * kElement) {
      ++recv_index;
      recv_offset = 0;
    }
    if (moved) {
      idle_since = {};
      continue;
    }
    if (plan.spin) {  // Note [Spin, then sleep]
      const Clock::time_point now = Clock::now();
      if (idle_since == Clock::time_point{}) idle_since = now;
      if (now - idle_since < kSpin) {
        ::sched_yield();
        continue;
      }
    }

    // Nothing moved: sleep until a socket is ready, in slices, to notice stop_ and the
    // deadline.
    if (stop_) DDP_FAIL(who(), ": ", current_, ": the process group was destroyed while it ran");
    const std::size_t to_receive = kHeaderBytes - header_received + recv_total - received;
    const std::size_t to_send = kHeaderBytes - header_sent + send_total - sent;
    if (Clock::now() >= current_deadline_) {
      const bool waiting_left = to_receive > 0;
      fail_peer(waiting_left, PeerFault::Silent, detail::concat(
          "did not ", waiting_left ? "send" : "take", " the remaining ",
          waiting_left ? to_receive : to_send, " bytes within the timeout of ",
          timeout_.count(), " ms (hung, or not in the same collective?)"));
    }
    pollfd fds[2] = {{left_.fd(), static_cast<short>(to_receive > 0 ? POLLIN : 0), 0},
                     {right_.fd(), 0, 0}};
    if (to_send > 0 || (link_ && !link_->empty())) {
      // POLLIN on a send-only socket can only mean the neighbour closed it. With an
      // emulated link, the socket is wanted only for bytes the wire has delivered.
      const bool ready = link_ ? !link_->due(Clock::now()).empty()
                               : header_sent < kHeaderBytes || sent < may_send;
      fds[1].events = static_cast<short>((ready ? POLLOUT : 0) | POLLIN);
    } else {
      fds[1].fd = -1;  // done with it; poll() skips negative fds
    }
    const int slice = std::min<int>(remaining_ms(current_deadline_),
                                    static_cast<int>(kPollSlice.count()));
    int polled = 0;
    if (!link_) {
      polled = ::poll(fds, 2, slice);
    } else {  // wake when the wire's next frame arrives, to the ns
      const Clock::time_point now = Clock::now();
      const auto wait = std::clamp<Clock::duration>(link_->next_arrival(now) - now,
                                                    Clock::duration::zero(),
                                                    std::chrono::milliseconds(slice));
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
      const timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
      polled = ::ppoll(fds, 2, &ts, nullptr);
    }
    if (polled < 0 && errno != EINTR) {
      DDP_FAIL(who(), ": ", current_, ": poll() failed: ", errno_text());
    }
    if (fds[1].revents & (POLLIN | POLLERR | POLLHUP)) {
      char byte = 0;
      const Socket::IoResult r = right_.recv_some(&byte, 1);
      if (r.status == Socket::IoStatus::Ok) {
        fail_peer(false, PeerFault::Closed, "sent bytes on a send-only link");
      }
      if (r.status != Socket::IoStatus::WouldBlock || (fds[1].revents & POLLERR)) {
        check_left_header_now();
        fail_peer(false, PeerFault::Closed, "closed the connection");
      }
    }
  }
}

namespace {
// Whether the neighbour at the other end of `link` has shut it (FIN or reset), found
// without reading from it.
bool has_closed(const Socket& link) {
  pollfd p{link.fd(), POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}
}  // namespace

std::string ProcessGroupTcp::neighbour_name(bool left) const {
  const std::string& process = left ? left_process_ : right_process_;
  return detail::concat("rank ", neighbour(left), " (", left ? "left" : "right",
                        " neighbour of rank ", rank(), ", ",
                        left ? left_address_ : right_address_,
                        process.empty() ? "" : ", " + process, ")");
}

// A close can also wait behind data. The dead rank's last bytes to us may still sit in
// its socket's send queue when it dies, our receive window full, and its FIN goes out
// only after them. Then has_closed() sees nothing yet, though that neighbour is gone. So
// when the right neighbour closed and left no report (it was rank 0 and its exit took the
// store with it), we read out the left link for up to kDrainPatience: its FIN, if it is
// coming, arrives. Only the left link can hold a close back like that: the right one
// carries nothing to us. (Seen in a full ctest -j2: of 4 ranks, rank 2 killed, rank 3
// named only rank 0, which had failed after rank 2 and exited.)
bool ProcessGroupTcp::left_closes_within(std::chrono::milliseconds patience) {
  const Clock::time_point deadline = Clock::now() + patience;
  while (!has_closed(left_)) {
    if (Clock::now() >= deadline) return false;
    const Socket::IoResult r = left_.recv_some(scratch_.data(), scratch_.size());
    if (r.status == Socket::IoStatus::Ok) continue;  // bytes in front of the close: dropped
    if (r.status != Socket::IoStatus::WouldBlock) return true;  // closed, or reset
    pollfd p{left_.fd(), POLLIN | POLLRDHUP, 0};
    ::poll(&p, 1, std::max(1, remaining_ms(deadline)));
  }
  return true;
}

// Throws the error of a step that failed because of a neighbour, naming it, and, when
// that neighbour failed first and said why (see on_failure), its report, indented under
// ours: its own hint and place are the ones that help, so ours add no second hint.
//
// When the other neighbour has closed its link too, that is said as well. A rank that
// dies closes both its links and the failure travels round the ring both ways, so
// either of our links may close first, and the first can be a neighbour that only
// failed after the dead one: its report would name the dead one, but is lost when it was
// rank 0 and the store went down with it. The second close can name the dead one.
void ProcessGroupTcp::fail_peer(bool left, PeerFault fault, const std::string& what) {
  const int peer = neighbour(left);
  std::string message = detail::concat(neighbour_name(left), " ", what, " during ", current_);
  const std::string key = prefix_ + "/failure/" + std::to_string(peer);
  std::string report;
  try {  // a peer writes its report before it closes its links: it is there, or never
    report = store_->get(key, std::chrono::milliseconds(0));
  } catch (...) {  // none; or the store was on a rank that is gone, or is frozen
  }
  bool other_closed = false;
  if (fault == PeerFault::Closed) {
    const bool wait_for_left = !left && report.empty();  // see left_closes_within
    other_closed = wait_for_left ? left_closes_within(kDrainPatience)
                                 : has_closed(left ? right_ : left_);
  }
  if (other_closed) {
    message += detail::concat("\n  ", neighbour_name(!left), " closed the connection too");
  }
  if (!report.empty()) {
    message += detail::concat("\n  rank ", peer, " had failed first:");
    std::size_t begin = 0;
    while (begin < report.size()) {
      const std::size_t end = std::min(report.find('\n', begin), report.size());
      message += "\n    " + report.substr(begin, end - begin);
      begin = end + 1;
    }
  } else {
    message += fault == PeerFault::Closed
                   ? detail::concat("\n  rank ", peer, " left no failure report: the process "
                                    "probably died (look at its own output)")
                   : detail::concat("\n  rank ", peer, " has not failed: it is hung, slower "
                                    "than the timeout, or in another collective (look at its "
                                    "own output)");
    message += "\nhint: every rank must call the same collectives in the same order; a rank "
               "that crashed shows its own error first";
  }
  DDP_FAIL(who(), ": ", message);
}

}  // namespace ddp
