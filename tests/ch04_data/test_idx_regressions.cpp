// Chapter 04, fuzzing regressions: every file in tests/data/idx_regressions/ (inputs
// found by tools/fuzz-idx.sh, and a few hand-made ones) is read; each must give an
// IdxArray or a ddp::Error, never a crash or another exception.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "data/idx_reader.hpp"
#include "base/error.hpp"

TEST_CASE("Every fuzzing regression input reads or fails with a ddp::Error",
          "[ch04][idx][ex04.2]") {
  namespace fs = std::filesystem;
  const fs::path folder = DDP_IDX_REGRESSIONS_DIR;
  REQUIRE(fs::is_directory(folder));
  int files = 0;
  int rejected = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder)) {
    if (!entry.is_regular_file() || entry.path().extension() == ".md") continue;
    INFO(entry.path().string());
    ++files;
    try {
      const ddp::IdxArray array = ddp::read_idx_file(entry.path().string());
      // Accepted: then it is consistent.
      std::size_t product = 1;
      for (std::int64_t d : array.dims) product *= static_cast<std::size_t>(d);
      CHECK(array.data.size() == product);
    } catch (const ddp::Error& e) {
      CHECK(std::string(e.what()).find("file " + entry.path().string()) != std::string::npos);
      ++rejected;
    }
  }
  INFO(files << " files, " << rejected << " rejected");
  CHECK(files > 0);
}
