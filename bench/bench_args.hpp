// Number flags shared by the benchmark programs: `--reps 10`, `--sizes 1024,2048`,
// `--caps 0.25,1,25`. Each benchmark parses its own flag names; only the number parsing
// lives here.
#pragma once

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "tools/flags.hpp"

namespace ddp::bench {

inline constexpr int kMaxFlagValue = 1 << 20;  // bound on every integer flag

// "--reps", "10" -> 10; throws ddp::Error naming the flag unless min <= value <= bound.
inline int parse_int(std::string_view flag, const std::string& text, int min) {
  return parse_int_flag(flag, text, min, kMaxFlagValue);
}

// "64,128" -> {64, 128}, each value >= 1.
inline std::vector<int> parse_int_list(std::string_view flag, const std::string& text) {
  std::vector<int> values;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    values.push_back(parse_int(flag, text.substr(start, comma - start), 1));
    start = comma + 1;
  }
  return values;
}

// "--backward-ms", "62.5" -> 62.5: a plain decimal (digits, at most one '.'), > 0, or
// >= 0 with allow_zero.
inline double parse_decimal(std::string_view flag, std::string_view text, bool allow_zero = false) {
  double value = -1;
  const char* end = text.data() + text.size();
  const bool digit_first = !text.empty() && text.front() >= '0' && text.front() <= '9';
  const auto [ptr, ec] = std::from_chars(text.data(), end, value, std::chars_format::fixed);
  DDP_CHECK(
      digit_first && ec == std::errc() && ptr == end && (value > 0 || (allow_zero && value == 0)),
      flag, " expects a number ", allow_zero ? ">= 0" : "> 0", ", got '", text, "'");
  return value;
}

// "0.25,1,5" -> {0.25, 1, 5}, each > 0.
inline std::vector<double> parse_decimal_list(std::string_view flag, std::string_view text) {
  std::vector<double> values;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    values.push_back(parse_decimal(flag, text.substr(start, comma - start)));
    start = comma + 1;
  }
  return values;
}

}  // namespace ddp::bench
