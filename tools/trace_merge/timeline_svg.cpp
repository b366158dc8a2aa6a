// Drawing the merged timeline (see timeline_svg.hpp).
#include "tools/trace_merge/timeline_svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "base/error.hpp"
#include "base/trace.hpp"
#include "tools/trace_merge/svg.hpp"

namespace ddp::trace_merge {

// Note [Timeline layout]
//   Everything is placed by a few constants (pixels) and one scale:
//
//     x(t) = kLeft + (t - from) * px_per_ms,   px_per_ms = (kWidth - kLeft - kRight) / (to - from)
//
//   t in ms on the merged axis, [from, to] the window drawn: a span [ts, ts + dur] is a
//   rect from x(ts) to x(ts + dur), clipped to the window. Top to bottom:
//
//     kTop          title, window and scale
//     per rank      kHeader: "rank R" and its summary numbers
//                   the main thread: one level of kLevel pixels per nesting depth (depth
//                     0 = forward + loss, backward, SGD step; 1 = model, waits; ...)
//                   kLaneGap, then the communication thread, one level per collective
//                     running at once (usually one)
//                   kRankGap
//     kAxis         the time axis: a tick every 1, 2 or 5 x 10^k ms, about ten of them,
//                   labelled in ms since the window's start
//     legend        rows of kLegendRow pixels
//
//   The root <svg> states the scale (data-from-ms, data-px-per-ms, data-left), so that a
//   test or a reader can turn any x back into a time.

namespace {

constexpr double kWidth = 1200, kLeft = 130, kRight = 20, kTop = 58;
constexpr double kHeader = 18, kLevel = 16, kLaneGap = 4, kRankGap = 16;
constexpr double kAxis = 42, kLegendRow = 20;
constexpr double kCharWidth = 5.5;        // 9 px monospace: 0.6 em a character
constexpr double kLegendCharWidth = 6.6;  // 11 px monospace

constexpr const char* kCss = R"(.background { fill: #fff; }
text { font-family: monospace; font-size: 11px; fill: #222; }
.title { font-size: 14px; font-weight: bold; }
.rank-label { font-size: 12px; font-weight: bold; }
.label { font-size: 9px; fill: #fff; pointer-events: none; }
.span { stroke: #fff; stroke-width: 0.5; }
.forward { fill: #4e79a7; }
.backward { fill: #f28e2b; }
.optimizer { fill: #b07aa1; }
.wait { fill: #e15759; }
.evaluation { fill: #9d9d9d; }
.other { fill: #bab0ac; }
.bucket { fill: #59a14f; }
.collective { fill: #8c8c8c; }
.exposed { fill: #e15759; fill-opacity: 0.25; stroke: #e15759; stroke-width: 0.5; }
.launch { stroke: #000; stroke-width: 1.5; }
.axis { stroke: #222; stroke-width: 1; }
.grid { stroke: #ddd; stroke-width: 1; }
.swatch { stroke: #fff; }
)";

// ---- The events of one rank -------------------------------------------------------------
struct Span {
  double begin_ms = 0, end_ms = 0;
  std::string category, name;
  int depth = 0;      // nesting level in its lane
  std::string label;  // what the rect says: its name, or "bucket B" for a bucket
  std::string css;    // its colour class
};

struct RankEvents {
  int rank = 0;
  std::vector<Span> main, comm;                  // the main thread's spans; the collectives
  std::vector<std::pair<double, int>> launches;  // (ms, bucket) from the Reducer's instants
  std::vector<trace::Event> recorded;            // the same, as base/trace's summary reads them
};

double number(const json::Value& e, const char* key) {
  const json::Value* v = e.find(key);
  return v != nullptr && v->is_number() ? std::get<double>(v->v) : 0.0;
}

std::string string_of(const json::Value& e, const char* key) {
  const json::Value* v = e.find(key);
  return v != nullptr && v->is_string() ? std::get<std::string>(v->v) : "";
}

std::int64_t to_ns(double ms) { return std::llround(ms * 1e6); }

// "bucket 3: launch" -> 3; -1 for anything else.
int launched_bucket(const std::string& name) {
  int bucket = -1;
  char rest[8] = {};
  if (std::sscanf(name.c_str(), "bucket %d: %7s", &bucket, rest) == 2 &&
      std::string(rest) == "launch") {
    return bucket;
  }
  return -1;
}

// Each span's depth: how many spans of its lane enclose it (a stack of end times; spans
// of one thread nest, base/trace.hpp).
void assign_depths(std::vector<Span>& spans) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin_ms != b.begin_ms ? a.begin_ms < b.begin_ms : a.end_ms > b.end_ms;
  });
  std::vector<double> open_ends;
  for (Span& s : spans) {
    while (!open_ends.empty() && open_ends.back() <= s.begin_ms) open_ends.pop_back();
    s.depth = static_cast<int>(open_ends.size());
    open_ends.push_back(s.end_ms);
  }
}

// Note [Which collective is a bucket's]
//   The trace names a collective by what it moves ("all_reduce of 626186 float32 (sum)"),
//   not by the bucket it belongs to; the Reducer records an instant "bucket B: launch" on
//   the main thread when it hands bucket B to the process group. The group's communication
//   thread runs collectives in the order they were launched, each after its launch, so a
//   bucket's collective is the first one not yet taken that begins at or after its launch.
//   Collectives no bucket claims (the broadcasts of the start and of the buffers, the
//   ranks' agreements) are drawn grey, under their own names.
void name_buckets(RankEvents& r) {
  std::sort(r.launches.begin(), r.launches.end());
  std::vector<bool> taken(r.comm.size(), false);
  for (const auto& [at_ms, bucket] : r.launches) {
    for (std::size_t i = 0; i < r.comm.size(); ++i) {
      if (taken[i] || r.comm[i].begin_ms < at_ms) continue;
      taken[i] = true;
      r.comm[i].label = "bucket " + std::to_string(bucket);
      r.comm[i].css = "bucket";
      break;
    }
  }
}

std::vector<RankEvents> by_rank(const Merged& merged) {
  std::map<int, RankEvents> ranks;
  for (const int rank : merged.ranks) ranks[rank].rank = rank;
  for (const json::Value& e : merged.events) {
    const std::string phase = string_of(e, "ph");
    RankEvents& r = ranks[static_cast<int>(number(e, "pid"))];
    r.rank = static_cast<int>(number(e, "pid"));
    const double ts_ms = number(e, "ts") / 1000.0;  // the file's times are microseconds
    const std::string category = string_of(e, "cat");
    const std::string name = string_of(e, "name");
    if (phase == "X") {
      Span s;
      s.begin_ms = ts_ms;
      s.end_ms = ts_ms + number(e, "dur") / 1000.0;
      s.category = category;
      s.name = s.label = name;
      const bool known = category == "forward" || category == "backward" ||
                         category == "optimizer" || category == "wait" || category == "evaluation";
      s.css = category == "comm" ? "collective" : known ? category : "other";
      (category == "comm" ? r.comm : r.main).push_back(s);
      r.recorded.push_back(trace::Event{trace::Phase::Complete, to_ns(s.begin_ms),
                                        to_ns(s.end_ms) - to_ns(s.begin_ms), 0, category, name});
    } else if ((phase == "i" || phase == "I") && category == "reducer") {
      if (const int bucket = launched_bucket(name); bucket >= 0) {
        r.launches.emplace_back(ts_ms, bucket);
      }
    }
  }
  std::vector<RankEvents> out;
  for (auto& [rank, r] : ranks) {
    assign_depths(r.main);
    assign_depths(r.comm);
    name_buckets(r);
    out.push_back(std::move(r));
  }
  return out;
}

// ---- The window -------------------------------------------------------------------------
struct Window {
  double from_ms = 0, to_ms = 0;
  std::string what;  // "steps 1-3", "the whole trace"
};

Window choose_window(const std::vector<RankEvents>& ranks, int steps) {
  Window w{std::numeric_limits<double>::max(), std::numeric_limits<double>::lowest(), ""};
  for (const RankEvents& r : ranks) {
    for (const auto* lane : {&r.main, &r.comm}) {
      for (const Span& s : *lane) {
        w.from_ms = std::min(w.from_ms, s.begin_ms);
        w.to_ms = std::max(w.to_ms, s.end_ms);
      }
    }
  }
  DDP_CHECK(w.from_ms < w.to_ms, "ddp-trace-merge --svg: the trace holds no span to draw");
  if (steps <= 0) {
    w.what = "the whole trace";
    return w;
  }
  double first_forward = std::numeric_limits<double>::max();
  double last_end = std::numeric_limits<double>::lowest();
  int most_steps = 0;
  for (const RankEvents& r : ranks) {
    std::vector<double> optimizer_ends;
    for (const Span& s : r.main) {
      if (s.category == "forward") first_forward = std::min(first_forward, s.begin_ms);
      if (s.category == "optimizer") optimizer_ends.push_back(s.end_ms);
    }
    std::sort(optimizer_ends.begin(), optimizer_ends.end());
    const std::size_t n = std::min<std::size_t>(optimizer_ends.size(), steps);
    if (n > 0) last_end = std::max(last_end, optimizer_ends[n - 1]);
    most_steps = std::max(most_steps, static_cast<int>(n));
  }
  if (most_steps == 0 || first_forward >= last_end) {
    w.what = "the whole trace (no optimizer step in it)";
    return w;
  }
  w.from_ms = first_forward;
  w.to_ms = last_end;
  w.what = most_steps == 1 ? "step 1" : "steps 1-" + std::to_string(most_steps);
  return w;
}

// ---- Drawing ----------------------------------------------------------------------------
std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

int lane_levels(const std::vector<Span>& spans) {
  int levels = 1;  // an empty lane still gets its row
  for (const Span& s : spans) levels = std::max(levels, s.depth + 1);
  return levels;
}

struct Scale {
  double from_ms, to_ms, px_per_ms;
  double x(double ms) const { return kLeft + (ms - from_ms) * px_per_ms; }
};

// One lane's spans from y = top, each clipped to the window; a name inside its rect where
// it fits.
void draw_lane(svg::Writer& out, const std::vector<Span>& spans, const Scale& scale, double top,
               const char* lane) {
  out.open_group(std::string("lane ") + lane);
  for (const Span& s : spans) {
    const double begin = std::max(s.begin_ms, scale.from_ms);
    const double end = std::min(s.end_ms, scale.to_ms);
    if (end <= begin) continue;  // outside the window
    const double x = scale.x(begin), width = (end - begin) * scale.px_per_ms;
    const double y = top + s.depth * kLevel;
    out.rect(x, y, width, kLevel - 1, "span " + s.css,
             s.label + " (" + s.category + "): " + format("%.3f ms", s.end_ms - s.begin_ms));
    if (width >= kCharWidth * static_cast<double>(s.label.size()) + 4) {
      out.text(x + 2, y + kLevel - 5, s.label, "label");
    }
  }
  out.close_group();
}

// Returns the height used.
double draw_rank(svg::Writer& out, const RankEvents& r, const Scale& scale, double top) {
  const int main_levels = lane_levels(r.main), comm_levels = lane_levels(r.comm);
  const double main_top = top + kHeader;
  const double comm_top = main_top + main_levels * kLevel + kLaneGap;
  const double bottom = comm_top + comm_levels * kLevel;
  const trace::Summary sum = trace::summarize(r.recorded, to_ns(scale.from_ms), to_ns(scale.to_ms));

  out.open_group("rank", "data-rank=\"" + std::to_string(r.rank) + "\"");
  out.text(8, top + 13, "rank " + std::to_string(r.rank), "rank-label");
  out.text(kLeft, top + 13,
           "compute " + format("%.1f ms", sum.compute_ms) + ", communication " +
               format("%.1f ms", sum.communication_ms) + ", exposed " +
               format("%.1f ms", sum.exposed_ms) + " (shaded), overlap " +
               format("%.0f%%", sum.overlap_percent()),
           "summary");
  out.text(8, main_top + 12, "main thread", "lane-label");
  out.text(8, comm_top + 12, "communication", "lane-label");
  draw_lane(out, r.main, scale, main_top, "main");
  draw_lane(out, r.comm, scale, comm_top, "comm");
  out.open_group("launches");
  for (const auto& [at_ms, bucket] : r.launches) {
    if (at_ms < scale.from_ms || at_ms > scale.to_ms) continue;
    out.line(scale.x(at_ms), comm_top - 3, scale.x(at_ms), bottom, "launch");
  }
  out.close_group();
  // The exposed time on top, translucent, across both lanes: where the main thread
  // waited, and for which collectives.
  out.open_group("exposed-time", "data-exposed-ms=\"" + format("%.3f", sum.exposed_ms) + "\"");
  for (const auto& [begin_ns, end_ns] :
       trace::exposed_intervals(r.recorded, to_ns(scale.from_ms), to_ns(scale.to_ms))) {
    const double begin = static_cast<double>(begin_ns) / 1e6,
                 end = static_cast<double>(end_ns) / 1e6;
    out.rect(scale.x(begin), main_top, (end - begin) * scale.px_per_ms, bottom - main_top,
             "exposed", "exposed: " + format("%.3f ms", end - begin));
  }
  out.close_group();
  out.close_group();
  return bottom - top + kRankGap;
}

void draw_axis(svg::Writer& out, const Scale& scale, double rows_top, double axis_y) {
  const double span = scale.to_ms - scale.from_ms, step = svg::tick_step(span, 10);
  out.open_group("time-axis", "data-tick-ms=\"" + format("%g", step) + "\"");
  out.line(kLeft, axis_y, scale.x(scale.to_ms), axis_y, "axis");
  for (int k = 0; k * step <= span * (1 + 1e-9); ++k) {
    const double x = scale.x(scale.from_ms + k * step);
    out.line(x, rows_top, x, axis_y, "grid");
    out.line(x, axis_y, x, axis_y + 5, "axis");
    out.text(x, axis_y + 17, format("%g", k * step), "tick", "middle");
  }
  out.text(kLeft, axis_y + 33,
           "ms since the window's start (" + format("%.1f ms", scale.from_ms) +
               " on the merged trace's clock); 1 px = " + format("%.3f ms", 1 / scale.px_per_ms),
           "axis-label");
  out.close_group();
}

struct LegendItem {
  const char* css;
  const char* text;
};

constexpr LegendItem kLegend[] = {
    {"forward", "forward"},
    {"backward", "backward"},
    {"optimizer", "optimizer"},
    {"wait", "main thread waits for communication"},
    {"evaluation", "evaluation"},
    {"bucket", "a bucket's all-reduce"},
    {"collective", "another collective"},
    {"exposed", "exposed communication (shaded)"},
    {"launch", "bucket launched"},
};

// Where each legend item goes: left to right from kLeft, a new row when the next one
// would pass the right margin. (x, y) of its swatch, relative to the legend's top.
std::vector<std::pair<double, double>> legend_positions() {
  std::vector<std::pair<double, double>> at;
  double x = kLeft, y = 0;
  for (const LegendItem& item : kLegend) {
    const double width = 20 + kLegendCharWidth * std::string(item.text).size() + 18;
    if (x + width > kWidth - kRight) x = kLeft, y += kLegendRow;
    at.emplace_back(x, y);
    x += width;
  }
  return at;
}

void draw_legend(svg::Writer& out, double top) {
  out.open_group("legend");
  const std::vector<std::pair<double, double>> at = legend_positions();
  for (std::size_t i = 0; i < at.size(); ++i) {
    const LegendItem& item = kLegend[i];
    const double x = at[i].first, y = top + at[i].second;
    if (std::string(item.css) == "launch") {
      out.line(x + 7, y, x + 7, y + 12, "launch");
    } else {
      out.rect(x, y, 14, 12, std::string("swatch ") + item.css);
    }
    out.text(x + 20, y + 10, item.text, "legend-text");
  }
  out.close_group();
}

}  // namespace

std::string draw_timeline(const Merged& merged, const TimelineOptions& options) {
  const std::vector<RankEvents> ranks = by_rank(merged);
  const Window window = choose_window(ranks, options.steps);
  const Scale scale{window.from_ms, window.to_ms,
                    (kWidth - kLeft - kRight) / (window.to_ms - window.from_ms)};

  // The height is known only once every rank's levels are: lay out first, then write.
  double rows_height = 0;
  for (const RankEvents& r : ranks) {
    rows_height +=
        kHeader + (lane_levels(r.main) + lane_levels(r.comm)) * kLevel + kLaneGap + kRankGap;
  }
  const double axis_y = kTop + rows_height;
  const double height = axis_y + kAxis + legend_positions().back().second + kLegendRow + 8;

  svg::Writer out(kWidth, height, kCss);
  out.set_root_attributes("data-from-ms=\"" + format("%.6f", scale.from_ms) + "\" data-to-ms=\"" +
                          format("%.6f", scale.to_ms) + "\" data-px-per-ms=\"" +
                          format("%.9f", scale.px_per_ms) + "\" data-left=\"" +
                          format("%g", kLeft) + "\"");
  out.rect(0, 0, kWidth, height, "background");
  std::string files;
  for (const std::string& f : merged.inputs) files += (files.empty() ? "" : ", ") + f;
  out.text(8, 20, "ddp-trace-merge: " + files, "title");
  out.text(8, 40,
           window.what + ", " + std::to_string(ranks.size()) + " rank" +
               (ranks.size() == 1 ? "" : "s") + ", " +
               format("%.1f ms", window.to_ms - window.from_ms) +
               "; hover over a span for its name and duration",
           "subtitle");
  double y = kTop;
  for (const RankEvents& r : ranks) y += draw_rank(out, r, scale, y);
  draw_axis(out, scale, kTop, axis_y);
  draw_legend(out, axis_y + kAxis);
  return out.str();
}

}  // namespace ddp::trace_merge
