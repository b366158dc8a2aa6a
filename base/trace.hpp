// ddp::trace: a timeline recorder, to SEE compute and communication overlap. Chapter 07.
//
// Code marks what it does -- a module's forward, a bucket's all-reduce on the process
// group's communication thread, the main thread blocked in Work::wait -- and write()
// saves the timeline as a Chrome/Perfetto JSON file (open it at ui.perfetto.dev). It
// sits in the lowest layer because nn, the process groups of dist/ and the DDP layer all
// record into it. Off (the default), every call below is one relaxed atomic load and a
// branch. It does not sample, profile GPU kernels (times are the host's: on a GPU a span
// ends when its kernels are queued) or limit its memory (a run of hours wants a limit).
//
//   trace::start(rank);                        // pid in the file = rank
//   { trace::Span span("forward", "block1"); ... }  // one complete event on this thread
//   trace::write("run.json");
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ddp::detail {
inline std::atomic<bool> trace_recording{false};  // trace::start() and stop() set it
}  // namespace ddp::detail

namespace ddp::trace {

// ---- Recording -----------------------------------------------------------------------
// Categories used across the code base (the summary below reads them):
//   "forward", "backward", "optimizer"  compute on the main thread
//   "comm"      a collective on a communication thread (Span), or a bucket's all-reduce
//               in flight (async_begin/async_end)
//   "wait"      the main thread blocked waiting for communication
//   "reducer"   instants: bucket k ready / launched / done

// Inline, so that code that records (Module::operator()) pays a load and a branch.
inline bool enabled() { return detail::trace_recording.load(std::memory_order_relaxed); }
// Clears what was recorded and starts recording; times count from here. The calling
// thread is named "main" unless it has a name already. Calling it again starts afresh.
void start(int rank);
void stop();  // stops recording; what was recorded stays until the next start()
// The Chrome JSON {"traceEvents":[...]} of everything recorded since start(); ddp::Error
// naming `path` when it cannot be written. Also works after stop().
void write(const std::string& path);
// Names the calling thread in the timeline ("main", "tcp communication"). Kept across
// start(), and taken whether or not recording is on, so that a thread started before
// tracing (a process group's) is still named.
void set_thread_name(std::string name);

// A complete event ("X") from construction to destruction, on the constructing thread.
// Spans of one thread nest (RAII does that), which is what Perfetto draws as a stack.
// Pass a name that is cheap to build, or test enabled() first: the string is built
// before the constructor can tell that recording is off.
class Span {
 public:
  Span(std::string_view category, std::string name);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  std::int64_t start_ns_ = -1;  // -1: recording was off at construction
  std::uint64_t session_ = 0;   // a span that outlives a start() is dropped
  std::string category_;
  std::string name_;
};

void instant(std::string_view category, std::string name);  // "bucket 0 ready"
// An interval that need not nest (a bucket's all-reduce: launched on the main thread,
// finished on the communication thread). Begin and end match by (category, name, id).
void async_begin(std::string_view category, std::string name, std::uint64_t id);
void async_end(std::string_view category, std::string name, std::uint64_t id);

// A complete event whose start and duration are known only afterwards (a module's
// backward: begun by one autograd node, ended by another). Times from now_ns().
void complete(std::string_view category, std::string name, std::int64_t start_ns,
              std::int64_t end_ns);
std::int64_t now_ns();  // nanoseconds since start() (steady_clock)

// ---- Reading back ------------------------------------------------------------------
enum class Phase : char { Complete = 'X', Instant = 'i', AsyncBegin = 'b', AsyncEnd = 'e' };

// One record; times in nanoseconds since start() (the file says microseconds, as
// Chrome's format wants).
struct Event {
  Phase phase = Phase::Instant;
  std::int64_t ts_ns = 0;
  std::int64_t dur_ns = 0;  // Complete only
  std::uint64_t id = 0;     // async only
  std::uint32_t tid = 0;    // small numbers, in the order threads first recorded
  std::string category;
  std::string name;
};

// Everything recorded since start(), every thread's, ordered by time.
std::vector<Event> events();

// ---- Summary ---------------------------------------------------------------------------
// Note [Overlap summary]
//   compute        = time covered by compute spans ("forward", "backward", "optimizer"),
//                    minus the time the main thread waited inside them ("wait" spans):
//                    nested spans count once (a union of intervals), waiting is not work
//   communication  = time covered by at least one "comm" interval (spans and async
//                    intervals together): two all-reduces in flight at once count once
//   exposed        = time covered by "wait" spans: communication that stalled training
//   overlap        = 100 * (1 - exposed / communication), the share of communication
//                    hidden behind compute. Clamped to [0, 100] (a wait can be longer than
//                    the communication it waited for: a peer late to the collective);
//                    0 when there was no communication (nothing was hidden).
// Everything is clipped to the interval asked for; an async interval begun before it or
// still in flight at its end counts from its start or up to its end.
struct Summary {
  double compute_ms = 0.0;
  double communication_ms = 0.0;
  double exposed_ms = 0.0;
  double overlap_percent() const;
};

struct Mark {
  std::int64_t ns = 0;
};
Mark mark();  // now, to summarize from later (the start of an epoch)
// The summary of [from, now] of what this process recorded.
Summary summarize_since(Mark from);
// The same computation on any list of events, over [from_ns, to_ns].
Summary summarize(const std::vector<Event>& events, std::int64_t from_ns, std::int64_t to_ns);

// ---- A timeline in text -----------------------------------------------------------------
// [from_ns, to_ns] drawn in `columns` characters, one row per thread that recorded a
// compute, wait or comm span there ("main", "tcp communication"):
//   main               FFFFFFFFBBBBBBBBBBBBBBBBBBBBBBwwwO
//   tcp communication  ..........=====.....======.=====..
// A column shows what covered most of its time: F forward, B backward, O optimizer,
// w waiting for communication, = a collective; '.' nothing. Instants of the "reducer"
// category ("bucket 0: launch") are marked with their bucket number on a row of their
// own under the main row. For pages and terminals; Perfetto shows the rest.
std::string render_text(const std::vector<Event>& events, std::int64_t from_ns, std::int64_t to_ns,
                        int columns = 72);

}  // namespace ddp::trace
