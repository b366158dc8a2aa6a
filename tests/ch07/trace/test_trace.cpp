// Chapter 07, the trace recorder (base/trace.hpp): the overlap summary on hand-built
// timelines against hand-computed unions, the same against a brute-force count of the
// covered nanoseconds on random timelines, the recorder itself: two threads recording at
// once, spans that nest, the JSON file, nothing recorded when off; and the text timeline
// with the instant rows its caller asks for, and none it does not.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "base/trace.hpp"

namespace trace = ddp::trace;
using trace::Event;
using trace::Phase;

namespace {

constexpr std::int64_t kMs = 1'000'000;  // events count nanoseconds

Event span(const char* category, std::int64_t begin_ms, std::int64_t end_ms) {
  return Event{.phase = Phase::Complete,
               .ts_ns = begin_ms * kMs,
               .dur_ns = (end_ms - begin_ms) * kMs,
               .category = category,
               .name = category};
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("the overlap summary of a hand-built step", "[ch07][trace]") {
  // main:  forward [0,10] (a module [2,5] inside), backward [10,30] with a wait [25,30]
  //        inside it, optimizer [30,35]
  // comm:  collectives [12,20], [15,28] (two at once) and [40,45]
  const std::vector<Event> events = {
      span("forward", 0, 10),
      span("forward", 2, 5),
      span("backward", 10, 30),
      span("wait", 25, 30),
      span("optimizer", 30, 35),
      span("comm", 12, 20),
      span("comm", 15, 28),
      span("comm", 40, 45),
      // An instant lasts no time, whatever its category.
      Event{.phase = Phase::Instant, .ts_ns = 16 * kMs, .category = "comm", .name = "x"}};
  SECTION("the whole step") {
    const trace::Summary s = trace::summarize(events, 0, 50 * kMs);
    CHECK(s.compute_ms == 30.0);        // [0,35] once, minus the wait [25,30]
    CHECK(s.communication_ms == 21.0);  // [12,28] + [40,45]: the union, 16 + 5
    CHECK(s.exposed_ms == 5.0);
    CHECK(s.overlap_percent() == Approx(100.0 * (1.0 - 5.0 / 21.0)));
  }
  SECTION("clipped to [14, 42]") {
    const trace::Summary s = trace::summarize(events, 14 * kMs, 42 * kMs);
    CHECK(s.compute_ms == 16.0);        // [14,35] = 21, minus the wait 5
    CHECK(s.communication_ms == 16.0);  // [14,28] + [40,42]
    CHECK(s.exposed_ms == 5.0);
  }
}

TEST_CASE("the overlap percentage at its edges", "[ch07][trace]") {
  CHECK(trace::Summary{10, 0, 0}.overlap_percent() == 0.0);    // no communication: none hidden
  CHECK(trace::Summary{10, 4, 0}.overlap_percent() == 100.0);  // all hidden
  CHECK(trace::Summary{10, 4, 4}.overlap_percent() == 0.0);    // all exposed
  CHECK(trace::Summary{10, 4, 9}.overlap_percent() == 0.0);    // waited longer than it ran
  CHECK(trace::Summary{10, 4, 1}.overlap_percent() == 75.0);
}

TEST_CASE("the summary equals a count of covered nanoseconds on random timelines",
          "[ch07][trace]") {
  // The reference marks every nanosecond of [0, 400) that each kind of interval covers:
  // no sorting, no merging, nothing shared with summarize() but the definitions.
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<Event> events;
    std::vector<char> compute(400, 0), comm(400, 0), wait(400, 0);
    const char* kinds[] = {"forward", "backward", "optimizer", "comm", "wait", "evaluation"};
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    auto cover = [](std::vector<char>& v, std::int64_t b, std::int64_t e) {
      for (std::int64_t t = std::max<std::int64_t>(b, 0); t < std::min<std::int64_t>(e, 400); ++t) {
        v[static_cast<std::size_t>(t)] = 1;
      }
    };
    const std::int64_t from = pick(100), to = 300 + pick(100);
    for (int i = 0; i < 12; ++i) {
      const std::int64_t b = pick(400), e = b + pick(80);
      const char* kind = kinds[pick(6)];
      events.push_back(Event{
          .phase = Phase::Complete, .ts_ns = b, .dur_ns = e - b, .category = kind, .name = kind});
      if (std::string(kind) == "comm") cover(comm, std::max(b, from), std::min(e, to));
      if (std::string(kind) == "wait") cover(wait, std::max(b, from), std::min(e, to));
      if (std::string(kind) == "forward" || std::string(kind) == "backward" ||
          std::string(kind) == "optimizer") {
        cover(compute, std::max(b, from), std::min(e, to));
      }
    }
    std::int64_t want_compute = 0, want_comm = 0, want_wait = 0;
    for (std::size_t t = 0; t < 400; ++t) {
      want_compute += compute[t] && !wait[t];
      want_comm += comm[t];
      want_wait += wait[t];
    }
    const trace::Summary s = trace::summarize(events, from, to);
    INFO("round " << round);
    REQUIRE(s.compute_ms * 1e6 == Approx(static_cast<double>(want_compute)).margin(1e-6));
    REQUIRE(s.communication_ms * 1e6 == Approx(static_cast<double>(want_comm)).margin(1e-6));
    REQUIRE(s.exposed_ms * 1e6 == Approx(static_cast<double>(want_wait)).margin(1e-6));
  }
}

TEST_CASE("the recorder: two threads at once, nesting, the file", "[ch07][trace]") {
  trace::stop();
  { trace::Span off("forward", "not recorded"); }
  trace::instant("backward", "not recorded either");
  trace::start(3);
  REQUIRE(trace::enabled());
  CHECK(trace::events().empty());  // off: nothing was kept

  std::thread comm([] {
    trace::set_thread_name("tcp communication");
    for (int i = 0; i < 1000; ++i) trace::Span s("comm", "all_reduce");
  });
  {
    trace::Span outer("backward", "backward");
    for (int i = 0; i < 1000; ++i) {
      trace::Span inner("backward", "block \"1\"");  // a quote, escaped in the file
    }
    trace::instant("backward", "block 0: gradient in");
  }
  comm.join();
  trace::stop();

  const std::vector<Event> all = trace::events();
  REQUIRE(all.size() == 1000 + 1 + 1000 + 1);
  CHECK(std::is_sorted(all.begin(), all.end(),
                       [](const Event& a, const Event& b) { return a.ts_ns < b.ts_ns; }));
  // Every inner span lies within the outer one, on the same thread.
  const auto outer =
      std::find_if(all.begin(), all.end(), [](const Event& e) { return e.name == "backward"; });
  REQUIRE(outer != all.end());
  std::uint32_t comm_tid = 0;
  for (const Event& e : all) {
    if (e.name == "block \"1\"") {
      CHECK(e.tid == outer->tid);
      CHECK(e.ts_ns >= outer->ts_ns);
      CHECK(e.ts_ns + e.dur_ns <= outer->ts_ns + outer->dur_ns);
    }
    if (e.name == "all_reduce") comm_tid = e.tid;
  }
  CHECK(comm_tid != 0);
  CHECK(comm_tid != outer->tid);

  const std::string path =
      (std::filesystem::temp_directory_path() / "ddp_ch07_trace_test.json").string();
  trace::write(path);
  const std::string text = read_text(path);
  std::filesystem::remove(path);
  CHECK(text.starts_with("{\"traceEvents\":[\n"));
  CHECK_THAT(text, Catch::Contains(R"("name":"process_name","args":{"name":"rank 3"})"));
  CHECK_THAT(text, Catch::Contains(R"("args":{"name":"tcp communication"})"));
  CHECK_THAT(text, Catch::Contains(R"("args":{"name":"main"})"));
  CHECK_THAT(text, Catch::Contains(R"("cat":"backward","name":"block \"1\""})"));
  CHECK_THAT(text, Catch::Contains(R"("s":"t","cat":"backward","name":"block 0: gradient in"})"));
  CHECK_THAT(text, Catch::Contains(R"("otherData":{"rank":3,"start_unix_us":)"));
  // One event per line: metadata (process + 2 threads) and the events.
  CHECK(std::count(text.begin(), text.end(), '\n') == 3 + 3 + static_cast<long>(all.size()) + 1);

  CHECK_THROWS_WITH(trace::write("/nonexistent-folder/x.json"),
                    Catch::Contains("/nonexistent-folder/x.json"));
}

TEST_CASE("a span begun before start() is not recorded after it", "[ch07][trace]") {
  trace::start(0);
  {
    trace::Span old("forward", "from the previous recording");
    trace::start(0);  // starts afresh: times count from here
  }
  trace::stop();
  CHECK(trace::events().empty());
}

TEST_CASE("summarize_since measures what was recorded since the mark", "[ch07][trace]") {
  trace::start(0);
  { trace::Span before("forward", "before the mark"); }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const trace::Mark mark = trace::mark();
  {
    trace::Span compute("backward", "backward");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    trace::Span wait("wait", "Work::wait");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const trace::Summary s = trace::summarize_since(mark);
  trace::stop();
  // Sleeps last at least as long as asked; the 5 ms before the mark must not count.
  CHECK(s.compute_ms >= 20.0);
  CHECK(s.exposed_ms >= 10.0);
  CHECK(s.compute_ms < 20.0 + 1000.0);  // bounded, not the whole recording
  CHECK(s.communication_ms == 0.0);
}

TEST_CASE("the text timeline draws each column's main occupant", "[ch07][trace]") {
  // A main thread (tid 900): forward 0-4 ms, backward 4-16 with a wait 14-16 inside it,
  // optimizer 16-20. Thread 901: an all-reduce 10-18. 20 columns of 1 ms each. (Rows are
  // named after this process's threads; 900 and 901 are none of them.)
  std::vector<Event> events{span("forward", 0, 4), span("backward", 4, 16), span("wait", 14, 16),
                            span("optimizer", 16, 20), span("comm", 10, 18)};
  for (Event& e : events) e.tid = 900;
  events[4].tid = 901;
  const std::string text = trace::render_text(events, 0, 20 * kMs, {}, 20);
  CHECK(text ==
        "thread 900          FFFFBBBBBBBBBBwwOOOO\n"
        "thread 901          ..........========..\n");
  CHECK_THROWS_WITH(trace::render_text(events, 5, 5), Catch::Contains("empty interval"));
}

TEST_CASE("the text timeline draws the instant rows its caller asks for, and no others",
          "[ch07][trace]") {
  // The timeline above, with instants: of a caller's category "step" on the main thread
  // at 2, 7, 10, 19 and 20 ms (the last one past the interval), and on a thread with no
  // span (902); one of the category "other" at 5 ms.
  std::vector<Event> events{span("forward", 0, 4), span("backward", 4, 16), span("wait", 14, 16),
                            span("optimizer", 16, 20), span("comm", 10, 18)};
  for (Event& e : events) e.tid = 900;
  events[4].tid = 901;
  auto instant = [&](std::int64_t at_ms, std::uint32_t tid, const char* category,
                     const char* name) {
    events.push_back(Event{.phase = Phase::Instant,
                           .ts_ns = at_ms * kMs + 1,
                           .tid = tid,
                           .category = category,
                           .name = name});
  };
  instant(2, 900, "step", "a");
  instant(5, 900, "other", "x");
  instant(7, 900, "step", "skip");  // its mark is 0: nothing drawn
  instant(10, 900, "step", "b");
  instant(19, 900, "step", "c");
  instant(20, 900, "step", "d");
  instant(3, 902, "step", "e");
  auto first_letter = [](std::string_view name) { return name == "skip" ? char{0} : name[0]; };
  const trace::InstantRow steps{.category = "step", .title = "steps", .mark = first_letter};
  const trace::InstantRow other{.category = "other",
                                .title = "a title longer than sixteen",
                                .mark = [](std::string_view) { return '*'; }};
  const std::string main = "thread 900          FFFFBBBBBBBBBBwwOOOO\n";
  const std::string comm = "thread 901          ..........========..\n";

  SECTION("none asked for: none drawn") {
    CHECK(trace::render_text(events, 0, 20 * kMs, {}, 20) == main + comm);
  }
  SECTION("one: under the thread that recorded them, each at its column") {
    CHECK(trace::render_text(events, 0, 20 * kMs, {steps}, 20) ==
          main + "  steps               a       b        c\n" + comm);
  }
  SECTION("two: in the order given, a title cut to 16 characters") {
    CHECK(trace::render_text(events, 0, 20 * kMs, {other, steps}, 20) ==
          main + "  a title longer t       *              \n" +
              "  steps               a       b        c\n" + comm);
  }
  SECTION("none of its instants in the interval: no row") {
    CHECK(trace::render_text(events, 11 * kMs, 19 * kMs, {steps}, 8) ==
          "thread 900          BBBwwOOO\n"
          "thread 901          =======.\n");
  }
  const trace::InstantRow unmarked{.category = "step", .title = "t", .mark = nullptr};
  CHECK_THROWS_WITH(trace::render_text(events, 0, 20 * kMs, {unmarked}),
                    Catch::Contains("the instant row \"t\" has no mark function"));
}
