// ProcessGroupMpi, the mpi backend (see dist/process_group_mpi.hpp). Chapter 05.
//
// Reading order: the error check, the owner of MPI itself (MpiRuntime), one queued
// collective (MpiOp), the communication thread that runs them (MpiEngine, one per
// process), a group's communicator (MpiComm), the group with its five collectives and
// its sub-groups, teardown. It does not know
// about launchers: mpirun (or srun) has already told MPI who is who.
#include "dist/process_group_mpi.hpp"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/deadline.hpp"
#include "dist/launch_env.hpp"  // host_name
#include "base/error.hpp"
#include "base/trace.hpp"
#include "base/who.hpp"

// Note [Why a communication thread]
// MPI's nonblocking collectives only move data while some thread is inside an MPI call:
// Open MPI has no progress thread of its own for them. If the caller issued
// MPI_Iallreduce and went back to computing, nothing would travel until it next called
// MPI_Test: the Work would be asynchronous in name only. So one thread makes every MPI
// call between construction and destruction (for the group and its sub-groups: Note
// [One thread for every mpi group]). It takes the queued
// collectives in the order the caller issued them (MPI requires the same order on every
// rank), starts them, and polls all of those in flight with MPI_Test, completing each
// one's FutureWork when it is done. The caller only queues, and waits on a condition
// variable. One thread making all the calls is what MPI_THREAD_SERIALIZED allows (the
// constructor's calls happen before the thread starts, the destructor's after it is
// joined), so that is all we ask for; THREAD_MULTIPLE costs a lock per call in some MPIs.

namespace ddp {
namespace {

// ---- Errors ------------------------------------------------------------------------

// "rank 1/4 (mpi, node07)", as ProcessGroup::who() says it; MPI's own view, when it is
// running.
std::string who_am_i() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  int rank = -1, size = 0;
  if (initialized && !finalized) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  return rank_label(rank, size, "mpi, " + host_name());
}

// Throws ddp::Error for an MPI call that did not return MPI_SUCCESS, in MPI's words.
// (The communicator is set to MPI_ERRORS_RETURN, so failures come back as codes instead
// of MPI's default of aborting the job.)
void check_mpi(int code, const char* call, const char* file, int line) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  detail::throw_error(file, line, call,
                      detail::concat(who_am_i(), ": ", call, " failed: ", text,
                                     "\nhint: a peer rank may have died (look at its output "
                                     "first); OMPI_MCA_btl=self,tcp rules out shared memory"));
}

}  // namespace
}  // namespace ddp

// DDP_CHECK_MPI(MPI_Ibarrier(comm, &request)): throws unless the call returns MPI_SUCCESS.
#define DDP_CHECK_MPI(call) ::ddp::check_mpi((call), #call, __FILE__, __LINE__)

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

// Note [Polling MPI]
// While collectives are in flight the thread polls MPI_Test in a loop, yielding the core
// between rounds. Open MPI's nonblocking collectives advance only inside such calls,
// one round of their schedule at a time: a thread that sleeps between tests stretches
// every round to the length of a sleep. So it keeps polling while a collective could
// still be moving its bytes: the budgets of the collectives in flight, each as long as
// its bytes would take at kSpinBytesPerSecond, are added up (they share the links), plus
// kSpinTime after any progress. Only past that, when a peer is late or gone, does it
// sleep kPollSleep per round, so that a rank waiting on a slow peer does not burn a core
// its own computation needs; until then a late peer costs busy polling (up to ~270 ms of
// a core for 64 MiB), which a rank overlapping compute with communication will feel on a
// machine with few cores. The rule before slept once 200 us had passed without a
// collective finishing, which for a large one is almost at once: this one made 1-64 MiB
// all-reduces 3-10x faster over shared memory, and 1.1-2x over TCP, on the dev box
// (bench/README.md, "bench_allreduce", Note [Polling MPI]).
constexpr auto kSpinTime = std::chrono::microseconds(200);
constexpr double kSpinBytesPerSecond = 250e6;
constexpr auto kPollSleep = std::chrono::microseconds(50);

// How long to keep polling a collective that moves `bytes` (Note [Polling MPI]).
Clock::duration spin_budget(std::int64_t bytes) {
  return kSpinTime + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                         static_cast<double>(bytes) / kSpinBytesPerSecond));
}

// ---- MPI itself: once per process ---------------------------------------------------

// At most one group at a time: MPI and MPI_COMM_WORLD are per process, and the group
// that initialised MPI finalises it.
std::atomic<bool> group_alive{false};

// Owns MPI's initialisation: MPI_Init_thread in the constructor (unless the program
// already initialised MPI, in which case that MPI is used and left alone), MPI_Finalize
// in the destructor.
class MpiRuntime {
 public:
  MpiRuntime() {
    DDP_CHECK(!group_alive.exchange(true),
              "make_process_group_mpi: an mpi process group already exists in this process\n"
              "hint: MPI_COMM_WORLD is per process; share the one group");
    try {
      init();
    } catch (...) {
      group_alive = false;
      throw;
    }
  }
  ~MpiRuntime() {
    if (owns_ && finalize_) MPI_Finalize();
    group_alive = false;
  }
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  // After a failed collective MPI_Finalize may wait forever for the dead peer; the
  // launcher cleans up a process that exits without it (see the group's destructor).
  void skip_finalize() { finalize_ = false; }

 private:
  void init() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    DDP_CHECK(!finalized,
              "make_process_group_mpi: MPI was already finalised in this process\n"
              "hint: MPI can be initialised only once per process; create the mpi group "
              "once and keep it until the end of the program");
    int initialized = 0;
    MPI_Initialized(&initialized);
    int provided = MPI_THREAD_SINGLE;
    if (initialized) {
      MPI_Query_thread(&provided);
    } else {
      // Each error code below is checked by hand: MPI's default handler aborts on
      // failure, and before init there is no communicator to change that on.
      const int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      DDP_CHECK(code == MPI_SUCCESS, "MPI_Init_thread failed (code ", code,
                ")\nhint: start the program with mpirun -np N (or srun --mpi=pmix)");
      owns_ = true;
    }
    if (provided < MPI_THREAD_SERIALIZED) {
      if (owns_) MPI_Finalize();
      DDP_FAIL("make_process_group_mpi: MPI provides thread level ", provided,
               " but the mpi group needs MPI_THREAD_SERIALIZED (", MPI_THREAD_SERIALIZED,
               "): its communication thread makes the MPI calls\n"
               "hint: ",
               initialized ? "call MPI_Init_thread(..., MPI_THREAD_SERIALIZED, ...) yourself, "
                             "or let the group initialise MPI"
                           : "use an MPI built with thread support (Open MPI's default)");
    }
  }

  bool owns_ = false;     // we called MPI_Init_thread, so we call MPI_Finalize
  bool finalize_ = true;  // false after a failure (see skip_finalize)
};

// ---- One collective -----------------------------------------------------------------

// A collective queued by the caller and run by the communication thread.
struct MpiOp {
  std::shared_ptr<FutureWork> work;
  // The caller's tensors, kept alive until the collective is done. `output` is `input`
  // itself for the in-place collectives (all_reduce, broadcast); undefined for barrier.
  Tensor input;
  Tensor output;
  bool in_place = false;
  bool average = false;  // ReduceOp::Avg: MPI sums, then we divide by the group size
  // What MPI reads and writes: host memory. The tensors themselves on the CPU; for CUDA
  // tensors, host copies made by the communication thread (detail::host_copy / host_buffer_like)
  // once the compute stream has reached `ready`, marked by the caller (Note [Staging CUDA
  // tensors off the compute stream], dist/process_group.hpp).
  Tensor send;
  Tensor recv;
  detail::ComputeMark ready;
  std::int64_t started_ns = 0;  // for the trace (base/trace.hpp), when it is recording
  // Its group's communicator, size (the divisor of an average) and timeout().
  MPI_Comm comm = MPI_COMM_NULL;
  int group_size = 1;
  std::chrono::milliseconds timeout{0};
  // Issues the nonblocking MPI call on send/recv (on the communication thread). A call
  // that blocks instead (MpiEngine::call) leaves `request` null: MPI_Test says done.
  std::function<void(MpiOp&, MPI_Comm)> start;
  MPI_Request request = MPI_REQUEST_NULL;
  Clock::time_point deadline;
  Clock::duration spin;  // its share of polling without sleeping (Note [Polling MPI])
};

MPI_Datatype mpi_type(DType dtype) {
  return dtype == DType::Float32 ? MPI_FLOAT : MPI_INT64_T;
}

// Avg is a sum followed by a division, as PyTorch's mpi backend does it; MPI has no
// average. MPI_Op values are link-time constants, not compile-time ones, hence no table.
MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  DDP_FAIL("unknown ReduceOp ", static_cast<int>(op));
}

// MPI counts elements in int (MPI 4's large-count calls are not in Open MPI 4).
int mpi_count(std::int64_t numel, const char* collective) {
  DDP_CHECK(numel <= INT_MAX, collective, ": ", numel,
            " elements is more than MPI's int count allows (", INT_MAX,
            ")\nhint: split the tensor, or use the tcp or nccl backend");
  return static_cast<int>(numel);
}

// In place: x /= divisor, element by element (int64 truncates toward zero, as C++ does).
void divide(const Tensor& host, int divisor) {
  const std::int64_t n = host.numel();
  if (host.dtype() == DType::Float32) {
    float* x = host.data<float>();
    for (std::int64_t i = 0; i < n; ++i) x[i] /= static_cast<float>(divisor);
  } else {
    std::int64_t* x = host.data<std::int64_t>();
    for (std::int64_t i = 0; i < n; ++i) x[i] /= divisor;
  }
}

// ---- The communication thread: one per process -----------------------------------------

// Note [One thread for every mpi group]
// MPI_THREAD_SERIALIZED lets one thread at a time into MPI. A sub-group (new_group) with
// a thread of its own would call MPI_Test while its parent's thread does, which needs
// MPI_THREAD_MULTIPLE and its lock in every call. So the group that
// make_process_group_mpi makes and every sub-group split from it share one MpiEngine:
// MPI itself (MpiRuntime) and the thread, which starts every group's collectives on that
// group's communicator in the order they were queued, polls them all together, and also
// makes the few blocking calls sub-groups need (MPI_Comm_split, MPI_Comm_free). Two
// sub-groups' collectives are in flight at once like any two collectives: MPI matches
// them per communicator. The engine ends, and MPI is finalised, with the last group that
// holds it. After a failure it refuses everything: the ranks are out of step.
class MpiEngine {
 public:
  explicit MpiEngine(std::unique_ptr<MpiRuntime> runtime) : runtime_(std::move(runtime)) {
    thread_ = std::thread([this] { run(); });
  }
  // Lets the collectives in flight finish (each bounded by its timeout), joins the
  // thread, and finalises MPI, unless a failure broke it (Note [Teardown after a failure]).
  ~MpiEngine() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
    if (broken()) runtime_->skip_finalize();
    runtime_.reset();  // MPI_Finalize (unless skipped, or MPI was the caller's)
  }
  MpiEngine(const MpiEngine&) = delete;
  MpiEngine& operator=(const MpiEngine&) = delete;

  // Caller side: hands the collective to the communication thread.
  void enqueue(std::unique_ptr<MpiOp> job) {
    job->ready = detail::mark_compute_stream(job->input, job->output);
    {
      std::lock_guard lock(mutex_);
      DDP_CHECK(broken_.empty(), job->work->description(),
                ": the mpi group is broken by an earlier failure:\n", broken_,
                "\nhint: a failed collective leaves the ranks out of step; end the job");
      queue_.push_back(std::move(job));
    }
    wake_.notify_one();
  }

  // Runs `blocking` on the communication thread once what was queued before it has
  // started, and waits for it, at most `timeout`. `what` names it in errors.
  void call(const std::string& what, std::chrono::milliseconds timeout,
            std::function<void()> blocking) {
    auto job = std::make_unique<MpiOp>();
    job->work = std::make_shared<FutureWork>(what, timeout);
    job->timeout = timeout;
    job->start = [blocking = std::move(blocking)](MpiOp&, MPI_Comm) { blocking(); };
    std::shared_ptr<FutureWork> work = job->work;
    enqueue(std::move(job));
    work->wait();
  }

  bool broken() {
    std::lock_guard lock(mutex_);
    return !broken_.empty();
  }

 private:
  void run();
  void start(MpiOp& job);
  void complete(MpiOp& job);
  void fail(MpiOp& job, std::exception_ptr error);

  std::unique_ptr<MpiRuntime> runtime_;
  std::mutex mutex_;                          // guards queue_, stop_, broken_
  std::condition_variable wake_;              // queue_ got a job, or stop_ was set
  std::deque<std::unique_ptr<MpiOp>> queue_;  // issued by a caller, not yet started
  bool stop_ = false;
  std::string broken_;  // the first failure's message; "" while MPI is healthy
  std::thread thread_;
};

// Starts queued collectives in order and polls those in flight (Note [Why a
// communication thread]) until stop_ is set and nothing is left.
void MpiEngine::run() {
  trace::set_thread_name("mpi communication");
  std::vector<std::unique_ptr<MpiOp>> in_flight;
  Clock::time_point spin_until = Clock::now();  // Note [Polling MPI]
  for (;;) {
    std::deque<std::unique_ptr<MpiOp>> fresh;
    {
      std::unique_lock lock(mutex_);
      if (in_flight.empty()) wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_ && queue_.empty() && in_flight.empty()) return;
      fresh.swap(queue_);
    }
    for (auto& job : fresh) {
      try {
        if (trace::enabled()) job->started_ns = trace::now_ns();
        start(*job);
        spin_until = std::max(spin_until, Clock::now()) + job->spin;
        in_flight.push_back(std::move(job));
      } catch (...) {
        fail(*job, std::current_exception());
      }
    }

    // Poll every collective in flight; finished ones complete their Work.
    const Clock::time_point now = Clock::now();
    std::erase_if(in_flight, [&](std::unique_ptr<MpiOp>& job) {
      try {
        int done = 0;
        DDP_CHECK_MPI(MPI_Test(&job->request, &done, MPI_STATUS_IGNORE));
        if (done) {
          if (trace::enabled()) {  // a span on this thread's track: from start to done
            trace::complete("comm", job->work->description(), job->started_ns, trace::now_ns());
          }
          complete(*job);
          spin_until = std::max(spin_until, now + kSpinTime);
          return true;
        }
        if (now < job->deadline) return false;
        DDP_FAIL(job->work->description(), " did not finish within ", job->timeout.count(),
                 " ms (the group's timeout)\nhint: a peer rank may have died or not called "
                 "the same collective; look at every rank's output");
      } catch (...) {
        fail(*job, std::current_exception());
        // Abandoned: MPI offers no way to cancel a collective, and a peer that arrives
        // late can still make MPI write into this op's buffers (its staging copies, the
        // caller's tensors) while we drive progress for the others. So they must never
        // be freed: the op is leaked on purpose, and only ever after a failure.
        static_cast<void>(job.release());
        return true;
      }
    });

    if (!in_flight.empty()) {
      if (Clock::now() < spin_until) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(kPollSleep);
      }
    }
  }
}

// CUDA tensors are copied to host memory here, on this thread, not by the caller: the
// copy waits for the GPU, and the caller should not.
void MpiEngine::start(MpiOp& job) {
  if (job.input.defined()) {
    job.send = detail::host_copy(job.input, job.ready);
    job.recv = job.in_place ? job.send : detail::host_buffer_like(job.output);
  }
  job.deadline = deadline_after(job.timeout);
  auto bytes = [](const Tensor& t) {  // undefined (a barrier): nothing
    return t.defined() ? t.numel() * static_cast<std::int64_t>(element_size(t.dtype())) : 0;
  };
  job.spin = spin_budget(std::max(bytes(job.send), bytes(job.recv)));
  job.start(job, job.comm);
}

void MpiEngine::complete(MpiOp& job) {
  try {
    if (job.average) divide(job.recv, job.group_size);
    if (job.output.defined()) detail::copy_back(job.output, job.recv, job.ready);
  } catch (...) {
    fail(job, std::current_exception());
    return;
  }
  job.work->finish();
}

void MpiEngine::fail(MpiOp& job, std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    if (broken_.empty()) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        broken_ = e.what();
      } catch (...) {
        broken_ = "unknown error";
      }
    }
  }
  job.work->fail(std::move(error));
}

// ---- A group's communicator --------------------------------------------------------------

// Owns one group's communicator: for the group make_process_group_mpi makes, a duplicate
// of MPI_COMM_WORLD (dup_world), so that our traffic never matches messages of a library
// (or program) using MPI_COMM_WORLD itself, and so that setting MPI_ERRORS_RETURN on it
// changes nobody else's error handling; for a sub-group, a split of its parent's. It is
// freed on the engine's thread, the one that makes MPI calls (Note [One thread for every
// mpi group]); after a failure it is leaked, since freeing may wait on a dead peer.
class MpiComm {
 public:
  // `timeout`: the group's deadline, which bounds the free too.
  MpiComm(std::shared_ptr<MpiEngine> engine, MPI_Comm comm, std::chrono::milliseconds timeout)
      : engine_(std::move(engine)), comm_(comm), timeout_(timeout) {}
  ~MpiComm() {
    if (engine_->broken()) return;  // leaked: see Note [Teardown after a failure]
    try {
      engine_->call("MPI_Comm_free", timeout_,
                    [comm = comm_]() mutable { DDP_CHECK_MPI(MPI_Comm_free(&comm)); });
    } catch (const std::exception& e) {  // a destructor does not throw
      std::fprintf(stderr, "ddp: %s: %s\n", who_am_i().c_str(), e.what());
    }
  }
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  MPI_Comm get() const { return comm_; }

 private:
  std::shared_ptr<MpiEngine> engine_;
  MPI_Comm comm_;
  std::chrono::milliseconds timeout_;
};

// Before the engine's thread starts, on the caller's.
MPI_Comm dup_world() {
  MPI_Comm comm = MPI_COMM_NULL;
  // Until the handler is set, failures abort the job: MPI's default (ERRORS_ARE_FATAL).
  DDP_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  DDP_CHECK_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  return comm;
}

// ---- The group ----------------------------------------------------------------------

class ProcessGroupMpi final : public ProcessGroup {
 public:
  // MPI is initialised before the base class needs rank and size: see
  // make_process_group_mpi. `in_parent`: for a sub-group (split).
  ProcessGroupMpi(std::shared_ptr<MpiEngine> engine, std::unique_ptr<MpiComm> comm, int rank,
                  int size, std::chrono::milliseconds timeout, InParent in_parent = {})
      : ProcessGroup(rank, size, timeout, std::move(in_parent)),
        engine_(std::move(engine)),
        comm_(std::move(comm)) {}
  ~ProcessGroupMpi() override { destroy(); }
  // Note [An orderly end] (process_group.hpp) and Note [Teardown after a failure].
  void destroy() override;

  std::string backend_name() const override { return "mpi"; }

  std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op) override {
    check_tensor(tensor, "all_reduce", "tensor");
    const int count = mpi_count(tensor.numel(), "mpi all_reduce");
    auto job = make_op(detail::concat("all_reduce of ", count, " ", dtype_name(tensor.dtype()),
                                      " (", to_string(op), ")"));
    job->input = job->output = tensor;
    job->in_place = true;
    job->average = op == ReduceOp::Avg;
    const MPI_Datatype type = mpi_type(tensor.dtype());
    const MPI_Op reduce = mpi_op(op);
    job->start = [count, type, reduce](MpiOp& o, MPI_Comm comm) {
      DDP_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, o.recv.raw_data(), count, type, reduce,
                                   comm, &o.request));
    };
    return enqueue(std::move(job));
  }

  std::shared_ptr<Work> broadcast(Tensor& tensor, int root) override {
    check_tensor(tensor, "broadcast", "tensor");
    check_root("broadcast", root);
    const int count = mpi_count(tensor.numel(), "mpi broadcast");
    auto job = make_op(detail::concat("broadcast of ", count, " ",
                                      dtype_name(tensor.dtype()), " from rank ", root));
    job->input = job->output = tensor;
    job->in_place = true;
    const MPI_Datatype type = mpi_type(tensor.dtype());
    job->start = [count, type, root](MpiOp& o, MPI_Comm comm) {
      DDP_CHECK_MPI(MPI_Ibcast(o.recv.raw_data(), count, type, root, comm, &o.request));
    };
    return enqueue(std::move(job));
  }

  std::shared_ptr<Work> all_gather(Tensor& output, const Tensor& input) override {
    check_tensor(input, "all_gather", "input");
    check_tensor(output, "all_gather", "output");
    check_all_gather(output, input);
    const int count = mpi_count(output.numel(), "mpi all_gather") / size();
    auto job = make_op(detail::concat("all_gather of ", count, " ",
                                      dtype_name(input.dtype()), " per rank"));
    job->input = input;
    job->output = output;
    const MPI_Datatype type = mpi_type(input.dtype());
    job->start = [count, type](MpiOp& o, MPI_Comm comm) {
      DDP_CHECK_MPI(MPI_Iallgather(o.send.raw_data(), count, type, o.recv.raw_data(), count,
                                   type, comm, &o.request));
    };
    return enqueue(std::move(job));
  }

  std::shared_ptr<Work> reduce_scatter(Tensor& output, const Tensor& input,
                                       ReduceOp op) override {
    check_tensor(input, "reduce_scatter", "input");
    check_tensor(output, "reduce_scatter", "output");
    check_reduce_scatter(output, input);
    const int count = mpi_count(input.numel(), "mpi reduce_scatter") / size();
    auto job = make_op(detail::concat("reduce_scatter of ", count, " ",
                                      dtype_name(input.dtype()), " per rank (",
                                      to_string(op), ")"));
    job->input = input;
    job->output = output;
    job->average = op == ReduceOp::Avg;
    const MPI_Datatype type = mpi_type(input.dtype());
    const MPI_Op reduce = mpi_op(op);
    job->start = [count, type, reduce](MpiOp& o, MPI_Comm comm) {
      DDP_CHECK_MPI(MPI_Ireduce_scatter_block(o.send.raw_data(), o.recv.raw_data(), count,
                                              type, reduce, comm, &o.request));
    };
    return enqueue(std::move(job));
  }

  std::shared_ptr<Work> barrier() override {
    auto job = make_op("barrier");
    job->start = [](MpiOp& o, MPI_Comm comm) { DDP_CHECK_MPI(MPI_Ibarrier(comm, &o.request)); };
    return enqueue(std::move(job));
  }

 protected:
  // new_group (dist/new_group.hpp): MPI_Comm_split over this group's communicator, on the
  // engine's thread (every rank of this group takes part; the others pass MPI_UNDEFINED
  // and get MPI_COMM_NULL). The sub-group shares the engine.
  std::unique_ptr<ProcessGroup> split(const std::vector<int>& ranks) override;

 private:
  std::unique_ptr<MpiOp> make_op(const std::string& what) {
    auto job = std::make_unique<MpiOp>();
    job->work = std::make_shared<FutureWork>(detail::concat(who(), ": ", what), timeout());
    job->comm = comm_->get();
    job->group_size = size();
    job->timeout = timeout();
    return job;
  }

  // Caller side: hands the collective to the engine's thread and returns its Work.
  std::shared_ptr<Work> enqueue(std::unique_ptr<MpiOp> job) {
    std::shared_ptr<FutureWork> work = job->work;
    DDP_CHECK(!destroyed_, work->description(), ": the mpi group was destroyed first");
    engine_->enqueue(std::move(job));
    return work;
  }

  // Teardown order: the communicator is freed (through the engine) before the engine
  // may go; destroy() does both by hand.
  std::shared_ptr<MpiEngine> engine_;
  std::unique_ptr<MpiComm> comm_;
  std::atomic<bool> destroyed_ = false;
};

// ---- Teardown -----------------------------------------------------------------------

// Note [Teardown after a failure]
// In a healthy group destroy() frees the communicator, and the last group of the process
// to go (the one make_process_group_mpi made, unless a sub-group outlives it) ends the
// engine: it lets the collectives in flight finish (each is bounded by the group's
// timeout), joins the thread, and finalises MPI. After a failed or timed-out collective
// the ranks are out of step, and MPI_Comm_free or MPI_Finalize may wait forever for a
// peer that will never answer. So a broken engine skips both: the process exits without
// MPI_Finalize, which mpirun reports and answers by ending the other ranks, so none of
// them hangs. destroy() (the destructor, when nobody called it) does it once: the
// communicator is freed and MPI finalised here, while the group is still whole, not
// whenever the members happen to go. A sub-group's destroy() ends it alone: its parent's
// communicator and the engine stay.
void ProcessGroupMpi::destroy() {
  if (destroyed_.exchange(true)) return;  // destroyed before
  if (engine_->broken()) {
    std::fprintf(stderr,
                 "ddp: %s: the group is broken; exiting without MPI_Finalize (mpirun will "
                 "end the other ranks)\n",
                 who().c_str());
  }
  comm_.reset();    // MPI_Comm_free on the engine's thread (unless broken: leaked)
  engine_.reset();  // the last group's: the thread is joined, MPI finalised
}

std::unique_ptr<ProcessGroup> ProcessGroupMpi::split(const std::vector<int>& ranks) {
  const auto me = std::find(ranks.begin(), ranks.end(), rank());
  const bool member = me != ranks.end();
  const int index = member ? static_cast<int>(me - ranks.begin()) : -1;
  // What the thread makes, shared with it: the call may outlive this frame on a timeout.
  struct Made {
    MPI_Comm comm = MPI_COMM_NULL;
    int rank = -1;
    int size = 0;
  };
  auto made = std::make_shared<Made>();
  const int color = member ? 0 : MPI_UNDEFINED;
  const MPI_Comm parent = comm_->get();
  const std::string what = detail::concat(who(), ": new_group(", list_ranks(ranks), ")");
  engine_->call(what + ": MPI_Comm_split", timeout(), [made, parent, color, index] {
    DDP_CHECK_MPI(MPI_Comm_split(parent, color, std::max(index, 0), &made->comm));
    if (made->comm == MPI_COMM_NULL) return;
    DDP_CHECK_MPI(MPI_Comm_set_errhandler(made->comm, MPI_ERRORS_RETURN));
    DDP_CHECK_MPI(MPI_Comm_rank(made->comm, &made->rank));
    DDP_CHECK_MPI(MPI_Comm_size(made->comm, &made->size));
  });
  if (!member) return nullptr;
  auto comm = std::make_unique<MpiComm>(engine_, made->comm, timeout());
  const int size = static_cast<int>(ranks.size());
  DDP_CHECK(made->rank == index && made->size == size, what, ": MPI_Comm_split made rank ",
            made->rank, " of ", made->size, ", expected rank ", index, " of ", size);
  return std::make_unique<ProcessGroupMpi>(engine_, std::move(comm), index, size, timeout(),
                                           InParent{ranks, rank(), this->size()});
}

}  // namespace

// ---- Construction -------------------------------------------------------------------

std::unique_ptr<ProcessGroup> make_process_group_mpi(std::chrono::milliseconds timeout) {
  auto runtime = std::make_unique<MpiRuntime>();
  // Before the engine's thread starts: until then this thread may call MPI.
  const MPI_Comm dup = dup_world();
  int rank = 0, size = 0;
  DDP_CHECK_MPI(MPI_Comm_rank(dup, &rank));
  DDP_CHECK_MPI(MPI_Comm_size(dup, &size));
  // A launcher that is not MPI's (ddprun, torchrun) starts N singletons, each rank 0
  // of 1. Catch that here instead of letting every rank train alone.
  if (const char* world = std::getenv("WORLD_SIZE")) {
    DDP_CHECK(std::to_string(size) == world, who_am_i(), ": MPI sees ", size,
              " process(es) but WORLD_SIZE=", world,
              "\nhint: the mpi backend must be launched by mpirun -np N (or srun "
              "--mpi=pmix); under ddprun use the tcp or nccl backend");
  }
  auto engine = std::make_shared<MpiEngine>(std::move(runtime));
  auto comm = std::make_unique<MpiComm>(engine, dup, timeout);
  return std::make_unique<ProcessGroupMpi>(std::move(engine), std::move(comm), rank, size,
                                           timeout);
}

}  // namespace ddp

