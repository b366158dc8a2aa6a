// ddp::trace: a timeline recorder, to SEE compute and communication overlap. Chapter 07.
//
// Code marks what it does -- a module's forward, a collective on the process group's
// communication thread, the main thread blocked in Work::wait -- and write() saves the
// timeline as a Chrome/Perfetto JSON file (open it at ui.perfetto.dev, or draw it offline:
// ddp-trace-merge --svg). It sits in the lowest layer because nn, the process groups of
// dist/ and the DDP layer all record into it. Off (the default), every call below is one
// relaxed atomic load and a branch. It does not sample, profile GPU kernels (times are
// the host's: on a GPU a span ends when its kernels are queued) or limit its memory (a
// run of hours wants a limit).
//
//   trace::start(rank);                        // pid in the file = rank
//   { trace::Span span("forward", "block1"); ... }  // one complete event on this thread
//   trace::write("run.json");
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddp::detail {
inline std::atomic<bool> trace_recording{false};  // trace::start() and stop() set it
}  // namespace ddp::detail

namespace ddp::trace {

// ---- Recording -----------------------------------------------------------------------
// The categories the recorder itself reads: its definition of compute and communication,
// which the summary (Note [Overlap summary]) and render_text's rows are computed from:
//   "forward", "backward", "optimizer"  compute on the main thread
//   "comm"      a collective running, on a communication thread
//   "wait"      the main thread blocked waiting for communication
// Its callers record other categories too ("evaluation", their own instants); those are
// written to the file as they come, and drawn by render_text only when a caller asks
// (InstantRow below).

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

void instant(std::string_view category, std::string name);  // "<module>: gradient in"

// A complete event whose start and duration are known only afterwards (a module's
// backward: begun by one autograd node, ended by another). Times from now_ns().
void complete(std::string_view category, std::string name, std::int64_t start_ns,
              std::int64_t end_ns);
std::int64_t now_ns();  // nanoseconds since start() (steady_clock)

// ---- Reading back ------------------------------------------------------------------
enum class Phase : char { Complete = 'X', Instant = 'i' };

// One record; times in nanoseconds since start() (the file says microseconds, as
// Chrome's format wants).
struct Event {
  Phase phase = Phase::Instant;
  std::int64_t ts_ns = 0;
  std::int64_t dur_ns = 0;  // Complete only
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
//   communication  = time covered by at least one "comm" span: two collectives running
//                    at once count once
//   exposed        = time covered by "wait" spans: communication that stalled training
//   overlap        = 100 * (1 - exposed / communication), the share of communication
//                    hidden behind compute. Clamped to [0, 100] (a wait can be longer than
//                    the communication it waited for: a peer late to the collective);
//                    0 when there was no communication (nothing was hidden).
// Everything is clipped to the interval asked for: a span begun before it or still open
// at its end counts from its start or up to its end.
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
// The exposed time of Note [Overlap summary] as the intervals it is made of: the time
// covered by "wait" spans, clipped to [from_ns, to_ns], sorted and disjoint ([begin, end)
// in ns). summarize's exposed_ms is their total length; ddp-trace-merge --svg shades them.
std::vector<std::pair<std::int64_t, std::int64_t>> exposed_intervals(
    const std::vector<Event>& events, std::int64_t from_ns, std::int64_t to_ns);

// ---- A timeline in text -----------------------------------------------------------------
// [from_ns, to_ns] drawn in `columns` characters, one row per thread that recorded a
// compute, wait or comm span there ("main", "tcp communication"):
//   main               FFFFFFFFBBBBBBBBBBBBBBBBBBBBBBwwwO
//   tcp communication  ..........=====.....======.=====..
// A column shows what covered most of its time: F forward, B backward, O optimizer,
// w waiting for communication, = a collective; '.' nothing. Under a thread's row, one
// row per InstantRow that finds instants of that thread in [from_ns, to_ns), in the
// order given, labelled by its title indented by two. For pages and terminals; Perfetto
// shows the rest.
//
// A row of instants, asked for by the code that records them (the recorder reads no
// names): the instants of `category`, each drawn at its column as mark(its name), where
// 0 draws nothing.
struct InstantRow {
  std::string category;
  std::string title;
  std::function<char(std::string_view name)> mark;
};
std::string render_text(const std::vector<Event>& events, std::int64_t from_ns, std::int64_t to_ns,
                        const std::vector<InstantRow>& instant_rows = {}, int columns = 72);

}  // namespace ddp::trace
