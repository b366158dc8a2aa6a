// Chapter 04, state_dict files: the documented byte layout (decoded here by hand, CRC by
// zlib), save/read/load round trips, and every way a file can be bad -- truncated, a
// flipped byte, a wrong shape, a missing or unexpected entry -- failing with a message
// that names the file and the entry, while the model stays unchanged. Atomic saves leave
// no temporary file behind.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nn/basic_block.hpp"
#include "nn/resnet_mnist.hpp"
#include "nn/state_dict.hpp"
#include "tensor/ops.hpp"
#include "tensor/random.hpp"
#include "tests/support/temp_dir.hpp"

using Catch::Contains;
using ddp::Tensor;
namespace fs = std::filesystem;
namespace nn = ddp::nn;

namespace {

using ddp::testing::read_bytes;
using ddp::testing::write_bytes;

// This file's folders: ddp_ch04_state_<pid>_<n>.
struct TempDir : ddp::testing::TempDir {
  TempDir() : ddp::testing::TempDir("ch04_state") {}
};

template <typename T>
T le(const std::string& bytes, std::size_t at) {
  T value{};
  std::memcpy(&value, bytes.data() + at, sizeof(T));  // the test host is little-endian too
  return value;
}

// Where each entry's data starts, from Note [The DDPSTATE file format, version 1].
std::vector<std::size_t> data_offsets(const nn::StateDict& state) {
  std::vector<std::size_t> out;
  std::size_t at = 8 + 4 + 8;
  for (const auto& [name, tensor] : state) {
    at += 4 + name.size() + 1 + 4 + 8 * static_cast<std::size_t>(tensor.dim()) + 8 + 4;
    out.push_back(at);
    at += static_cast<std::size_t>(tensor.numel()) * ddp::element_size(tensor.dtype());
  }
  return out;
}

bool same_state(const nn::StateDict& a, const nn::StateDict& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || a[i].second.dtype() != b[i].second.dtype() ||
        a[i].second.shape() != b[i].second.shape()) {
      return false;
    }
    const Tensor x = a[i].second.contiguous(), y = b[i].second.contiguous();
    const std::size_t n = static_cast<std::size_t>(x.numel()) * ddp::element_size(x.dtype());
    if (n > 0 && std::memcmp(x.raw_data(), y.raw_data(), n) != 0) return false;
  }
  return true;
}

nn::StateDict snapshot(const nn::Module& module) {
  nn::StateDict out;
  for (const auto& [name, tensor] : module.state_dict()) out.emplace_back(name, tensor.clone());
  return out;
}

}  // namespace

TEST_CASE("the file format is the documented one, byte for byte", "[nn][state_dict]") {
  TempDir dir;
  const fs::path path = dir.path() / "w.state";
  nn::save_state_dict({{"w", ddp::from_data(std::vector<float>{1.5f, -2.0f}, {2})}}, path);
  const std::string bytes = read_bytes(path);
  REQUIRE(bytes.size() == 58);  // the example of state_dict.hpp
  CHECK(bytes.substr(0, 8) == "DDPSTATE");
  CHECK(le<std::uint32_t>(bytes, 8) == 1);    // version
  CHECK(le<std::uint64_t>(bytes, 12) == 1);   // count
  CHECK(le<std::uint32_t>(bytes, 20) == 1);   // name length
  CHECK(bytes[24] == 'w');
  CHECK(bytes[25] == 0);                      // dtype float32
  CHECK(le<std::uint32_t>(bytes, 26) == 1);   // ndim
  CHECK(le<std::int64_t>(bytes, 30) == 2);    // shape
  CHECK(le<std::uint64_t>(bytes, 38) == 8);   // byte length
  const auto* data = reinterpret_cast<const Bytef*>(bytes.data() + 50);
  CHECK(le<std::uint32_t>(bytes, 46) == crc32(0L, data, 8));
  CHECK(le<float>(bytes, 50) == 1.5f);
  CHECK(le<float>(bytes, 54) == -2.0f);

  // Every shorter prefix of the file is refused, naming the file.
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    INFO("first " << n << " bytes");
    write_bytes(path, bytes.substr(0, n));
    CHECK_THROWS_WITH(nn::read_state_dict(path), Contains(path.string()));
  }
  write_bytes(path, bytes + "x");
  CHECK_THROWS_WITH(nn::read_state_dict(path), Contains("1 unexpected bytes at the end"));
  write_bytes(path, "DDPSTATF" + bytes.substr(8));
  CHECK_THROWS_WITH(nn::read_state_dict(path), Contains("not a DDPSTATE file"));
}

TEST_CASE("save, read and load give back every tensor bit for bit", "[nn][state_dict]") {
  TempDir dir;
  ddp::Generator gen(21);
  nn::StateDict state = {
      {"weights", ddp::randn({3, 4, 5}, gen)},
      {"strided view", ddp::randn({4, 6}, gen).t()},  // saved as a contiguous copy
      {"labels", ddp::from_data(std::vector<std::int64_t>{7, -1, 1LL << 40}, {3})},
      {"scalar", ddp::scalar_tensor(3.25)},
      {"empty", ddp::zeros({0, 5})},
  };
  const fs::path path = dir.path() / "mixed.state";
  nn::save_state_dict(state, path);
  CHECK(same_state(nn::read_state_dict(path), state));

  ddp::Generator ga(1), gb(2);
  nn::ResNetMnist a(ga), b(gb);
  const fs::path model_path = dir.path() / "model.state";
  nn::save_module(a, model_path);
  CHECK_FALSE(same_state(a.state_dict(), b.state_dict()));
  nn::load_module(b, model_path);
  CHECK(same_state(a.state_dict(), b.state_dict()));
}

TEST_CASE("a bad file fails naming the file and the entry, and changes nothing",
          "[nn][state_dict]") {
  TempDir dir;
  ddp::Generator gen(31), other(32);
  nn::BasicBlock source(4, 8, 2, gen);
  nn::BasicBlock model(4, 8, 2, other);
  const nn::StateDict before = snapshot(model);
  const nn::StateDict state = source.state_dict();
  const std::vector<std::size_t> offsets = data_offsets(state);
  const fs::path path = dir.path() / "block.state";
  nn::save_state_dict(state, path);
  const std::string good = read_bytes(path);
  const std::size_t k = 5;  // an entry in the middle: "conv2.weight"
  const std::string& name = state[k].first;
  REQUIRE(name == "conv2.weight");

  SECTION("truncated inside an entry's data") {
    write_bytes(path, good.substr(0, offsets[k] + 10));
    CHECK_THROWS_WITH(nn::load_module(model, path),
                      Contains(path.string()) && Contains("'" + name + "'") &&
                          Contains("truncated"));
  }
  SECTION("truncated inside an entry's header") {
    write_bytes(path, good.substr(0, offsets[k] - 3));  // in the CRC field
    CHECK_THROWS_WITH(nn::load_module(model, path),
                      Contains(path.string()) && Contains("'" + name + "'") &&
                          Contains("the CRC-32"));
  }
  SECTION("one flipped bit in the data: CRC mismatch") {
    std::string bad = good;
    bad[offsets[k] + 17] ^= 0x10;
    write_bytes(path, bad);
    CHECK_THROWS_WITH(nn::load_module(model, path),
                      Contains(path.string()) && Contains("entry 5 ('" + name + "')") &&
                          Contains("CRC-32 mismatch"));
  }
  SECTION("an entry of the wrong shape") {
    nn::StateDict wrong = state;
    wrong[k].second = ddp::zeros({8, 8, 1, 1});
    nn::save_state_dict(wrong, path);
    CHECK_THROWS_WITH(nn::load_module(model, path),
                      Contains(path.string()) && Contains("'" + name + "'") &&
                          Contains("(8, 8, 3, 3)"));
  }
  SECTION("a missing entry") {
    nn::StateDict missing = state;
    missing.erase(missing.begin() + static_cast<std::ptrdiff_t>(k));
    nn::save_state_dict(missing, path);
    CHECK_THROWS_WITH(nn::load_module(model, path),
                      Contains(path.string()) && Contains("'" + name + "' is missing"));
  }
  SECTION("an unexpected entry") {
    nn::StateDict extra = state;
    extra.emplace_back("bn1.num_batches_tracked",
                       ddp::from_data(std::vector<std::int64_t>{3}, {1}));
    nn::save_state_dict(extra, path);
    CHECK_THROWS_WITH(nn::load_module(model, path),
                      Contains(path.string()) && Contains("'bn1.num_batches_tracked'"));
  }
  SECTION("no such file") {
    CHECK_THROWS_WITH(nn::load_module(model, dir.path() / "nope.state"),
                      Contains("nope.state") && Contains("cannot open"));
  }
  SECTION("a folder") {  // opens as a stream, with a "size" of 2^63 - 1 on ext4
    CHECK_THROWS_WITH(nn::load_module(model, dir.path()),
                      Contains(dir.path().string()) && Contains("a folder"));
  }
  CHECK(same_state(model.state_dict(), before));
}

TEST_CASE("saving is atomic: no temporary file is left behind", "[nn][state_dict]") {
  TempDir dir;
  ddp::Generator gen(41);
  nn::BasicBlock block(4, 4, 1, gen);
  const fs::path path = dir.path() / "ckpt.state";
  nn::save_module(block, path);
  CHECK(dir.files() == std::vector<std::string>{"ckpt.state"});
  nn::save_module(block, path);  // over an existing file
  CHECK(dir.files() == std::vector<std::string>{"ckpt.state"});
  CHECK(same_state(nn::read_state_dict(path), block.state_dict()));

  const fs::path nowhere = dir.path() / "no_such_folder" / "ckpt.state";
  CHECK_THROWS_WITH(nn::save_module(block, nowhere),
                    Contains(nowhere.string()) && Contains("cannot create"));
  CHECK(dir.files() == std::vector<std::string>{"ckpt.state"});
}
