// ddp::Error, the one exception type of ddp.cpp, and the check macros that throw it.
// Introduced in chapter 00 ("reading a failure").
//
// A message says what failed (the condition or call, as written), where (file:line),
// and, when a fix is known, what to do (a line starting "hint:"). This layer knows no rank or
// host: dist/ names them in its own messages (ProcessGroup::who()), main() in what it reports.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ddp {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

// Streams every argument into one string: concat("got ", 3, " dims") == "got 3 dims".
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// Formats "<message>\n  at <file>:<line> (check `<condition>` failed)" and throws
// ddp::Error. A plain function, so the macros below stay one line each.
[[noreturn]] void throw_error(const char* file, int line, const char* condition,
                              const std::string& message);

}  // namespace detail
}  // namespace ddp

// DDP_CHECK(cond, parts...): throws ddp::Error built from `parts` when `cond` is false.
// The parts are only evaluated on failure.
#define DDP_CHECK(cond, ...)                                                        \
  do {                                                                              \
    if (!(cond)) [[unlikely]] {                                                     \
      ::ddp::detail::throw_error(__FILE__, __LINE__, #cond,                         \
                                 ::ddp::detail::concat(__VA_ARGS__));               \
    }                                                                               \
  } while (0)

// DDP_FAIL(parts...): throws unconditionally (for the `default:` of a switch, say).
#define DDP_FAIL(...) \
  ::ddp::detail::throw_error(__FILE__, __LINE__, nullptr, ::ddp::detail::concat(__VA_ARGS__))
