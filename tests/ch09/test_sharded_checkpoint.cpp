// Chapter 09: a sharded checkpoint's files, written by the library's own functions in one
// process (each "rank" a turn of a loop), read back; refused with a ddp::Error naming the
// file when an entry's name or the manifest's parameter entries are malformed; and
// remove_stale_shard_files, which after a save removes what its manifest does not name,
// killed writers' temporary files included. ddp-train's runs: tests/ch09/train.sh.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "dist/parallel/sharded_checkpoint.hpp"
#include "tests/support/temp_dir.hpp"

using Catch::Contains;
using ddp::Tensor;
namespace fs = std::filesystem;
namespace nn = ddp::nn;

namespace {

Tensor int64s(const std::vector<std::int64_t>& v) {
  return ddp::from_data(std::span<const std::int64_t>(v), {static_cast<std::int64_t>(v.size())});
}
Tensor floats(const std::vector<float>& v, const ddp::Shape& shape) {
  return ddp::from_data(std::span<const float>(v), shape);
}

using Edit = std::function<void(nn::StateDict&)>;
void rename_entry(nn::StateDict& state, const std::string& from, const std::string& to) {
  const auto it =
      std::find_if(state.begin(), state.end(), [&](const auto& e) { return e.first == from; });
  REQUIRE(it != state.end());
  it->first = to;
}
void set_entry(nn::StateDict& state, const std::string& name, const std::vector<std::int64_t>& v) {
  const auto it =
      std::find_if(state.begin(), state.end(), [&](const auto& e) { return e.first == name; });
  REQUIRE(it != state.end());
  it->second = int64s(v);
}

// Generation 1 of `manifest`, saved by 2 ranks: parameters "a" (3) and "b" (2, 2) in one
// flat buffer of 7 elements, 0..6 (rank 0 holds 0..3, rank 1 4..6 and a padding element);
// AdamW's exp_avg (ten times the parameter) and a step count. `edit_shard(state, r)` and
// `edit_manifest` may change the entries before they are written; the manifest records
// the files as written, so that an edited name is all that is wrong.
void write_checkpoint(const fs::path& manifest,
                      const std::function<void(nn::StateDict&, int)>& edit_shard = {},
                      const Edit& edit_manifest = {}) {
  const ddp::SavedFlat flat{.layout = ddp::make_shard_layout(7, 2),
                            .places = {.index = {0, 1}, .offset = {0, 3}, .shape = {{3}, {2, 2}}},
                            .names = {"a", "b"}};
  std::vector<nn::FileSummary> files;
  for (int r = 0; r < 2; ++r) {
    std::vector<float> slice(4), state(4);
    for (int i = 0; i < 4; ++i) {
      slice[i] = static_cast<float>(4 * r + i);
      state[i] = 10.0f * slice[i];
    }
    const nn::StateDict local = {{"exp_avg.0", floats(state, {4})}, {"step.0", int64s({2})}};
    nn::StateDict entries = ddp::shard_file_entries(r, 2, 1, {flat}, {floats(slice, {4})}, local);
    if (edit_shard) edit_shard(entries, r);
    files.push_back(nn::save_state_dict(entries, ddp::shard_file_path(manifest, 1, r, 2)));
  }
  const nn::StateDict model = {{"a", floats({0, 1, 2}, {3})}, {"b", floats({3, 4, 5, 6}, {2, 2})}};
  nn::StateDict entries =
      ddp::manifest_entries(1, {flat}, model, {{"progress.epoch", int64s({1})}}, files);
  if (edit_manifest) edit_manifest(entries);
  nn::save_state_dict(entries, manifest);
}

// What read_checkpoint throws: a ddp::Error's message (any other exception fails the test).
std::string refusal(const fs::path& manifest) {
  try {
    static_cast<void>(ddp::read_checkpoint(manifest));
  } catch (const ddp::Error& e) {
    return e.what();
  }
  return "(read without an error)";
}

}  // namespace

TEST_CASE("sharded checkpoint: written by the library, read back whole",
          "[shard][ch09][checkpoint]") {
  ddp::testing::TempDir dir("ch09_ckpt");
  const fs::path ck = dir.path() / "ck";
  write_checkpoint(ck);
  int shard_files = 0;
  const nn::StateDict state = ddp::read_checkpoint(ck, &shard_files);
  CHECK(shard_files == 2);
  std::vector<std::string> names;
  for (const auto& [name, t] : state) names.push_back(name);
  CHECK(names == std::vector<std::string>{"model.a", "model.b", "optimizer.exp_avg.0",
                                          "optimizer.step.0", "optimizer.exp_avg.1",
                                          "optimizer.step.1", "progress.epoch"});
  CHECK(state[1].second.to_vector<float>() == std::vector<float>{3, 4, 5, 6});
  CHECK(state[4].second.to_vector<float>() == std::vector<float>{30, 40, 50, 60});
}

TEST_CASE(
    "sharded checkpoint: an entry name that is not <kind>.<index> is refused, naming "
    "the file and the entry",
    "[shard][ch09][checkpoint]") {
  ddp::testing::TempDir dir("ch09_ckpt");
  const fs::path ck = dir.path() / "ck";
  for (int rank : {0, 1}) {
    for (const std::string bad :
         {"optimizer.exp_avg.x", "optimizer.exp_avg.", "optimizer.exp_avg", "optimizer.exp_avg.-1",
          "optimizer.exp_avg.+0", "optimizer.exp_avg.123456789012345678901234567890",
          "optimizer..0", "exp_avg.0", "optimizer.exp_avg.7"}) {
      INFO("rank " << rank << "'s 'optimizer.exp_avg.0' renamed '" << bad << "'");
      write_checkpoint(ck, [&](nn::StateDict& state, int r) {
        if (r == rank) rename_entry(state, "optimizer.exp_avg.0", bad);
      });
      const std::string why = refusal(ck);
      CHECK_THAT(why, Contains(ddp::shard_file_path(ck, 1, rank, 2).string()) &&
                          Contains("rank " + std::to_string(rank) + "'s shard file") &&
                          Contains("'" + bad + "'"));
    }
  }
  write_checkpoint(ck,
                   [](nn::StateDict& state, int) { rename_entry(state, "param.0", "param.x"); });
  CHECK_THAT(refusal(ck), Contains("rank 0's shard file") && Contains("entry 'param.x' is not "
                                                                      "<kind>.<index>"));
}

TEST_CASE(
    "sharded checkpoint: the manifest's parameter entries are checked, naming the "
    "manifest",
    "[shard][ch09][checkpoint]") {
  ddp::testing::TempDir dir("ch09_ckpt");
  const fs::path ck = dir.path() / "ck";
  // shards.param.<name>: (index, flat j, offset, shape...); "a" is (0, 0, 0, 3).
  const struct {
    std::vector<std::int64_t> a;
    const char* says;
  } cases[] = {
      {{-1, 0, 0, 3}, "gives the parameter index -1"},
      {{2, 0, 0, 3}, "gives the parameter index 2"},
      {{1, 0, 0, 3}, "gives the parameter index 1"},  // b's too: b is refused
      {{0, 0, 0, -3}, "which has a negative dimension"},
      {{0, 0, 0, -1, -3}, "which has a negative dimension"},
      {{0, 0, 0, 3037000500, 3037000500}, "which the manifest's layout does not have"},
      {{0, 0, 5, 3}, "which the manifest's layout does not have"},
      {{0, 1, 0, 3}, "which the manifest's layout does not have"},
  };
  for (const auto& c : cases) {
    INFO("shards.param.a = " << ddp::shape_str(c.a));
    write_checkpoint(ck, {}, [&](nn::StateDict& m) { set_entry(m, "shards.param.a", c.a); });
    CHECK_THAT(refusal(ck),
               Contains("sharded checkpoint " + ck.string() + ": manifest entry 'shards.param.") &&
                   Contains(c.says));
  }
}

TEST_CASE(
    "remove_stale_shard_files: what the new manifest does not name goes, killed "
    "writers' temporary files of every generation too",
    "[shard][ch09][checkpoint]") {
  ddp::testing::TempDir dir("ch09_ckpt");
  const std::vector<std::string> kept = {
      "ck",                // the manifest just committed (generation 2 of 2 ranks)
      "ck.g2.rank0-of-2",  // the files it names
      "ck.g2.rank1-of-2",
      "ck.g1.rank0-of-2.bak",   // not a name a save writes
      "ck.g1.rank0-of-2.tmp.",  // not a temporary file's name: no pid
      "ck.g1.rank0-of-2.tmp.12a",
      "ck.g1.rank0-of-2.tmp.-1",
      "ck.g01.rank0-of-2.tmp.5",    // a name that only reads as a shard file's
      "other.g1.rank0-of-2.tmp.5",  // another checkpoint's
      "other.tmp.5",
  };
  const std::vector<std::string> removed = {
      "ck.g1.rank0-of-2", "ck.g1.rank1-of-2",  // the previous generation
      "ck.g2.rank2-of-3",                      // another world's
      "ck.g1.rank1-of-2.tmp.4242",             // a rank killed writing generation 1
      "ck.g2.rank1-of-2.tmp.4243",  // ... writing generation 2 in a save that died before its
                                    // manifest: the committed save reused the number
      "ck.g3.rank0-of-2.tmp.17",    // a later number (a manifest restored by hand)
      "ck.tmp.4244",                // rank 0 killed writing a manifest
  };
  for (const auto& name : kept) ddp::testing::write_bytes(dir.path() / name, "x");
  for (const auto& name : removed) ddp::testing::write_bytes(dir.path() / name, "x");
  fs::create_directory(dir.path() / "ck.g1.rank0-of-2.tmp.9");  // a folder: never removed
  CHECK(ddp::remove_stale_shard_files(dir.path() / "ck", 2, 2) == static_cast<int>(removed.size()));
  std::vector<std::string> left = dir.files(), expected = kept;
  expected.push_back("ck.g1.rank0-of-2.tmp.9");
  std::sort(left.begin(), left.end());
  std::sort(expected.begin(), expected.end());
  CHECK(left == expected);
  // A full checkpoint replaced the manifest: every shard file goes.
  CHECK(ddp::remove_stale_shard_files(dir.path() / "ck", 0, 0) == 2);
  // No folder to list: nothing removed, nothing thrown (the save is already committed).
  CHECK(ddp::remove_stale_shard_files(dir.path() / "gone" / "ck", 2, 2) == 0);
}
