// Integer flags shared by the benchmark programs: `--reps 10`, `--sizes 1024,2048`.
// Each benchmark parses its own flag names; only the number parsing lives here.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

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

}  // namespace ddp::bench
