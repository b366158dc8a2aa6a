// Integer command-line flags for the programs in tools/ and the tutorial's launchers
// (ddprun, ddp-doctor, ch00_hello): `--timeout 30` is read strictly, so that "30s" or
// "abc" is an error naming the flag instead of a silent 0.
#pragma once

#include <charconv>
#include <string_view>

#include "base/error.hpp"

namespace ddp {

// "--timeout", "30" -> 30; throws ddp::Error naming the flag unless min <= value <= max.
inline int parse_int_flag(std::string_view flag, std::string_view text, int min, int max) {
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  DDP_CHECK(ec == std::errc() && ptr == end && value >= min && value <= max, flag,
            " expects an integer from ", min, " to ", max, ", got '", text, "'");
  return value;
}

}  // namespace ddp
