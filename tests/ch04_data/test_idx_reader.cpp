// Chapter 04, the IDX reader: generated files read back byte for byte (raw and gzip, odd
// image sizes), every malformed file of a generated corpus rejected with a ddp::Error
// that names the file and the fault, and a header that claims 2^31 images failing fast
// without the memory it claims.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "data/idx_header.hpp"
#include "data/idx_reader.hpp"
#include "tests/ch04_data/idx_files.hpp"

using Catch::Contains;
using ch04::Bytes;
using ch04::error_of;

namespace {

void check_read_back(const ddp::IdxArray& got, const std::vector<std::int64_t>& dims,
                     const Bytes& data) {
  CHECK(got.dims == dims);
  REQUIRE(got.data.size() == data.size());
  CHECK(got.data == data);
}

// Peak resident memory of this process so far, in MiB.
double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

}  // namespace

// ---- Round trips -----------------------------------------------------------------------------
TEST_CASE("IDX images read back exactly, raw and gzip, for odd sizes", "[ch04][idx][ex04.2]") {
  ch04::TempDir dir("roundtrip");
  // (1, 1, 1), odd shapes, one wider than tall, and 100 x 28 x 28 = 78,400 bytes, more
  // than one of the reader's 64 KiB pieces.
  const std::vector<std::vector<std::uint32_t>> shapes = {
      {1, 1, 1}, {3, 5, 7}, {2, 28, 28}, {4, 1, 300}, {100, 28, 28}};
  for (const auto& s : shapes) {
    const Bytes raw = ch04::images_file(s[0], s[1], s[2]);
    const Bytes data = ch04::pattern(std::size_t{s[0]} * s[1] * s[2]);
    const std::vector<std::int64_t> dims = {s[0], s[1], s[2]};
    INFO("shape " << s[0] << "x" << s[1] << "x" << s[2]);
    check_read_back(ddp::read_idx_bytes(raw, "raw"), dims, data);
    check_read_back(ddp::read_idx_bytes(ch04::gzip(raw), "gz"), dims, data);
    check_read_back(ddp::read_idx_file(dir.write("images", raw)), dims, data);
    check_read_back(ddp::read_idx_file(dir.write("images.gz", ch04::gzip(raw))), dims, data);
  }
}

TEST_CASE("IDX labels read back exactly, raw and gzip", "[ch04][idx][ex04.2]") {
  const Bytes labels = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 0, 255};  // the reader allows any byte
  const Bytes raw = ch04::labels_file(labels);
  check_read_back(ddp::read_idx_bytes(raw, "raw"), {13}, labels);
  check_read_back(ddp::read_idx_bytes(ch04::gzip(raw), "gz"), {13}, labels);
}

TEST_CASE("A gzip file of several members reads as their concatenation", "[ch04][idx]") {
  // `cat a.gz b.gz` is a valid gzip file (RFC 1952); gunzip and Python read it whole.
  // The cut falls inside the header, so the reader must carry on across members.
  const Bytes raw = ch04::images_file(3, 5, 7);
  const Bytes first(raw.begin(), raw.begin() + 6);
  const Bytes second(raw.begin() + 6, raw.end());
  Bytes two = ch04::gzip(first);
  const Bytes tail = ch04::gzip(second);
  two.insert(two.end(), tail.begin(), tail.end());
  check_read_back(ddp::read_idx_bytes(two, "two members"), {3, 5, 7}, ch04::pattern(105));
}

// ---- The corpus of broken files ------------------------------------------------------------
namespace {

struct Broken {
  std::string name;  // the file name written, and the SECTION title
  Bytes bytes;
  std::string expected;  // a part of the message
};

std::vector<Broken> broken_corpus() {
  const Bytes images = ch04::images_file(3, 5, 7);  // 16 header bytes + 105 pixels
  const Bytes gz = ch04::gzip(images);
  auto cut = [](const Bytes& b, std::size_t drop) { return Bytes(b.begin(), b.end() - drop); };
  auto plus = [](Bytes b, const Bytes& extra) {
    b.insert(b.end(), extra.begin(), extra.end());
    return b;
  };
  auto flip = [](Bytes b, std::size_t at) {
    b[at] ^= 0xff;
    return b;
  };
  return {
      {"empty", {}, "too short to be an IDX file: it ends after 0 bytes"},
      {"three-bytes", {0, 0, 8}, "it ends after 3 bytes"},
      {"bad-magic", ch04::idx_bytes(0x12345678, {3}, {1, 2, 3}),
       "not an IDX file: magic number 0x12345678"},
      {"float-type", ch04::idx_bytes(0x00000d03, {1, 1, 1}, {0, 0, 0, 0}), "element type 13"},
      {"two-dims", ch04::idx_bytes(0x00000802, {2, 2}, {1, 2, 3, 4}),
       "magic number 0x00000802 says 2 dimensions; expected 3"},
      {"zero-dims", ch04::idx_bytes(0x00000800, {}, {}), "says 0 dimensions"},
      {"truncated-header", cut(images, 105 + 6),
       "truncated header: 3 dimensions take 12 bytes after the magic number, but the file ends "
       "after 6"},
      {"zero-width", ch04::idx_bytes(0x00000803, {2, 4, 0}, {}),
       "header claims images of 4x0 pixels"},
      {"truncated-data", cut(images, 10),
       "header claims 3 images of 5x7 (105 bytes) but the data ends after 95 bytes"},
      {"truncated-labels", cut(ch04::labels_file({1, 2, 3, 4}), 1),
       "header claims 4 labels (4 bytes) but the data ends after 3 bytes"},
      {"trailing-bytes", plus(images, {1, 2, 3}),
       "3 trailing bytes after the 105 bytes of data that the header describes (3 images of "
       "5x7)"},
      {"trailing-bytes-in-gzip", ch04::gzip(plus(images, {9, 9, 9, 9, 9})), "5 trailing bytes"},
      {"truncated-gzip-half", cut(gz, gz.size() / 2), "truncated gzip stream"},
      {"truncated-gzip-no-size", cut(gz, 4), "truncated gzip stream"},
      {"truncated-gzip-magic-only", {0x1f, 0x8b}, "truncated gzip stream"},
      {"gzip-bad-crc", flip(gz, gz.size() - 8), "corrupt gzip data"},
      {"gzip-bad-method", flip(gz, 2), "corrupt gzip data"},
      {"gzip-corrupt-byte", flip(gz, gz.size() / 2), "corrupt gzip data"},
      {"gzip-trailing-garbage", plus(gz, {'x', 'y', 'z'}),
       "3 bytes of trailing garbage after the end of the gzip stream"},
  };
}

}  // namespace

TEST_CASE("Every malformed IDX file is a ddp::Error naming the file and the fault",
          "[ch04][idx][ex04.2]") {
  ch04::TempDir dir("broken");
  for (const Broken& b : broken_corpus()) {
    SECTION(b.name) {
      const std::string path = dir.write(b.name, b.bytes);
      const std::string message = error_of([&] { ddp::read_idx_file(path); });
      INFO(message);
      CHECK_THAT(message, Contains("file " + path + ": "));
      CHECK_THAT(message, Contains(b.expected));
      // The memory entry point says the same, under the name it is given.
      const std::string from_bytes = error_of([&] { ddp::read_idx_bytes(b.bytes, "<mem>"); });
      CHECK_THAT(from_bytes, Contains("file <mem>: ") && Contains(b.expected));
    }
  }
}

TEST_CASE("A missing file is a ddp::Error with the reason", "[ch04][idx]") {
  ch04::TempDir dir("missing");
  const std::string path = (dir.path() / "nope-idx3-ubyte.gz").string();
  CHECK_THAT(error_of([&] { ddp::read_idx_file(path); }),
             Contains("file " + path + ": cannot open it: No such file or directory"));
}

// ---- The claimed-size bomb ---------------------------------------------------------------------
// Each TEST_CASE runs as its own process under ctest, so the peak memory measured here is
// this case's own.
TEST_CASE("A header claiming 2^31 images fails fast, in little memory", "[ch04][idx][ex04.2]") {
  const Bytes pixels = ch04::pattern(1000);
  const Bytes bomb_images = ch04::idx_bytes(0x00000803, {1u << 31, 28, 28}, pixels);
  const Bytes bomb_labels = ch04::idx_bytes(0x00000801, {1u << 31}, pixels);  // 2 GiB claimed
  const double rss_before = peak_rss_mib();
  const auto start = std::chrono::steady_clock::now();

  const std::string images_raw = error_of([&] { ddp::read_idx_bytes(bomb_images, "bomb"); });
  const std::string images_gz =
      error_of([&] { ddp::read_idx_bytes(ch04::gzip(bomb_images), "bomb.gz"); });
  const std::string labels_gz =
      error_of([&] { ddp::read_idx_bytes(ch04::gzip(bomb_labels), "labels.gz"); });

  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double rss_growth = peak_rss_mib() - rss_before;
  CHECK_THAT(images_raw, Contains("file bomb: header claims 2147483648 images of 28x28 "
                                  "(1683627180032 bytes) but the data ends after 1000 bytes"));
  CHECK_THAT(images_gz, Contains("file bomb.gz: header claims 2147483648 images of 28x28 "
                                 "(1683627180032 bytes) but the data ends after 1000 bytes"));
  CHECK_THAT(labels_gz, Contains("header claims 2147483648 labels (2147483648 bytes) but the "
                                 "data ends after 1000 bytes"));
  INFO("peak memory grew by " << rss_growth << " MiB in " << seconds << " s");
  CHECK(rss_growth < 64.0);
  CHECK(seconds < 2.0);
}

TEST_CASE("A header whose sizes multiply past 2^63 bytes is rejected", "[ch04][idx][ex04.2]") {
  const Bytes bomb = ch04::idx_bytes(0x00000803, {0xffffffffu, 0xffffffffu, 0xffffffffu}, {});
  CHECK_THAT(error_of([&] { ddp::read_idx_bytes(bomb, "huge"); }),
             Contains("file huge: header claims 4294967295 images of 4294967295x4294967295, "
                      "more than 2^63 bytes"));
}

// ---- The header's checks, one by one ---------------------------------------------------------
TEST_CASE("idx_ndim accepts exactly the magic numbers 0x00000801 and 0x00000803",
          "[ch04][idx][ex04.2]") {
  for (int first = 0; first < 2; ++first) {
    for (int type = 0; type < 256; ++type) {
      for (int ndim = 0; ndim < 256; ++ndim) {
        const std::array<std::uint8_t, 4> magic = {
            0, static_cast<std::uint8_t>(first ? 0x80 : 0), static_cast<std::uint8_t>(type),
            static_cast<std::uint8_t>(ndim)};
        const bool valid = first == 0 && type == 0x08 && (ndim == 1 || ndim == 3);
        if (valid) {
          CHECK(ddp::idx_ndim(magic, "m") == static_cast<std::size_t>(ndim));
        } else {
          CHECK_THROWS_WITH(ddp::idx_ndim(magic, "m"), Contains("file m: "));
        }
      }
    }
  }
}

TEST_CASE("idx_claimed_bytes is the product of the sizes, refused past 2^63 - 1",
          "[ch04][idx][ex04.2]") {
  constexpr std::int64_t kMax32 = 0xffffffff;
  const std::vector<std::vector<std::int64_t>> claims = {
      {0}, {5}, {kMax32}, {3, 5, 7}, {0, 28, 28}, {0, kMax32, kMax32},
      {1LL << 31, 1LL << 16, 1LL << 15},  // 2^62
      {1LL << 31, 1LL << 16, 1LL << 16},  // 2^63: one past the largest
      {kMax32, kMax32, 1}, {kMax32, kMax32, kMax32}, {kMax32, 1, kMax32}};
  for (const std::vector<std::int64_t>& dims : claims) {
    std::int64_t product = 1;  // the compiler's overflow check, independent of the reader's
    bool fits = true;
    for (std::int64_t d : dims) fits = !__builtin_mul_overflow(product, d, &product) && fits;
    CAPTURE(dims);
    if (fits) {
      CHECK(ddp::idx_claimed_bytes(dims, "c") == static_cast<std::uint64_t>(product));
    } else {
      CHECK_THROWS_WITH(ddp::idx_claimed_bytes(dims, "c"),
                        Contains("file c: header claims") && Contains("more than 2^63 bytes"));
    }
  }
  CHECK_THROWS_WITH(ddp::idx_claimed_bytes({2, 0, 28}, "z"),
                    Contains("file z: header claims images of 0x28 pixels"));
  CHECK_THROWS_WITH(ddp::idx_claimed_bytes({2, 28, 0}, "z"), Contains("images of 28x0 pixels"));
}
