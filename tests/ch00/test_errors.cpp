// Chapter 00, "reading a failure": what a ddp::Error thrown by DDP_CHECK / DDP_FAIL
// says (the message, "at <file>:<line>", the failed condition), and that the message
// parts cost nothing unless the check fails.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "base/error.hpp"

using Catch::Contains;
using Catch::EndsWith;
using Catch::StartsWith;

namespace {

// Counts how often it is called: proves when the macro evaluates its arguments.
int g_calls = 0;
int counted(int value) {
  ++g_calls;
  return value;
}

// Runs f and returns the message of the ddp::Error it throws ("" when none).
template <typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const ddp::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("DDP_CHECK throws a ddp::Error that says what, where and which condition",
          "[ch00][errors]") {
  int line = 0;
  const std::string message = message_of([&] {
    const int dims = 3;
    line = __LINE__ + 1;
    DDP_CHECK(dims == 2, "expected 2 dims, got ", dims, " (", 1.5, ")");
  });
  // The exact layout from error.hpp: "<message>\n  at <file>:<line> (check `<cond>` failed)".
  const std::string expected = std::string("expected 2 dims, got 3 (1.5)\n  at ") + __FILE__ + ":" +
                               std::to_string(line) + " (check `dims == 2` failed)";
  CHECK(message == expected);
  CHECK_THAT(message, StartsWith("expected 2 dims, got 3"));
  CHECK_THAT(message, Contains("test_errors.cpp:" + std::to_string(line)));
  CHECK_THAT(message, EndsWith("(check `dims == 2` failed)"));
}

TEST_CASE("DDP_CHECK does nothing when its condition holds", "[ch00][errors]") {
  CHECK_NOTHROW([] { DDP_CHECK(1 + 1 == 2, "never shown"); }());
  CHECK(message_of([] { DDP_CHECK(true, "never shown"); }).empty());
}

TEST_CASE("ddp::Error is a std::runtime_error, so generic handlers catch it", "[ch00][errors]") {
  const auto check_false = [] { DDP_CHECK(false, "boom"); };
  CHECK_THROWS_AS(check_false(), ddp::Error);
  CHECK_THROWS_AS(check_false(), std::runtime_error);
  try {
    check_false();
    FAIL("DDP_CHECK(false) did not throw");
  } catch (const std::exception& e) {
    CHECK_THAT(std::string(e.what()), StartsWith("boom\n  at "));
  }
}

TEST_CASE("DDP_FAIL throws unconditionally and names no condition", "[ch00][errors]") {
  int line = 0;
  const std::string message = message_of([&] {
    line = __LINE__ + 1;
    DDP_FAIL("unknown op ", 7);
  });
  const std::string expected =
      std::string("unknown op 7\n  at ") + __FILE__ + ":" + std::to_string(line);
  CHECK(message == expected);
  CHECK_THAT(message, !Contains("check `"));
}

TEST_CASE("the message parts are evaluated only when the check fails, and only once",
          "[ch00][errors]") {
  g_calls = 0;
  DDP_CHECK(counted(1) == 1, "value ", counted(2));
  CHECK(g_calls == 1);  // the condition ran once; the part did not run

  g_calls = 0;
  const std::string message =
      message_of([] { DDP_CHECK(counted(1) == 2, "value ", counted(5), " and ", counted(6)); });
  CHECK(g_calls == 3);  // the condition once, each part once
  CHECK_THAT(message, StartsWith("value 5 and 6\n"));
  CHECK_THAT(message, Contains("(check `counted(1) == 2` failed)"));
}

TEST_CASE("DDP_CHECK is one statement, safe in an unbraced if/else", "[ch00][errors]") {
  int taken = 0;
  const bool flag = false;
  if (flag)
    DDP_CHECK(false, "not reached");
  else
    taken = 1;
  CHECK(taken == 1);
}

TEST_CASE("detail::concat streams every argument into one string", "[ch00][errors]") {
  CHECK(ddp::detail::concat("got ", 3, " dims") == "got 3 dims");
  CHECK(ddp::detail::concat(std::string("a"), 'b', 2.5, -4L) == "ab2.5-4");
}
