// Chapter 08, a checkpoint survives a kill during its save. A child process saves a
// 6 MiB state dict over the previous one and is killed (SIGKILL, from the SaveObserver of
// nn/state_dict.hpp, Note [Testing a crash mid-save]) after each piece it writes, after
// the fsync before the rename, and after the rename: the target is the previous file bit
// for bit until the rename, the new one after it, and loads either way. Truncated and
// foreign files are refused with a message naming the file and what is wrong.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nn/state_dict.hpp"
#include "tensor/ops.hpp"
#include "tests/support/temp_dir.hpp"

using Catch::Contains;
namespace fs = std::filesystem;
namespace nn = ddp::nn;

namespace {

using ddp::testing::read_bytes;
using ddp::testing::write_bytes;

// This file's folders: ddp_ch08_crash_<pid>_<n>.
struct TempDir : ddp::testing::TempDir {
  TempDir() : ddp::testing::TempDir("ch08_crash") {}
};

// Generation g of a checkpoint: 1.5 Mi float32 weights (6 MiB, 7 pieces of kSaveChunkBytes)
// and a step counter, every value depending on g, so that two generations differ in
// every entry.
nn::StateDict generation(int g) {
  std::vector<float> weight(1536 * 1024);
  for (std::size_t i = 0; i < weight.size(); ++i) {
    weight[i] = static_cast<float>(g) + static_cast<float>(i % 1000) * 1e-3f;
  }
  const std::int64_t step = 1000 * g;
  nn::StateDict state;
  state.emplace_back("model.weight", ddp::from_data(std::span<const float>(weight),
                                                    {static_cast<std::int64_t>(weight.size())}));
  state.emplace_back("progress.global_step",
                     ddp::from_data(std::span<const std::int64_t>(&step, 1), {}));
  return state;
}

// Runs save_state_dict(state, path) in a child process that SIGKILLs itself the
// `kill_at`-th time the observer is called with `point` (1 = the first). Returns the
// child's wait status.
int save_in_child_and_kill(const nn::StateDict& state, const fs::path& path, nn::SavePoint point,
                           int kill_at) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // the child: save, and die where told (never returns to Catch)
    int seen = 0;
    try {
      nn::save_state_dict(state, path, [&](nn::SavePoint p, std::size_t) {
        if (p == point && ++seen == kill_at) ::raise(SIGKILL);
      });
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);  // the kill point was never reached
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}

// The temporary files that killed children left beside `target`.
std::vector<fs::path> leftovers(const fs::path& folder) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(folder)) {
    if (entry.path().filename().string().find(".tmp.") != std::string::npos) {
      out.push_back(entry.path());
    }
  }
  return out;
}

}  // namespace

TEST_CASE("a kill during the write or before the rename leaves the previous checkpoint") {
  TempDir dir;
  const fs::path target = dir.path() / "run.ckpt";
  nn::save_state_dict(generation(1), target);
  const std::string previous = read_bytes(target);
  const nn::StateDict next = generation(2);
  const std::size_t pieces = (previous.size() + nn::kSaveChunkBytes - 1) / nn::kSaveChunkBytes;
  REQUIRE(pieces == 7);

  // After every piece (the last: all bytes written, not yet fsync'ed), then after the fsync.
  struct Kill {
    nn::SavePoint point;
    int at;
  };
  std::vector<Kill> kills;
  for (int k = 1; k <= static_cast<int>(pieces); ++k) kills.push_back({nn::SavePoint::Written, k});
  kills.push_back({nn::SavePoint::BeforeRename, 1});
  for (const Kill& kill : kills) {
    CAPTURE(static_cast<int>(kill.point), kill.at);
    const int status = save_in_child_and_kill(next, target, kill.point, kill.at);
    REQUIRE(WIFSIGNALED(status));
    REQUIRE(WTERMSIG(status) == SIGKILL);
    CHECK(read_bytes(target) == previous);  // bit for bit
    const nn::StateDict loaded = nn::read_state_dict(target);
    CHECK(loaded[1].second.item<std::int64_t>() == 1000);
    // The killed child's temporary file is left behind, as documented, with the bytes it
    // had written; it never becomes the target.
    const std::vector<fs::path> left = leftovers(dir.path());
    REQUIRE(left.size() == 1);
    const std::size_t expected = kill.point == nn::SavePoint::Written
                                     ? std::min(previous.size(), kill.at * nn::kSaveChunkBytes)
                                     : previous.size();
    CHECK(fs::file_size(left[0]) == expected);
    fs::remove(left[0]);
  }
}

TEST_CASE("a kill after the rename leaves the new checkpoint, whole") {
  TempDir dir;
  const fs::path target = dir.path() / "run.ckpt";
  nn::save_state_dict(generation(1), target);
  nn::save_state_dict(generation(2), dir.path() / "expected.ckpt");
  const int status = save_in_child_and_kill(generation(2), target, nn::SavePoint::Renamed, 1);
  REQUIRE(WIFSIGNALED(status));
  CHECK(read_bytes(target) == read_bytes(dir.path() / "expected.ckpt"));
  CHECK(nn::read_state_dict(target)[1].second.item<std::int64_t>() == 2000);
  CHECK(leftovers(dir.path()).empty());  // the rename consumed the temporary file
}

TEST_CASE("the observer sees every piece, and a save without a kill completes") {
  TempDir dir;
  const fs::path target = dir.path() / "run.ckpt";
  std::vector<std::size_t> written;
  int before_rename = 0, renamed = 0;
  nn::save_state_dict(generation(3), target, [&](nn::SavePoint p, std::size_t bytes) {
    if (p == nn::SavePoint::Written) written.push_back(bytes);
    before_rename += p == nn::SavePoint::BeforeRename;
    renamed += p == nn::SavePoint::Renamed;
  });
  const std::size_t size = fs::file_size(target);
  REQUIRE(written.size() == 7);
  for (std::size_t i = 0; i + 1 < written.size(); ++i) {
    CHECK(written[i] == (i + 1) * nn::kSaveChunkBytes);
  }
  CHECK(written.back() == size);
  CHECK(before_rename == 1);
  CHECK(renamed == 1);
}

TEST_CASE("truncated and foreign files are refused, naming the file and the fault") {
  TempDir dir;
  const fs::path good = dir.path() / "good.ckpt";
  nn::save_state_dict(generation(1), good);
  const std::string bytes = read_bytes(good);
  const fs::path bad = dir.path() / "bad.ckpt";
  // What a kill in the middle of a non-atomic write would leave: every length is refused.
  for (std::size_t length : {std::size_t{0}, std::size_t{5}, std::size_t{8}, std::size_t{20},
                             std::size_t{40}, bytes.size() / 2, bytes.size() - 1}) {
    CAPTURE(length);
    write_bytes(bad, bytes.substr(0, length));
    REQUIRE_THROWS_WITH(nn::read_state_dict(bad),
                        Contains(bad.string()) && Contains("the file is truncated"));
  }
  write_bytes(bad, "#!/bin/sh\necho this is not a checkpoint\n");
  REQUIRE_THROWS_WITH(nn::read_state_dict(bad),
                      Contains(bad.string()) && Contains("not a DDPSTATE file"));
  write_bytes(bad, bytes + "x");  // a good file with something appended
  REQUIRE_THROWS_WITH(nn::read_state_dict(bad), Contains("1 unexpected bytes at the end"));
}
