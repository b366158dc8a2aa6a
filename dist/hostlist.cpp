// expand_hostlist (see launch_env.hpp): SLURM's compact host lists, written out in full.
// Chapter 05. Only the expansion; which variable holds the list is launch_env.cpp's job.
//
// The grammar, small enough to parse by hand (one function per rule):
//   hostlist := host (',' host)*                 commas outside brackets separate hosts
//   host     := piece+                           "rack[1-2]-gpu[01-04]" has four pieces
//   piece    := name | '[' range (',' range)* ']'
//   range    := number ('-' number)?             "01-03" keeps the lower bound's width
// A host with several bracket groups stands for every combination, the leftmost group
// varying slowest: "r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dist/launch_env.hpp"
#include "base/error.hpp"

namespace ddp {
namespace {

// A typo such as "node[1-1000000000]" must fail, not fill the memory.
constexpr std::size_t kMaxHosts = std::size_t{1} << 20;
constexpr std::size_t kMaxDigits = 9;  // below 10^9: fits an int64 range count with room

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '.' || c == '_';
}

class HostlistParser {
 public:
  explicit HostlistParser(const std::string& expression) : text_(expression) {}

  // hostlist := host (',' host)*
  std::vector<std::string> hostlist() {
    std::vector<std::string> hosts;
    while (true) {
      std::vector<std::string> more = host();
      DDP_CHECK(hosts.size() + more.size() <= kMaxHosts,
                error("the list names more than ", kMaxHosts, " hosts"));
      hosts.insert(hosts.end(), more.begin(), more.end());
      if (at_end()) return hosts;
      DDP_CHECK(peek() == ',', error("unexpected '", peek(), "'"));
      ++pos_;
    }
  }

 private:
  // host := piece+. Grows the list of partial names piece by piece: a name appends to
  // each, a bracket group multiplies them.
  std::vector<std::string> host() {
    std::vector<std::string> names = {""};
    bool empty = true;
    while (!at_end() && peek() != ',') {
      if (peek() == '[') {
        const std::vector<std::string> numbers = bracket();
        DDP_CHECK(names.size() * numbers.size() <= kMaxHosts,
                  error("the list names more than ", kMaxHosts, " hosts"));
        std::vector<std::string> product;
        product.reserve(names.size() * numbers.size());
        for (const std::string& prefix : names) {
          for (const std::string& n : numbers) product.push_back(prefix + n);
        }
        names = std::move(product);
      } else {
        const std::string part = name();
        for (std::string& n : names) n += part;
      }
      empty = false;
    }
    DDP_CHECK(!empty, error("empty host name"));
    return names;
  }

  // name := one or more of [A-Za-z0-9._-]
  std::string name() {
    const std::size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    DDP_CHECK(pos_ > start, error(peek() == ']' ? "']' without a '['"
                                                : "unexpected '" + std::string(1, peek()) + "'"));
    return text_.substr(start, pos_ - start);
  }

  // '[' range (',' range)* ']' -> the numbers, as text
  std::vector<std::string> bracket() {
    ++pos_;  // '['
    std::vector<std::string> numbers;
    while (true) {
      range(numbers);
      DDP_CHECK(!at_end(), error("missing ']'"));
      if (peek() == ']') break;
      DDP_CHECK(peek() == ',', error("expected ',' or ']' in brackets, found '", peek(), "'"));
      ++pos_;
    }
    ++pos_;  // ']'
    return numbers;
  }

  // range := number ('-' number)?; appends lo..hi, each padded to the width of `lo`
  void range(std::vector<std::string>& out) {
    const std::size_t start = pos_;
    const std::string lo = number();
    std::string hi = lo;
    if (!at_end() && peek() == '-') {
      ++pos_;
      hi = number();
    }
    const std::int64_t a = std::stoll(lo);
    const std::int64_t b = std::stoll(hi);
    if (b < a) {
      pos_ = start;
      DDP_FAIL(error("range ", lo, "-", hi, " runs backwards"));
    }
    DDP_CHECK(out.size() + static_cast<std::size_t>(b - a + 1) <= kMaxHosts,
              error("the range ", lo, "-", hi, " names more than ", kMaxHosts, " hosts"));
    for (std::int64_t v = a; v <= b; ++v) {
      std::string digits = std::to_string(v);
      if (digits.size() < lo.size()) digits.insert(0, lo.size() - digits.size(), '0');
      out.push_back(std::move(digits));
    }
  }

  // number := digit+ (at most kMaxDigits)
  std::string number() {
    const std::size_t start = pos_;
    while (!at_end() && std::isdigit(static_cast<unsigned char>(peek())) != 0) ++pos_;
    DDP_CHECK(pos_ > start,
              error(at_end() ? "expected a number, found the end"
                             : "expected a number, found '" + std::string(1, peek()) + "'"));
    DDP_CHECK(pos_ - start <= kMaxDigits, error("number with more than ", kMaxDigits, " digits"));
    return text_.substr(start, pos_ - start);
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  // The message for a syntax error at pos_, with a caret under the spot:
  //   expand_hostlist: bad hostlist "node[1-" at position 7: expected a number, found the end
  //     node[1-
  //            ^
  template <typename... Args>
  std::string error(const Args&... what) const {
    return detail::concat("expand_hostlist: bad hostlist \"", text_, "\" at position ", pos_, ": ",
                          what..., "\n    ", text_, "\n    ", std::string(pos_, ' '),
                          "^\n  hint: SLURM writes host lists like node[01-04,07],login1");
  }

  const std::string& text_;
  std::size_t pos_ = 0;
};

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& expression) {
  return HostlistParser(expression).hostlist();
}

}  // namespace ddp
