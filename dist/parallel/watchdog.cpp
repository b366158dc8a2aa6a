// WatchedGroup (see watchdog.hpp), in reading order: the shared state and Note [Failing
// once], the Work it hands out, the collectives, the watchdog thread, the end.
#include "dist/parallel/watchdog.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <span>

#include "dist/launch_env.hpp"  // host_name, process_label
#include "dist/parallel/desync_diagnosis.hpp"
#include "base/exit_codes.hpp"
#include "dist/tcp_store.hpp"  // kStoreConflictKey
#include "base/error.hpp"
#include "base/text.hpp"  // one_line
#include "base/who.hpp"   // rank_label

namespace ddp {

namespace {
// A store call made while failing: the store may be on a rank that is gone, or frozen.
constexpr auto kReportTimeout = ProcessGroup::kReportTimeout;
// The store is looked at every this many polls.
constexpr int kStoreEvery = 5;
// A rank's reason in rank 0's listing is cut to this many characters.
constexpr std::size_t kReasonChars = 240;

std::string cut(std::string s, std::size_t n) {
  s = one_line(std::move(s));
  return s.size() <= n ? s : s.substr(0, n) + " ...";
}
}  // namespace

// ==== The shared state, and failing once ==================================================

struct WatchedGroup::State {
  ledger::Ledger ledger;
  int rank = 0;
  int size = 1;
  std::string host = host_name();
  std::int64_t pid = ::getpid();
  std::shared_ptr<Store> store;
  WatchOptions options;
  std::string who;  // "rank 2/4 (tcp, node07)"
  std::string rank0_process;  // "node07, pid 4711": the store's process, named when it is gone
  std::mutex inner_mutex;
  ProcessGroup* inner = nullptr;  // to abort; null once the group is destroyed
  std::atomic<bool> failing = false;

  std::string key(const std::string& what) const { return options.prefix + "/" + what; }
  std::string key(const std::string& what, int r) const {
    return options.prefix + "/" + what + "/" + std::to_string(r);
  }

  // The last tail_length entries, and the oldest still in flight when it is older.
  ledger::Tail my_tail(const std::string& why) const {
    ledger::Tail t{rank, host, pid, cut(why, 2000), ledger.tail(options.tail_length)};
    std::vector<ledger::Entry> all = ledger.tail(ledger::Ledger::kKept);
    for (const ledger::Entry& e : all) {
      if (e.done) continue;
      if (t.entries.empty() || e.seq < t.entries.front().seq) {
        t.entries.insert(t.entries.begin(), e);
      }
      break;
    }
    return t;
  }

  [[noreturn]] void fail(const std::string& why, int exit_code);
  void diagnose_on_rank_0();
  void print_own_tail(const ledger::Tail& t, const char* because);
};

void WatchedGroup::State::fail(const std::string& why, int exit_code) {
  if (failing.exchange(true)) {
    // Another thread is failing for us and ends the process within a few seconds
    // (Note [Failing once]); this one must not print a second story meanwhile.
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  std::fprintf(stderr, "ddp watchdog: %s, pid %lld: %s\n", who.c_str(),
               static_cast<long long>(pid), why.c_str());
  std::fflush(stderr);

  const ledger::Tail tail = my_tail(why);
  bool published = false;
  if (store) {
    try {
      store->set(key("tail", rank), ledger::encode(tail), kReportTimeout);
      const std::string first =
          detail::concat(rank_label(rank, process_label(host, pid)), ": ", cut(why, kReasonChars));
      store->compare_set(key("abort"), "", first);
      published = true;
    } catch (const std::exception&) {  // the store is gone: nobody gathers; say it here
    }
  }
  if (!published) {
    const std::string because =
        store ? detail::concat("the store did not answer: rank 0 (", rank0_process,
                               "), whose process serves it, is gone or cannot be reached")
              : std::string("no store to compare the ranks' ledgers through (mpi)");
    print_own_tail(tail, because.c_str());
  } else if (rank == 0) {
    diagnose_on_rank_0();
  } else {
    // Rank 0 gathers; a launcher stops the job once the first rank exits, so stay until
    // rank 0 has printed (or its store is gone).
    try {
      store->wait({key("diagnosed")}, options.gather + std::chrono::seconds(2));
      store->add(key("released"), 1);  // rank 0 may go: its store has served us
    } catch (const std::exception&) {
      print_own_tail(tail, "rank 0 printed no diagnosis");
    }
  }
  {
    std::lock_guard lock(inner_mutex);
    if (inner != nullptr) inner->abort();
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(exit_code);
}

void WatchedGroup::State::diagnose_on_rank_0() {
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(key("tail", r));
  const Clock::time_point deadline = Clock::now() + options.gather;
  try {
    while (Clock::now() < deadline && !store->check(keys)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception&) {
  }
  std::vector<std::optional<ledger::Tail>> tails(static_cast<std::size_t>(size));
  std::vector<std::string> processes(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    const auto now = std::chrono::milliseconds(0);
    try {
      processes[r] = store->get(key("process", r), now);
    } catch (const std::exception&) {
    }
    try {
      tails[r] = ledger::decode(store->get(key("tail", r), now));
    } catch (const std::exception&) {
    }
  }
  std::string text = "ddp watchdog: diagnosis: " + diagnose_desync(tails, processes) + "\n";
  for (const auto& t : tails) {
    if (!t) continue;
    const ledger::Entry* w = t->waiting_in();
    text += detail::concat("ddp watchdog:   ", t->who(), ": ",
                           w ? "in " + describe(*w)
                             : t->entries.empty() ? std::string("no collective called")
                                                  : "after " + describe(t->entries.back()),
                           "; gave up: ", cut(t->reason, kReasonChars), "\n");
  }
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
  // The others wait for this key; rank 0's process serves the store, so it stays until
  // they have read it (at most kReportTimeout), or they would see the store vanish.
  try {
    store->set(key("diagnosed"), "1", kReportTimeout);
    std::int64_t waiting = 0;
    for (int r = 1; r < size; ++r) waiting += tails[r] ? 1 : 0;
    const Clock::time_point until = Clock::now() + kReportTimeout;
    while (store->add(key("released"), 0) < waiting && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  } catch (const std::exception&) {
  }
}

void WatchedGroup::State::print_own_tail(const ledger::Tail& t, const char* because) {
  std::string text = detail::concat("ddp watchdog: ", who, ": ", because,
                                    ": this rank's last collectives, oldest first:\n");
  for (const ledger::Entry& e : t.entries) {
    text += detail::concat("ddp watchdog:   ", describe(e), e.done ? "  done" : "  IN FLIGHT",
                           "\n");
  }
  if (t.entries.empty()) text += "ddp watchdog:   (none)\n";
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
}

// ==== The Work it hands out ===============================================================

namespace {

class WatchedWork final : public Work {
 public:
  WatchedWork(std::shared_ptr<Work> inner, std::shared_ptr<WatchedGroup::State> state,
              std::uint64_t seq)
      : Work(inner->timeout()), inner_(std::move(inner)), state_(std::move(state)), seq_(seq) {}

  bool is_completed() override { return inner_->is_completed(); }
  std::exception_ptr exception() override { return inner_->exception(); }

  using Work::wait;
  using Work::block_stream;
  void wait(std::chrono::milliseconds timeout) override {
    try {
      inner_->wait(timeout);
    } catch (const std::exception& e) {
      state_->fail(what() + ": " + e.what(), kExitWatchdog);
    }
    state_->ledger.mark_done(seq_);
  }
  void block_stream(std::chrono::milliseconds timeout) override {
    try {
      inner_->block_stream(timeout);
    } catch (const std::exception& e) {
      state_->fail(what() + ": " + e.what(), kExitWatchdog);
    }
  }

 private:
  std::string what() const {
    const auto e = state_->ledger.entry(seq_);
    return e ? describe(*e) : detail::concat("collective #", seq_);
  }

  std::shared_ptr<Work> inner_;
  std::shared_ptr<WatchedGroup::State> state_;
  std::uint64_t seq_;
};

}  // namespace

// ==== Construction and the collectives ====================================================

WatchedGroup::WatchedGroup(std::unique_ptr<ProcessGroup> inner, WatchOptions options)
    : ProcessGroup(inner ? inner->rank() : 0, inner ? inner->size() : 1,
                   inner ? inner->timeout() : std::chrono::milliseconds(0)),
      inner_(std::move(inner)),
      options_(std::move(options)),
      state_(std::make_shared<State>()) {
  DDP_CHECK(inner_ != nullptr, "watch(): no process group to watch");
  store_ = options_.store ? options_.store : inner_->store();
  state_->rank = rank();
  state_->size = size();
  state_->store = store_;
  state_->options = options_;
  state_->who = who();
  state_->inner = inner_.get();
  const char* debug = std::getenv("DDP_DISTRIBUTED_DEBUG");
  if (debug != nullptr && std::string(debug) == "DETAIL") options_.check_calls = true;
  DDP_CHECK(!options_.check_calls || inner_->backend_name() != "nccl", who(),
            ": watch(): the call check (check_calls, DDP_DISTRIBUTED_DEBUG=DETAIL) all-gathers "
            "a CPU tensor, which nccl cannot\nhint: debug the desync with the tcp backend");
  if (store_) {
    store_->set(state_->key("process", rank()), process_label(state_->host, state_->pid));
    // Rank 0 serves the store: the one process every rank must be able to name when the
    // store goes (the others are named by the ledgers, or by the group's own errors).
    state_->rank0_process = store_->get(state_->key("process", 0), timeout());
  }
  thread_ = std::thread([this] { watch_loop(); });
}

std::shared_ptr<Work> WatchedGroup::track(std::uint64_t seq, std::shared_ptr<Work> work) {
  {
    std::lock_guard lock(mutex_);
    in_flight_.push_back({seq, work, Clock::now() + timeout()});
  }
  return std::make_shared<WatchedWork>(std::move(work), state_, seq);
}

// Note [Checking calls]: the fingerprint is four int64 (seq, op, dtype, count); all-gathered,
// every rank holds every rank's, so all find the same mismatch and fail with the same
// diagnosis (diagnose_desync on one-entry tails; other ranks' labels are not sent).
void WatchedGroup::check_call(std::uint64_t seq) {
  const std::optional<ledger::Entry> e = state_->ledger.entry(seq);
  if (!e) return;
  auto dtype_code = [](const std::string& dtype) -> std::int64_t {
    return dtype == "float32" ? 1 : dtype == "int64" ? 2 : dtype.empty() ? 0 : 3;
  };
  const std::int64_t mine_values[4] = {static_cast<std::int64_t>(e->seq),
                                       static_cast<std::int64_t>(e->op), dtype_code(e->dtype),
                                       e->count};
  Tensor mine = from_data(std::span<const std::int64_t>(mine_values), {4});
  Tensor all = empty({4 * size()}, {DType::Int64});
  try {
    inner_->all_gather(all, mine)->wait();
  } catch (const std::exception& ex) {
    fail(detail::concat("the call check of ", describe(*e), " failed: ", ex.what()),
         kExitWatchdog);
  }
  const std::int64_t* v = all.data<std::int64_t>();
  bool same = true;
  std::vector<std::optional<ledger::Tail>> tails(static_cast<std::size_t>(size()));
  for (int r = 0; r < size(); ++r) {
    const std::int64_t* f = v + 4 * r;
    same = same && std::equal(f, f + 4, mine_values);
    ledger::Entry theirs = *e;
    theirs.seq = static_cast<std::uint64_t>(f[0]);
    theirs.op = static_cast<ledger::Op>(f[1]);
    theirs.dtype = f[2] == 1 ? "float32" : f[2] == 2 ? "int64" : f[2] == 0 ? "" : "other";
    theirs.count = f[3];
    if (r != rank()) theirs.label.clear();
    tails[r] = ledger::Tail{r, "", 0, "", {theirs}};
  }
  if (!same) {
    fail("call check (WatchOptions::check_calls): " + diagnose_desync(tails), kExitWatchdog);
  }
}

namespace {
// Records, forwards, and on an argument error (thrown before anything was queued) marks
// the entry done, so that the watchdog does not wait for a collective that never started.
template <typename Call>
std::shared_ptr<Work> forward(ledger::Ledger& ledger, std::uint64_t seq, Call call) {
  try {
    return call();
  } catch (...) {
    ledger.mark_done(seq);
    throw;
  }
}
}  // namespace

std::uint64_t WatchedGroup::record(ledger::Op op, const Tensor* t) {
  const std::uint64_t seq = state_->ledger.record(
      op, t != nullptr ? std::string(dtype_name(t->dtype())) : std::string(),
      t != nullptr ? t->numel() : 0);
  if (options_.check_calls) check_call(seq);
  return seq;
}

std::shared_ptr<Work> WatchedGroup::all_reduce(Tensor& tensor, ReduceOp op) {
  const std::uint64_t seq = record(ledger::Op::AllReduce, &tensor);
  return track(seq, forward(state_->ledger, seq, [&] { return inner_->all_reduce(tensor, op); }));
}

std::shared_ptr<Work> WatchedGroup::broadcast(Tensor& tensor, int root) {
  const std::uint64_t seq = record(ledger::Op::Broadcast, &tensor);
  return track(seq, forward(state_->ledger, seq, [&] { return inner_->broadcast(tensor, root); }));
}

std::shared_ptr<Work> WatchedGroup::all_gather(Tensor& output, const Tensor& input) {
  const std::uint64_t seq = record(ledger::Op::AllGather, &input);
  return track(seq,
               forward(state_->ledger, seq, [&] { return inner_->all_gather(output, input); }));
}

std::shared_ptr<Work> WatchedGroup::reduce_scatter(Tensor& output, const Tensor& input,
                                                   ReduceOp op) {
  const std::uint64_t seq = record(ledger::Op::ReduceScatter, &input);
  return track(seq, forward(state_->ledger, seq,
                            [&] { return inner_->reduce_scatter(output, input, op); }));
}

std::shared_ptr<Work> WatchedGroup::barrier() {
  const std::uint64_t seq = record(ledger::Op::Barrier, nullptr);
  return track(seq, forward(state_->ledger, seq, [&] { return inner_->barrier(); }));
}

const ledger::Ledger& WatchedGroup::ledger() const { return state_->ledger; }

void WatchedGroup::fail(const std::string& why, int exit_code) { state_->fail(why, exit_code); }

// ==== The watchdog thread =================================================================

void WatchedGroup::watch_loop() {
  for (int poll = 1;; ++poll) {
    std::optional<std::pair<std::string, int>> verdict;  // why, exit code
    {
      std::unique_lock lock(mutex_);
      if (wake_.wait_for(lock, options_.poll, [this] { return stop_; })) return;
      // Oldest first: a later collective cannot finish before an earlier one on a ring,
      // and the oldest is the one to name.
      while (!in_flight_.empty()) {
        InFlight& f = in_flight_.front();
        bool completed = false;
        try {  // nccl asks CUDA and NCCL, which may throw: the thread must not die of it
          completed = f.work->is_completed();
        } catch (const std::exception& e) {
          const auto entry = state_->ledger.entry(f.seq);
          verdict = {(entry ? describe(*entry) : "a collective") + " failed: " + e.what(),
                     kExitWatchdog};
          break;
        }
        if (completed) {
          if (std::exception_ptr error = f.work->exception()) {
            std::string message = "?";
            try {
              std::rethrow_exception(error);
            } catch (const std::exception& e) {
              message = e.what();
            }
            const auto e = state_->ledger.entry(f.seq);
            verdict = {(e ? describe(*e) : "a collective") + " failed: " + message,
                       kExitWatchdog};
            break;
          }
          state_->ledger.mark_done(f.seq);
          in_flight_.pop_front();
          continue;
        }
        if (Clock::now() >= f.deadline) {
          const auto e = state_->ledger.entry(f.seq);
          verdict = {detail::concat(e ? describe(*e) : "a collective",
                                    " did not finish within the timeout of ",
                                    timeout().count(), " ms"),
                     kExitWatchdog};
        }
        break;
      }
    }
    if (verdict) fail(verdict->first, verdict->second);
    if (store_ && poll % kStoreEvery == 0) check_store();
  }
}

// Another rank gave up, two processes claim one rank (tcp_store.hpp), or the store itself
// is gone: each ends this rank too, so that nobody waits out its timeout for nothing.
void WatchedGroup::check_store() {
  std::optional<std::pair<std::string, int>> verdict;
  try {
    const auto now = std::chrono::milliseconds(0);
    if (store_->check({kStoreConflictKey})) {
      verdict = {store_->get(kStoreConflictKey, now), kExitError};
    } else if (store_->check({state_->key("abort")})) {
      verdict = {"another rank gave up first: " + store_->get(state_->key("abort"), now),
                 kExitWatchdog};
    }
  } catch (const std::exception& e) {
    {
      std::lock_guard lock(mutex_);
      if (stop_) return;  // destroy() is under way: the store may go, as it should
    }
    verdict = {detail::concat("the store stopped answering: rank 0 (", state_->rank0_process,
                              "), whose process serves it, is gone or cannot be reached (",
                              cut(e.what(), kReasonChars), ")"),
               kExitWatchdog};
  }
  if (verdict) fail(verdict->first, verdict->second);
}

// ==== The end =============================================================================

void WatchedGroup::destroy() {
  if (destroyed_.exchange(true)) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // A run shorter than the watchdog's look at the store still hears of a duplicate rank
  // (Note [Claiming a rank], tcp_store.cpp) before it reports success.
  bool conflict = false;
  try {
    conflict = store_ && store_->check({kStoreConflictKey});
  } catch (const std::exception&) {
  }
  if (conflict) {
    std::string why = "two processes claim one rank";
    try {
      why = store_->get(kStoreConflictKey, std::chrono::milliseconds(0));
    } catch (const std::exception&) {
    }
    fail(why, kExitError);
  }
  inner_->destroy();
  std::lock_guard lock(state_->inner_mutex);
  state_->inner = nullptr;
}

// A watched group destroyed while an exception leaves the scope that owns it (a rank's own
// error, ddp-train's main catching it) is no orderly end: the others would wait for this
// rank's "done" and rank 0 for theirs (Note [An orderly end]) while the error waits to be
// printed. It says so in the store, so the others give up within a poll, and aborts.
WatchedGroup::~WatchedGroup() {
  if (std::uncaught_exceptions() == 0 || destroyed_) {
    destroy();
    return;
  }
  destroyed_ = true;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (store_) {
    try {
      store_->compare_set(
          state_->key("abort"), "",
          detail::concat(rank_label(state_->rank, process_label(state_->host, state_->pid)),
                         ": left with an error (its own message says why)"));
    } catch (const std::exception&) {  // the store is gone: the others see that too
    }
  }
  inner_->abort();
  std::lock_guard lock(state_->inner_mutex);
  state_->inner = nullptr;
}

std::unique_ptr<WatchedGroup> watch(std::unique_ptr<ProcessGroup> group, WatchOptions options) {
  return std::make_unique<WatchedGroup>(std::move(group), std::move(options));
}

}  // namespace ddp
