// Chapter 07, ddp-trace-merge --svg and --metrics-svg (tools/trace_merge/): the pictures
// read back as XML and checked against the trace they were drawn from. Two ranks' hand-made
// trace files, in the recorder's format, with three steps each; the test states the window
// and the exposed time it expects and computes each rect's place from the events itself:
// a row per rank, one rect per span in the window at x = left + (ts - from) * px_per_ms,
// the shaded time equal to the union of the wait spans, the tick labels on the scale, and
// one point per CSV row on each curve. Missing and malformed inputs: errors naming the file.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/temp_dir.hpp"
#include "tools/trace_merge/metrics_svg.hpp"
#include "tools/trace_merge/timeline_svg.hpp"
#include "tools/trace_merge/trace_merge.hpp"

namespace tool = ddp::trace_merge;

namespace {

// ---- A small XML reader: what the SVG writer writes -------------------------------------
struct Element {
  std::string tag;
  std::map<std::string, std::string> attributes;
  std::vector<Element> children;
  std::string text;  // the character data directly inside it, entities decoded

  const std::string& at(const std::string& name) const {
    const auto it = attributes.find(name);
    if (it == attributes.end()) FAIL("<" << tag << "> has no attribute " << name);
    return it->second;
  }
  double number(const std::string& name) const { return std::stod(at(name)); }
  bool has_class(const std::string& c) const {
    const auto it = attributes.find("class");
    if (it == attributes.end()) return false;
    std::istringstream words(it->second);
    for (std::string w; words >> w;) {
      if (w == c) return true;
    }
    return false;
  }
  // Every element under this one (depth first) with `tag` and, if given, class `c`.
  std::vector<const Element*> all(const std::string& t, const std::string& c = "") const {
    std::vector<const Element*> out;
    for (const Element& child : children) {
      if (child.tag == t && (c.empty() || child.has_class(c))) out.push_back(&child);
      for (const Element* e : child.all(t, c)) out.push_back(e);
    }
    return out;
  }
};

class XmlReader {
 public:
  explicit XmlReader(std::string text) : s_(std::move(text)) {}
  Element document() {
    skip_space();
    if (s_.compare(i_, 5, "<?xml") == 0) i_ = s_.find("?>", i_) + 2;
    skip_space();
    Element root = element();
    skip_space();
    REQUIRE(i_ == s_.size());
    return root;
  }

 private:
  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  std::string name() {
    const std::size_t begin = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' ||
                              s_[i_] == ':' || s_[i_] == '_')) {
      ++i_;
    }
    REQUIRE(i_ > begin);
    return s_.substr(begin, i_ - begin);
  }
  static std::string decode(std::string t) {
    for (const auto& [entity, c] : std::vector<std::pair<std::string, std::string>>{
             {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&amp;", "&"}}) {
      for (std::size_t at = t.find(entity); at != std::string::npos; at = t.find(entity, at + 1)) {
        t.replace(at, entity.size(), c);
      }
    }
    return t;
  }
  Element element() {
    REQUIRE(s_[i_] == '<');
    ++i_;
    Element e;
    e.tag = name();
    for (;;) {
      skip_space();
      if (s_.compare(i_, 2, "/>") == 0) {
        i_ += 2;
        return e;
      }
      if (s_[i_] == '>') break;
      const std::string key = name();
      REQUIRE(s_.compare(i_, 2, "=\"") == 0);
      const std::size_t end = s_.find('"', i_ + 2);
      REQUIRE(end != std::string::npos);
      REQUIRE(e.attributes.count(key) == 0);
      e.attributes[key] = decode(s_.substr(i_ + 2, end - i_ - 2));
      i_ = end + 1;
    }
    ++i_;
    for (;;) {
      REQUIRE(i_ < s_.size());
      if (s_.compare(i_, 2, "</") == 0) {
        i_ += 2;
        REQUIRE(name() == e.tag);
        REQUIRE(s_[i_] == '>');
        ++i_;
        return e;
      }
      if (s_[i_] == '<') {
        e.children.push_back(element());
      } else {
        const std::size_t end = s_.find('<', i_);
        e.text += decode(s_.substr(i_, end - i_));
        i_ = end;
      }
    }
  }
  std::string s_;
  std::size_t i_ = 0;
};

Element parse_svg(const std::string& text) { return XmlReader(text).document(); }

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

// ---- The trace: two ranks, three steps each -----------------------------------------------
struct Span {
  int rank;
  double ts_us, dur_us;  // on the merged axis
  std::string category, name;
};

constexpr double kStartShiftUs = 2000;  // rank 1 started recording 2 ms after rank 0

// Rank r's events (its own clock) and, into `spans`, the same on the merged axis.
std::string rank_file(int rank, std::vector<Span>& spans) {
  std::string events = R"({"ph":"M","pid":)" + std::to_string(rank) +
                       R"(,"tid":1,"name":"thread_name","args":{"name":"tcp communication"}},
{"ph":"M","pid":)" + std::to_string(rank) +
                       R"(,"tid":2,"name":"thread_name","args":{"name":"main"}})";
  const auto span = [&](int tid, double ts, double dur, const std::string& cat,
                        const std::string& name) {
    events += ",\n{\"ph\":\"X\",\"pid\":" + std::to_string(rank) +
              ",\"tid\":" + std::to_string(tid) + ",\"ts\":" + std::to_string(ts) +
              ",\"dur\":" + std::to_string(dur) + ",\"cat\":\"" + cat + "\",\"name\":\"" + name +
              "\"}";
    spans.push_back(Span{rank, ts + (rank == 1 ? kStartShiftUs : 0), dur, cat, name});
  };
  const auto instant = [&](double ts, const std::string& cat, const std::string& name) {
    events += ",\n{\"ph\":\"i\",\"s\":\"t\",\"pid\":" + std::to_string(rank) +
              ",\"tid\":2,\"ts\":" + std::to_string(ts) + ",\"cat\":\"" + cat + "\",\"name\":\"" +
              name + "\"}";
  };
  span(1, 100, 800, "comm", "broadcast of 1226442 float32 from rank 0");  // before the window
  for (int k = 0; k < 3; ++k) {
    const double base = 1000 + 40000 * k + 500 * rank;
    span(2, base, 10000, "forward", "forward + loss");
    span(2, base + 100, 9800, "forward", "model");
    span(2, base + 200, 4000, "forward", "block1");
    span(2, base + 10000, 20000, "backward", "backward");
    span(2, base + 12000, 5000, "backward", "block1");
    instant(base + 12500, "backward", "conv: gradient in");
    instant(base + 15000, "reducer", "bucket 0: launch");
    span(1, base + 15500, 3000, "comm", "all_reduce of 100 float32 (sum)");
    instant(base + 25000, "reducer", "bucket 1: launch");
    span(1, base + 25100, 5900, "comm", "all_reduce of 2000 float32 (sum)");
    // Two waits that overlap by 0.5 ms: the exposed time counts it once (3 ms a step).
    span(2, base + 28000, 2000, "wait", "wait for bucket 0");
    span(2, base + 29500, 1500, "wait", "wait for bucket 1");
    span(2, base + 31000, 1000, "optimizer", "SGD step");
    span(1, base + 32100, 200, "comm", "all_reduce of 1 int64 (max)");
    if (rank == 0 && k == 1) span(1, base + 32000, 4000, "comm", "all_gather of 1 int64");
  }
  return R"({"traceEvents":[
)" + events +
         R"(
],"otherData":{"rank":)" +
         std::to_string(rank) + R"(,"start_unix_us":)" +
         std::to_string(1e9 + (rank == 1 ? kStartShiftUs : 0)) + "}}\n";
}

// What the window of steps 1-2 must be (the test's own reading of the fixture): from rank
// 0's first forward (1000 us) to rank 1's second SGD step's end (41500 + 32000 + 2000 us).
constexpr double kFromMs = 1.0, kToMs = 75.5;

// The union of [ts, ts + dur] of the wait spans of `rank`, clipped to the window, in ms.
double exposed_ms(const std::vector<Span>& spans, int rank) {
  std::vector<std::pair<double, double>> waits;
  for (const Span& s : spans) {
    if (s.rank != rank || s.category != "wait") continue;
    const double begin = std::max(s.ts_us / 1000, kFromMs);
    const double end = std::min((s.ts_us + s.dur_us) / 1000, kToMs);
    if (end > begin) waits.emplace_back(begin, end);
  }
  std::sort(waits.begin(), waits.end());
  double total = 0, covered_to = -1e300;
  for (const auto& [begin, end] : waits) {
    const double from = std::max(begin, covered_to);
    if (end > from) total += end - from;
    covered_to = std::max(covered_to, end);
  }
  return total;
}

struct Fixture {
  ddp::testing::TempDir dir{"ch07_trace_svg"};
  std::vector<Span> spans;
  std::vector<std::string> files;
  Fixture() {
    for (int rank = 0; rank < 2; ++rank) {
      const auto path = dir.path() / ("run.rank" + std::to_string(rank) + ".json");
      write_text(path, rank_file(rank, spans));
      files.push_back(path.string());
    }
  }
};

}  // namespace

TEST_CASE(
    "the timeline SVG: a row per rank, a rect per span on the stated scale, exposed "
    "time shaded",
    "[ch07][trace]") {
  Fixture f;
  tool::TimelineOptions options;
  options.steps = 2;
  const Element svg = parse_svg(tool::draw_timeline(tool::merge(f.files), options));
  REQUIRE(svg.tag == "svg");
  CHECK(svg.all("script").empty());  // self-contained: nothing to run, nothing to fetch
  CHECK(svg.all("image").empty());
  const double from = svg.number("data-from-ms"), to = svg.number("data-to-ms");
  const double px_per_ms = svg.number("data-px-per-ms"), left = svg.number("data-left");
  CHECK(from == Approx(kFromMs).margin(1e-6));
  CHECK(to == Approx(kToMs).margin(1e-6));

  const std::vector<const Element*> rows = svg.all("g", "rank");
  REQUIRE(rows.size() == 2);
  double previous_bottom = 0;
  for (int rank = 0; rank < 2; ++rank) {
    const Element& row = *rows[rank];
    CHECK(row.at("data-rank") == std::to_string(rank));
    // A row of its own: every rect of this rank lies below every rect of the one above.
    double top = 1e300, bottom = 0;
    for (const Element* r : row.all("rect")) {
      top = std::min(top, r->number("y"));
      bottom = std::max(bottom, r->number("y") + r->number("height"));
    }
    CHECK(top >= previous_bottom);
    previous_bottom = bottom;

    // One rect per span that meets the window, where the scale puts it.
    std::vector<std::pair<double, double>> expected, drawn;
    for (const Span& s : f.spans) {
      if (s.rank != rank) continue;
      const double begin = std::max(s.ts_us / 1000, kFromMs);
      const double end = std::min((s.ts_us + s.dur_us) / 1000, kToMs);
      if (end > begin)
        expected.emplace_back(left + (begin - from) * px_per_ms, (end - begin) * px_per_ms);
    }
    for (const Element* r : row.all("rect", "span")) {
      drawn.emplace_back(r->number("x"), r->number("width"));
    }
    CHECK(expected.size() == (rank == 0 ? 23u : 22u));  // 11 a step, and rank 0's clipped one
    REQUIRE(drawn.size() == expected.size());
    std::sort(expected.begin(), expected.end());
    std::sort(drawn.begin(), drawn.end());
    for (std::size_t i = 0; i < drawn.size(); ++i) {
      INFO("rank " << rank << ", span " << i);
      CHECK(drawn[i].first == Approx(expected[i].first).margin(0.006));
      CHECK(drawn[i].second == Approx(expected[i].second).margin(0.006));
    }
    // Each bucket's all-reduce named by its bucket, on the communication lane.
    const auto buckets = row.all("rect", "bucket");
    REQUIRE(buckets.size() == 4);  // two buckets, two steps
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      CHECK(buckets[i]->all("title").at(0)->text.rfind("bucket " + std::to_string(i % 2), 0) == 0);
    }
    CHECK(row.all("g", "comm").at(0)->all("rect", "bucket").size() == 4);

    // The shaded time: the union of the waits, 3 ms a step.
    double shaded_px = 0;
    for (const Element* r : row.all("rect", "exposed")) shaded_px += r->number("width");
    CHECK(exposed_ms(f.spans, rank) == Approx(6.0));
    CHECK(shaded_px / px_per_ms == Approx(exposed_ms(f.spans, rank)).margin(0.01));
  }

  // The axis: each tick's label is its time since the window's start, on the same scale.
  const Element& axis = *svg.all("g", "time-axis").at(0);
  const auto labels = axis.all("text", "tick");
  REQUIRE(labels.size() >= 5);
  for (const Element* label : labels) {
    CHECK(label->number("x") == Approx(left + std::stod(label->text) * px_per_ms).margin(0.006));
  }
}

TEST_CASE("the timeline SVG: a file merged before draws the same, --steps 0 draws it all",
          "[ch07][trace]") {
  Fixture f;
  const std::string merged = (f.dir.path() / "run.json").string();
  tool::merge_files(merged, f.files);
  const auto without_title = [](std::string svg) {
    const std::size_t at = svg.find("<text class=\"title\"");
    return svg.erase(at, svg.find('\n', at) - at);
  };
  CHECK(without_title(tool::draw_timeline(tool::merge({merged}), {})) ==
        without_title(tool::draw_timeline(tool::merge(f.files), {})));
  tool::TimelineOptions all;
  all.steps = 0;
  const Element svg = parse_svg(tool::draw_timeline(tool::merge(f.files), all));
  CHECK(svg.number("data-from-ms") == Approx(0.1));  // the broadcast at 100 us
  std::size_t rects = 0;
  for (const Element* row : svg.all("g", "rank")) rects += row->all("rect", "span").size();
  CHECK(rects == f.spans.size());
}

TEST_CASE("the metrics SVG: one point per CSV row on each curve", "[ch07][trace]") {
  ddp::testing::TempDir dir("ch07_metrics_svg");
  const auto csv = dir.path() / "run.csv";
  std::string text = "epoch,train_loss,test_loss,test_accuracy,images_per_second,train_seconds\n";
  const double accuracy[] = {28.2, 93.15, 96.05, 97.35, 97.9, 98.1, 98.05};
  for (int e = 1; e <= 7; ++e) {
    text += std::to_string(e) + "," + std::to_string(1.5 / e) + "," + std::to_string(2.0 / e) +
            "," + std::to_string(accuracy[e - 1]) + ",500,10\n";
  }
  write_text(csv, text);
  const std::vector<tool::MetricsRow> rows = tool::read_metrics(csv.string());
  REQUIRE(rows.size() == 7);
  const Element svg = parse_svg(tool::draw_metrics(rows, "run.csv"));
  CHECK(svg.at("data-rows") == "7");
  for (const char* column : {"train_loss", "test_loss", "test_accuracy"}) {
    INFO(column);
    const auto series = svg.all("g", "series");
    const auto it = std::find_if(series.begin(), series.end(),
                                 [&](const Element* g) { return g->at("data-column") == column; });
    REQUIRE(it != series.end());
    const auto lines = (*it)->all("polyline", "curve");
    REQUIRE(lines.size() == 1);
    std::istringstream points(lines[0]->at("points"));
    std::vector<std::pair<double, double>> xy;
    for (std::string p; points >> p;) {
      xy.emplace_back(std::stod(p.substr(0, p.find(','))), std::stod(p.substr(p.find(',') + 1)));
    }
    CHECK(xy.size() == rows.size());
    CHECK((*it)->all("circle", "point").size() == rows.size());
    // Later epochs to the right; a larger value higher up (SVG's y grows downwards).
    for (std::size_t i = 1; i < xy.size(); ++i) {
      CHECK(xy[i].first > xy[i - 1].first);
      const double before = std::string(column) == "test_accuracy" ? accuracy[i - 1] : 1.0 / i;
      const double now = std::string(column) == "test_accuracy" ? accuracy[i] : 1.0 / (i + 1);
      CHECK((now > before) == (xy[i].second < xy[i - 1].second));
    }
  }
}

TEST_CASE("ddp-trace-merge --svg and --metrics-svg: bad input names the file", "[ch07][trace]") {
  ddp::testing::TempDir dir("ch07_svg_errors");
  const std::string missing = (dir.path() / "missing.json").string();
  CHECK_THROWS_WITH(tool::merge({missing}), Catch::Contains("cannot open " + missing));
  const auto cut = dir.path() / "cut.json";
  write_text(cut, "{\"traceEvents\":[{\"ph\":\"X\",\"pid\":0,\"ts\":1");
  CHECK_THROWS_WITH(tool::merge({cut.string()}),
                    Catch::Contains(cut.string() + ": not valid JSON at byte"));
  const auto bad_dur = dir.path() / "dur.json";
  write_text(bad_dur, R"({"traceEvents":[{"ph":"X","pid":0,"ts":1,"dur":"long"}]})");
  CHECK_THROWS_WITH(tool::merge({bad_dur.string()}),
                    Catch::Contains(bad_dur.string() + ": an event's dur is not a number"));
  const auto empty = dir.path() / "empty.json";
  write_text(empty, R"({"traceEvents":[{"ph":"M","pid":0,"name":"thread_name"}]})");
  CHECK_THROWS_WITH(tool::draw_timeline(tool::merge({empty.string()}), {}),
                    Catch::Contains("no span to draw"));

  const std::string no_csv = (dir.path() / "missing.csv").string();
  CHECK_THROWS_WITH(tool::read_metrics(no_csv), Catch::Contains("cannot open " + no_csv));
  const std::string header =
      "epoch,train_loss,test_loss,test_accuracy,images_per_second,train_seconds\n";
  const auto csv = dir.path() / "m.csv";
  const auto refused = [&](const std::string& text, const std::string& message) {
    write_text(csv, text);
    CHECK_THROWS_WITH(tool::read_metrics(csv.string()), Catch::Contains(csv.string() + message));
  };
  refused(header + "1,0.5,0.4,abc,500,10\n", ":2: test_accuracy is 'abc', not a number");
  refused(header + "1,0.5,0.4,90,500,10\n2,0.3,0.2\n",
          ":3: expected 6 fields as in the header, found 3");
  refused("epoch,loss\n1,0.5\n", ": the header 'epoch,loss' has no column train_loss");
  refused(header, " has a header but no rows");
  refused("", " is empty");
}
