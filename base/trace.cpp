// ddp::trace (see trace.hpp): per-thread event buffers, the JSON writer and the overlap
// summary. Chapter 07.
//
// The recorder is process-wide state, like PyTorch's profiler: the code that records
// (a module deep in a network, a process group's communication thread) has no handle to
// pass it. Each thread appends to its own buffer under its own mutex, so the main thread
// and a communication thread never wait for each other; only summarize/write, a few
// times per epoch, take every buffer's lock in turn.
#include "base/trace.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "base/error.hpp"

namespace ddp::trace {

namespace {

// ---- The recorder --------------------------------------------------------------------

struct ThreadBuffer {
  std::mutex mutex;
  std::vector<Event> events;
  std::uint32_t tid = 0;
  std::string name;
};

struct Recorder {
  std::atomic<std::uint64_t> session{0};               // incremented by every start()
  std::atomic<std::int64_t> origin_ns{0};              // steady_clock at start()
  std::mutex mutex;                                    // guards the fields below
  std::vector<std::unique_ptr<ThreadBuffer>> buffers;  // never freed: threads hold pointers
  int rank = 0;
  std::int64_t start_unix_us = 0;  // system_clock at start(): ddp-trace-merge aligns ranks
};

Recorder& recorder() {
  static Recorder r;
  return r;
}

thread_local ThreadBuffer* tls_buffer = nullptr;

ThreadBuffer& this_thread() {
  if (tls_buffer == nullptr) {
    Recorder& r = recorder();
    std::lock_guard lock(r.mutex);
    r.buffers.push_back(std::make_unique<ThreadBuffer>());
    tls_buffer = r.buffers.back().get();
    tls_buffer->tid = static_cast<std::uint32_t>(r.buffers.size());
  }
  return *tls_buffer;
}

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void record(Event event) {
  ThreadBuffer& buffer = this_thread();
  event.tid = buffer.tid;
  std::lock_guard lock(buffer.mutex);
  buffer.events.push_back(std::move(event));
}

}  // namespace

std::int64_t now_ns() { return steady_ns() - recorder().origin_ns.load(std::memory_order_relaxed); }

void start(int rank) {
  Recorder& r = recorder();
  ThreadBuffer& me = this_thread();
  {
    std::lock_guard lock(r.mutex);
    for (auto& buffer : r.buffers) {
      std::lock_guard buffer_lock(buffer->mutex);
      buffer->events.clear();
    }
    if (me.name.empty()) me.name = "main";
    r.rank = rank;
    r.start_unix_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  }
  r.origin_ns.store(steady_ns(), std::memory_order_relaxed);
  r.session.fetch_add(1, std::memory_order_relaxed);
  detail::trace_recording.store(true, std::memory_order_release);
}

void stop() { detail::trace_recording.store(false, std::memory_order_release); }

void set_thread_name(std::string name) {
  ThreadBuffer& buffer = this_thread();
  std::lock_guard lock(buffer.mutex);
  buffer.name = std::move(name);
}

// ---- Recording calls -------------------------------------------------------------------

Span::Span(std::string_view category, std::string name) {
  if (!enabled()) return;
  session_ = recorder().session.load(std::memory_order_relaxed);
  category_ = category;
  name_ = std::move(name);
  start_ns_ = now_ns();
}

Span::~Span() {
  if (start_ns_ < 0 || !enabled() ||
      session_ != recorder().session.load(std::memory_order_relaxed)) {
    return;
  }
  // record() allocates; a destructor must not throw, and a lost span is no reason to stop.
  try {
    complete(category_, std::move(name_), start_ns_, now_ns());
  } catch (...) {
  }
}

void complete(std::string_view category, std::string name, std::int64_t start_ns,
              std::int64_t end_ns) {
  if (!enabled()) return;
  record(Event{.phase = Phase::Complete,
               .ts_ns = start_ns,
               .dur_ns = std::max<std::int64_t>(0, end_ns - start_ns),
               .category = std::string(category),
               .name = std::move(name)});
}

void instant(std::string_view category, std::string name) {
  if (!enabled()) return;
  record(Event{.phase = Phase::Instant,
               .ts_ns = now_ns(),
               .category = std::string(category),
               .name = std::move(name)});
}

// ---- Reading back ----------------------------------------------------------------------

namespace {

// Every thread's events that reach `since` or later (complete events that end there,
// the others that happen there), ordered by time. summarize_since() copies one epoch,
// not the whole run.
std::vector<Event> collect(std::int64_t since) {
  Recorder& r = recorder();
  std::vector<Event> all;
  {
    std::lock_guard lock(r.mutex);
    for (auto& buffer : r.buffers) {
      std::lock_guard buffer_lock(buffer->mutex);
      for (const Event& e : buffer->events) {
        if (e.ts_ns + e.dur_ns >= since) all.push_back(e);
      }
    }
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Event& a, const Event& b) { return a.ts_ns < b.ts_ns; });
  return all;
}

}  // namespace

std::vector<Event> events() { return collect(std::numeric_limits<std::int64_t>::min()); }

namespace {

// A string as a JSON string literal: quotes, backslashes and control characters escaped.
std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Chrome's format counts microseconds; three decimals keep the nanoseconds.
std::string micros(std::int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", static_cast<double>(ns) / 1e3);
  return text;
}

}  // namespace

// One event per line, so that a reader (and a diff) can follow the file. The metadata
// events ("M") name the process (rank R) and each thread; "otherData" keeps the rank and
// the wall-clock time of start(), which ddp-trace-merge uses to put ranks on one axis.
void write(const std::string& path) {
  Recorder& r = recorder();
  const std::vector<Event> all = events();
  std::vector<std::pair<std::uint32_t, std::string>> threads;
  int rank = 0;
  std::int64_t start_unix_us = 0;
  {
    std::lock_guard lock(r.mutex);
    rank = r.rank;
    start_unix_us = r.start_unix_us;
    for (auto& buffer : r.buffers) {
      std::lock_guard buffer_lock(buffer->mutex);
      threads.emplace_back(buffer->tid, buffer->name.empty()
                                            ? detail::concat("thread ", buffer->tid)
                                            : buffer->name);
    }
  }
  std::ofstream out(path, std::ios::trunc);
  DDP_CHECK(out.is_open(), "trace::write: cannot open ", path, " for writing");
  const std::string pid = std::to_string(rank);
  out << "{\"traceEvents\":[\n";
  out << R"({"ph":"M","pid":)" << pid << R"(,"tid":0,"name":"process_name","args":{"name":)"
      << json_string(detail::concat("rank ", rank)) << "}}";
  for (const auto& [tid, name] : threads) {
    out << ",\n"
        << R"({"ph":"M","pid":)" << pid << R"(,"tid":)" << tid
        << R"(,"name":"thread_name","args":{"name":)" << json_string(name) << "}}";
  }
  for (const Event& e : all) {
    out << ",\n{\"ph\":\"" << static_cast<char>(e.phase) << "\",\"pid\":" << pid
        << ",\"tid\":" << e.tid << ",\"ts\":" << micros(e.ts_ns);
    if (e.phase == Phase::Complete) out << ",\"dur\":" << micros(e.dur_ns);
    if (e.phase == Phase::Instant) out << ",\"s\":\"t\"";  // a mark on its thread's track
    out << ",\"cat\":" << json_string(e.category) << ",\"name\":" << json_string(e.name) << '}';
  }
  out << "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"rank\":" << pid
      << ",\"start_unix_us\":" << start_unix_us << "}}\n";
  out.close();
  DDP_CHECK(out.good(), "trace::write: writing ", path, " failed (disk full?)");
}

// ---- Summary (Note [Overlap summary] in trace.hpp) -------------------------------------

double Summary::overlap_percent() const {
  if (communication_ms <= 0.0) return 0.0;
  return std::clamp(100.0 * (1.0 - exposed_ms / communication_ms), 0.0, 100.0);
}

namespace {

using Interval = std::pair<std::int64_t, std::int64_t>;  // [begin, end) in ns

// Sorted, disjoint intervals covering exactly what `intervals` cover.
std::vector<Interval> merge(std::vector<Interval> intervals) {
  std::sort(intervals.begin(), intervals.end());
  std::vector<Interval> out;
  for (const Interval& i : intervals) {
    if (i.second <= i.first) continue;
    if (!out.empty() && i.first <= out.back().second) {
      out.back().second = std::max(out.back().second, i.second);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

std::int64_t length(const std::vector<Interval>& disjoint) {
  std::int64_t total = 0;
  for (const auto& [begin, end] : disjoint) total += end - begin;
  return total;
}

// Length of the intersection of two sorted disjoint lists (a merge walk).
std::int64_t overlap_length(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::int64_t total = 0;
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const std::int64_t begin = std::max(a[i].first, b[j].first);
    const std::int64_t end = std::min(a[i].second, b[j].second);
    if (end > begin) total += end - begin;
    (a[i].second < b[j].second) ? ++i : ++j;
  }
  return total;
}

bool is_compute(const std::string& category) {
  return category == "forward" || category == "backward" || category == "optimizer";
}

double to_ms(std::int64_t ns) { return static_cast<double>(ns) / 1e6; }

}  // namespace

std::vector<Interval> exposed_intervals(const std::vector<Event>& events, std::int64_t from_ns,
                                        std::int64_t to_ns) {
  std::vector<Interval> wait;
  for (const Event& e : events) {
    if (e.phase != Phase::Complete || e.category != "wait") continue;
    wait.emplace_back(std::max(e.ts_ns, from_ns), std::min(e.ts_ns + e.dur_ns, to_ns));
  }
  return merge(std::move(wait));  // drops what the clip left empty
}

Summary summarize(const std::vector<Event>& events, std::int64_t from_ns, std::int64_t to_ns) {
  std::vector<Interval> compute, comm;
  auto clip = [&](std::int64_t begin, std::int64_t end) {
    return Interval{std::max(begin, from_ns), std::min(end, to_ns)};
  };
  for (const Event& e : events) {
    if (e.phase != Phase::Complete) continue;
    const Interval i = clip(e.ts_ns, e.ts_ns + e.dur_ns);
    if (is_compute(e.category)) compute.push_back(i);
    if (e.category == "comm") comm.push_back(i);
  }
  const std::vector<Interval> compute_union = merge(std::move(compute));
  const std::vector<Interval> wait_union = exposed_intervals(events, from_ns, to_ns);
  Summary s;
  s.compute_ms = to_ms(length(compute_union) - overlap_length(compute_union, wait_union));
  s.communication_ms = to_ms(length(merge(std::move(comm))));
  s.exposed_ms = to_ms(length(wait_union));
  return s;
}

Mark mark() { return Mark{now_ns()}; }

Summary summarize_since(Mark from) { return summarize(collect(from.ns), from.ns, now_ns()); }

// ---- A timeline in text ---------------------------------------------------------------

namespace {

// The letter a span's category is drawn with; 0 for categories not drawn.
char letter_of(const std::string& category) {
  if (category == "forward") return 'F';
  if (category == "backward") return 'B';
  if (category == "optimizer") return 'O';
  if (category == "wait") return 'w';
  if (category == "comm") return '=';
  return 0;
}

}  // namespace

std::string render_text(const std::vector<Event>& events, std::int64_t from_ns, std::int64_t to_ns,
                        const std::vector<InstantRow>& instant_rows, int columns) {
  DDP_CHECK(to_ns > from_ns && columns > 0, "trace::render_text: empty interval [", from_ns, ", ",
            to_ns, "] or no columns");
  for (const InstantRow& row : instant_rows) {
    DDP_CHECK(row.mark != nullptr, "trace::render_text: the instant row \"", row.title,
              "\" has no mark function");
  }
  const double per_column = static_cast<double>(to_ns - from_ns) / columns;
  // Per thread and column, how long each letter covered it; a wait inside a backward
  // span is drawn as the wait (the more specific span wins over its parent). Per thread
  // and instant row, its marks ("" while it has none).
  struct Row {
    std::map<char, std::vector<double>> cover;
    std::vector<std::string> instants;
  };
  std::map<std::uint32_t, Row> rows;
  for (const Event& e : events) {
    if (e.phase == Phase::Instant && e.ts_ns >= from_ns && e.ts_ns < to_ns) {
      const auto c = static_cast<int>(static_cast<double>(e.ts_ns - from_ns) / per_column);
      for (std::size_t k = 0; k < instant_rows.size(); ++k) {
        if (e.category != instant_rows[k].category) continue;
        std::vector<std::string>& marks = rows[e.tid].instants;
        marks.resize(instant_rows.size());
        if (marks[k].empty()) marks[k].assign(columns, ' ');
        const char mark = instant_rows[k].mark(e.name);
        if (mark != 0 && c < columns) marks[k][c] = mark;
      }
      continue;
    }
    const char letter = letter_of(e.category);
    if (e.phase != Phase::Complete || letter == 0) continue;
    std::vector<double>& cover = rows[e.tid].cover[letter];
    cover.resize(columns, 0.0);
    const double begin = static_cast<double>(std::max(e.ts_ns, from_ns) - from_ns);
    const double end = static_cast<double>(std::min(e.ts_ns + e.dur_ns, to_ns) - from_ns);
    for (int c = static_cast<int>(begin / per_column); c < columns && c * per_column < end; ++c) {
      const double lo = std::max(begin, c * per_column), hi = std::min(end, (c + 1) * per_column);
      if (hi > lo) cover[c] += hi - lo;
    }
  }
  std::map<std::uint32_t, std::string> names;
  {
    Recorder& r = recorder();
    std::lock_guard lock(r.mutex);
    for (const auto& buffer : r.buffers) {
      std::lock_guard buffer_lock(buffer->mutex);
      names[buffer->tid] = buffer->name;
    }
  }
  std::string out;
  for (const auto& [tid, row] : rows) {
    if (row.cover.empty()) continue;
    std::string line(columns, '.');
    for (int c = 0; c < columns; ++c) {
      double best = 0.05 * per_column;                       // less than 5 % of a column: nothing
      for (const char letter : {'w', 'O', 'F', 'B', '='}) {  // most specific first
        const auto it = row.cover.find(letter);
        if (it == row.cover.end()) continue;
        // A wait inside a backward span counts for the wait.
        const auto wait = row.cover.find('w');
        const double t =
            it->second[c] - (letter == 'B' && wait != row.cover.end() ? wait->second[c] : 0.0);
        if (t > best) {
          best = t;
          line[c] = letter;
        }
      }
    }
    const std::string name = names.count(tid) ? names[tid] : detail::concat("thread ", tid);
    const std::string label = name.substr(0, 18);
    out += label + std::string(20 - label.size(), ' ') + line + "\n";
    for (std::size_t k = 0; k < row.instants.size(); ++k) {
      if (row.instants[k].empty()) continue;
      const std::string title = instant_rows[k].title.substr(0, 16);
      out += "  " + title + std::string(18 - title.size(), ' ') + row.instants[k] + "\n";
    }
  }
  return out;
}

}  // namespace ddp::trace
