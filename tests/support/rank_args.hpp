// The command line of the DDP test programs that run as ranks (ch06_equivalence,
// ch07_reducer, ch07_comm_hook): `--backend B --device D --scenario S --plant P`, each
// optional. Header-only.
#pragma once

#include <string>

#include "tensor/device.hpp"
#include "base/error.hpp"

namespace ddp::test {

struct RankArgs {
  std::string backend = "tcp";
  Device device = Device::cpu();
  std::string scenario = "all";
  std::string plant = "none";  // a known bug to make, so that a test can watch it fail
};

// Throws ddp::Error naming `program` for an unknown flag or one without its value.
inline RankArgs parse_rank_args(int argc, char** argv, const char* program) {
  RankArgs a;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    DDP_CHECK(i + 1 < argc, program, ": ", flag, " needs a value");
    const std::string value = argv[i + 1];
    if (flag == "--backend") {
      a.backend = value;
    } else if (flag == "--device") {
      a.device = Device::parse(value);
    } else if (flag == "--scenario") {
      a.scenario = value;
    } else if (flag == "--plant") {
      a.plant = value;
    } else {
      DDP_FAIL(program, ": unknown flag ", flag,
               " (--backend B, --device D, --scenario S, --plant P)");
    }
  }
  return a;
}

}  // namespace ddp::test
