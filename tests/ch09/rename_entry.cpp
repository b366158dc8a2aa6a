// ch09_rename_entry: renames one entry of a DDPSTATE file, for chapter 09's tests of what
// reading a sharded checkpoint refuses (tests/ch09/train.sh, scenario sharded-faults).
//
//   ch09_rename_entry FILE OLD NEW [MANIFEST RANK]
//
// FILE is rewritten (nn::save_state_dict) with entry OLD named NEW, everything else as it
// was. With MANIFEST and RANK, the manifest's "shards.file.<RANK>" is set to the rewritten
// file's bytes and CRC-32, so that the name is all that is wrong with the checkpoint.
// Exits 0 when done, 2 on bad arguments or a file it cannot read or write.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "nn/state_dict.hpp"

namespace {

// The entry `name` of `state`; throws ddp::Error naming `file` when it has none.
ddp::Tensor& entry(ddp::nn::StateDict& state, const std::string& name, const char* file) {
  const auto it =
      std::find_if(state.begin(), state.end(), [&](const auto& e) { return e.first == name; });
  DDP_CHECK(it != state.end(), file, " has no entry '", name, "'");
  return it->second;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 6) {
    std::fprintf(stderr, "usage: ch09_rename_entry FILE OLD NEW [MANIFEST RANK]\n");
    return 2;
  }
  try {
    ddp::nn::StateDict state = ddp::nn::read_state_dict(argv[1]);
    const ddp::Tensor tensor = entry(state, argv[2], argv[1]);
    for (auto& [name, t] : state) {
      if (name == argv[2]) name = argv[3];
    }
    const ddp::nn::FileSummary written = ddp::nn::save_state_dict(state, argv[1]);
    if (argc == 6) {
      ddp::nn::StateDict manifest = ddp::nn::read_state_dict(argv[4]);
      const std::vector<std::int64_t> summary = {static_cast<std::int64_t>(written.bytes),
                                                 written.crc32};
      entry(manifest, std::string("shards.file.") + argv[5], argv[4]) =
          ddp::from_data(std::span<const std::int64_t>(summary), {2});
      ddp::nn::save_state_dict(manifest, argv[4]);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ch09_rename_entry: %s\n", e.what());
    return 2;
  }
}
