// Test helper for ddp-train's command line (chapters 04 and 06): parse_options over an
// argument list, and the first line of the error it throws.
#pragma once

#include <string>
#include <vector>

#include "base/error.hpp"
#include "tools/ddp_train/options.hpp"

namespace ddp::test {

// parse_options over {"ddp-train", args...}, as main() would see them.
inline train::TrainOptions parse(const std::vector<std::string>& args) {
  std::vector<const char*> argv{"ddp-train"};
  for (const auto& a : args) argv.push_back(a.c_str());
  return train::parse_options(static_cast<int>(argv.size()), argv.data());
}

// The first line of the ddp::Error that parsing `args` throws ("" when none is thrown):
// the line main() prints as "ddp-train: <line>" (the rest is the file:line of the check).
inline std::string error_of(const std::vector<std::string>& args) {
  try {
    parse(args);
  } catch (const Error& e) {
    const std::string message = e.what();
    return message.substr(0, message.find('\n'));
  }
  return "";
}

}  // namespace ddp::test
