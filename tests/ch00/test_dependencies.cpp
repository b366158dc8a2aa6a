// Chapter 00: the build's dependencies really work from a program linked like ours:
// Eigen multiplies, zlib round-trips bytes, the CUDA switch of CMake (DDP_HAVE_CUDA)
// agrees with what the library reports at run time, and the compiler flags that every
// target shares (cmake/DdpWarnings.cmake) produce correct code.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <Eigen/Dense>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tensor/cuda/device_info.hpp"
#include "base/error.hpp"

TEST_CASE("Eigen multiplies a 2x3 by a 3x2 matrix like the hand computation", "[ch00][deps]") {
  // clang-format off
  Eigen::Matrix<float, 2, 3> a;
  a << 1, 2, 3,
       4, 5, 6;
  Eigen::Matrix<float, 3, 2> b;
  b << 7,  8,
       9,  10,
       11, 12;
  // clang-format on
  const Eigen::Matrix<float, 2, 2> c = a * b;
  // Row 0: 1*7+2*9+3*11 = 58, 1*8+2*10+3*12 = 64; row 1: 139, 154.
  CHECK(c(0, 0) == 58.0f);
  CHECK(c(0, 1) == 64.0f);
  CHECK(c(1, 0) == 139.0f);
  CHECK(c(1, 1) == 154.0f);

  Eigen::MatrixXd dynamic = Eigen::MatrixXd::Identity(3, 3) * 2.0;
  CHECK((dynamic * Eigen::Vector3d(1, 2, 3)).isApprox(Eigen::Vector3d(2, 4, 6)));
}

TEST_CASE("zlib checksums match their published check values", "[ch00][deps]") {
  const char* digits = "123456789";
  const auto* bytes = reinterpret_cast<const Bytef*>(digits);
  CHECK(crc32(0L, bytes, 9) == 0xCBF43926UL);  // the CRC-32 check value
  const char* word = "Wikipedia";
  CHECK(adler32(1L, reinterpret_cast<const Bytef*>(word), 9) == 0x11E60398UL);
}

TEST_CASE("zlib compresses and uncompresses a buffer back to the same bytes", "[ch00][deps]") {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += "ddp.cpp all-reduce " + std::to_string(i % 10) + "\n";
  const auto source_len = static_cast<uLong>(text.size());
  REQUIRE(source_len == 21000);  // 1000 lines of 21 bytes

  uLongf packed_len = compressBound(source_len);
  REQUIRE(packed_len >= source_len);
  std::vector<Bytef> packed(packed_len);
  REQUIRE(compress(packed.data(), &packed_len, reinterpret_cast<const Bytef*>(text.data()),
                   source_len) == Z_OK);
  CHECK(packed_len > 0);
  CHECK(packed_len < source_len / 10);  // ten repeating lines compress very well

  std::vector<Bytef> unpacked(source_len);
  uLongf unpacked_len = source_len;
  REQUIRE(uncompress(unpacked.data(), &unpacked_len, packed.data(), packed_len) == Z_OK);
  CHECK(unpacked_len == source_len);
  CHECK(std::memcmp(unpacked.data(), text.data(), source_len) == 0);

  // A destination one byte short is reported, not overrun.
  std::vector<Bytef> small(source_len - 1);
  uLongf small_len = source_len - 1;
  CHECK(uncompress(small.data(), &small_len, packed.data(), packed_len) == Z_BUF_ERROR);
}

TEST_CASE("cuda::is_built agrees with the DDP_HAVE_CUDA compile definition", "[ch00][deps]") {
#if defined(DDP_HAVE_CUDA)
  CHECK(ddp::cuda::is_built());
#else
  CHECK_FALSE(ddp::cuda::is_built());
#endif
}

TEST_CASE("cuda::device_count answers without throwing, on every build", "[ch00][deps]") {
  static_assert(noexcept(ddp::cuda::device_count()), "device_count() is declared noexcept");
  int count = -1;
  CHECK_NOTHROW(count = ddp::cuda::device_count());
  CHECK(count >= 0);
  CHECK(ddp::cuda::is_available() == (count > 0));
  if (!ddp::cuda::is_built()) CHECK(count == 0);
  // Asking for the name of a GPU that is not there is an error, not a crash.
  CHECK_THROWS_AS(ddp::cuda::device_name(count), ddp::Error);
  if (count > 0) CHECK_FALSE(ddp::cuda::device_name(0).empty());
}

// Note [GCC 12 SLP miscompile] (cmake/DdpWarnings.cmake): the pattern, built twice. The
// configure step probes this compiler once; when it gets the pattern wrong, every target
// (this test too) is compiled with -fno-tree-slp-vectorize and DDP_AVOID_SLP is 1. A
// canary built only with those flags could never see the bug it is about, so the second
// copy turns the SLP vectorizer back on for itself: it shows what this compiler does
// without the workaround, and the test holds the probe's verdict to that.
namespace {

__attribute__((noinline)) void keep(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

// With the flags every target of this build shares.
__attribute__((noinline)) std::int64_t last_of_constant_array() {
  const std::vector<std::int64_t> last_zero{1, 1, 1, 0};
  const std::vector<std::int64_t> all_ones{1, 1, 1, 1};
  keep(&last_zero);
  keep(&all_ones);
  return last_zero[3];
}

#if defined(__GNUC__) && !defined(__clang__)
// The same, with the SLP vectorizer on whatever the flags say: GCC without the workaround.
__attribute__((noinline, optimize("tree-slp-vectorize"))) std::int64_t
last_of_constant_array_with_slp() {
  const std::vector<std::int64_t> last_zero{1, 1, 1, 0};
  const std::vector<std::int64_t> all_ones{1, 1, 1, 1};
  keep(&last_zero);
  keep(&all_ones);
  return last_zero[3];
}
#endif

}  // namespace

TEST_CASE("the shared compiler flags build small constant arrays correctly", "[ch00][deps]") {
  // GCC 12.2 with AVX-512 tuning (-march=native on an AVX-512 CPU, or -mtune=rocketlake,
  // skylake-avx512, ...) at -O2 and above stores the constant {1, 1, 1, 0} with a
  // 256-bit broadcast of 1 when {1, 1, 1, 1} is built next to it: the last element
  // silently becomes 1. Every target of this build shares these flags, so a toolchain
  // that fails here can miscompile the library too.
  // hint: configure with -DDDP_NATIVE=OFF, or use GCC 13 or newer.
  CHECK(last_of_constant_array() == 0);
#if defined(__GNUC__) && !defined(__clang__)
  // The configure probe found the bug exactly when this compiler has it.
  const std::int64_t with_slp = last_of_constant_array_with_slp();
  INFO("with the SLP vectorizer on, {1, 1, 1, 0}[3] is "
       << with_slp << "; the configure probe chose DDP_AVOID_SLP=" << DDP_AVOID_SLP);
  CHECK((with_slp != 0) == (DDP_AVOID_SLP == 1));
#endif
}
