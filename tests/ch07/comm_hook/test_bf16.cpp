// Chapter 07's bf16 communication hook, one process: the rounding against hand-worked
// answers and against the reference in bf16_reference.hpp, the packing, and the hook on a
// world of one. Several ranks: comm_hook_main.cpp.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "dist/parallel/comm_hooks.hpp"
#include "dist/process_group_tcp.hpp"
#include "dist/tcp_store.hpp"
#include "tests/ch07/comm_hook/bf16_reference.hpp"

using namespace ddp;

namespace {
float from_bits(std::uint32_t bits) { return std::bit_cast<float>(bits); }
std::uint32_t bits_of(float x) { return std::bit_cast<std::uint32_t>(x); }
bool is_bf16_nan(std::uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x007fu) != 0; }
}  // namespace

TEST_CASE("to_bf16 rounds to nearest, ties to even, on hand-worked values", "[comm_hook]") {
  struct Case {
    std::uint32_t in;
    std::uint16_t out;
    const char* what;
  };
  // bf16 keeps the top 16 bits; the low 16 decide: < 0x8000 down, > 0x8000 up, == 0x8000
  // (a tie) toward the even kept part.
  const Case cases[] = {
      {0x3f800000u, 0x3f80u, "1.0, exact"},
      {0x3f807fffu, 0x3f80u, "just below the half-way point: down"},
      {0x3f808000u, 0x3f80u, "1 + 2^-8, a tie, 0x3f80 even: down"},
      {0x3f808001u, 0x3f81u, "just above the half-way point: up"},
      {0x3f818000u, 0x3f82u, "a tie, 0x3f81 odd: up to even"},
      {0xbf818000u, 0xbf82u, "the same, negative"},
      {0x3f7fffffu, 0x3f80u, "just below 1: the carry bumps the exponent"},
      {0x00000000u, 0x0000u, "+0"},
      {0x80000000u, 0x8000u, "-0"},
      {0x00000001u, 0x0000u, "smallest subnormal: to +0"},
      {0x80000001u, 0x8000u, "smallest negative subnormal: to -0"},
      {0x00008000u, 0x0000u, "subnormal tie, 0x0000 even: down"},
      {0x00018000u, 0x0002u, "subnormal tie, 0x0001 odd: up"},
      {0x00008001u, 0x0001u, "subnormal above the tie: up to bf16's smallest subnormal"},
      {0x007fffffu, 0x0080u, "largest subnormal: up to the smallest normal"},
      {0x7f800000u, 0x7f80u, "+Inf"},
      {0xff800000u, 0xff80u, "-Inf"},
      {0x7f7f0000u, 0x7f7fu, "largest finite bf16, exact"},
      {0x7f7f7fffu, 0x7f7fu, "just under half an ulp above it: stays finite"},
      {0x7f7f8000u, 0x7f80u, "a tie above it, 0x7f7f odd: to Inf"},
      {0x7f7fffffu, 0x7f80u, "FLT_MAX: overflows to Inf"},
      {0xff7fffffu, 0xff80u, "-FLT_MAX: to -Inf"},
  };
  for (const Case& c : cases) {
    INFO(c.what << " (input 0x" << std::hex << c.in << ")");
    CHECK(to_bf16(from_bits(c.in)) == c.out);
    CHECK(test::reference_bf16(from_bits(c.in)) == c.out);  // the reference agrees
  }
  CHECK(bits_of(std::numeric_limits<float>::max()) == 0x7f7fffffu);
}

TEST_CASE("to_bf16 keeps a NaN a NaN, sign included", "[comm_hook]") {
  // 0x7f800001: a signalling NaN whose payload sits in bits bf16 cuts away; a plain
  // "add and cut" would make it 0x7f80, Inf.
  for (const std::uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fbfffffu, 0xffffffffu,
                                  0xff800001u}) {
    INFO("input 0x" << std::hex << nan);
    const std::uint16_t b = to_bf16(from_bits(nan));
    CHECK(is_bf16_nan(b));
    CHECK((b & 0x8000u) == ((nan >> 16) & 0x8000u));
    CHECK(std::isnan(from_bf16(b)));
  }
}

TEST_CASE("to_bf16 matches the reference across the float32 patterns", "[comm_hook]") {
  // A stride through all 2^32 patterns (every exponent, both signs), and around each
  // sampled value the low halves where rounding decides: just below, at and above a tie.
  std::int64_t checked = 0;
  for (std::uint64_t p = 0; p < (std::uint64_t{1} << 32); p += 65'521) {
    const auto high = static_cast<std::uint32_t>(p) & 0xffff0000u;
    for (const std::uint32_t low : {static_cast<std::uint32_t>(p) & 0xffffu, 0x0000u, 0x0001u,
                                    0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      const float x = from_bits(high | low);
      const std::uint16_t got = to_bf16(x);
      if (std::isnan(x)) {
        REQUIRE(is_bf16_nan(got));
      } else if (got != test::reference_bf16(x)) {
        FAIL("input 0x" << std::hex << (high | low) << ": to_bf16 0x" << got
                        << ", reference 0x" << test::reference_bf16(x));
      }
      ++checked;
    }
  }
  CHECK(checked > 400'000);
}

TEST_CASE("from_bf16 is exact: a bf16 value survives the round trip", "[comm_hook]") {
  for (std::uint32_t b = 0; b <= 0xffffu; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    if (is_bf16_nan(h)) continue;
    REQUIRE(bits_of(from_bf16(h)) == b << 16);
    REQUIRE(to_bf16(from_bf16(h)) == h);
  }
}

TEST_CASE("pack_bf16 puts two values per slot and unpack_bf16 gives them back",
          "[comm_hook]") {
  // The layout, by hand: value 0 in the low half, value 1 in the high half.
  std::vector<float> slot(1);
  pack_bf16(std::vector<float>{1.0f, -2.0f}, slot);
  CHECK(bits_of(slot[0]) == 0xc0003f80u);
  // An odd count: the last slot's high half is zero padding.
  std::vector<float> odd(2);
  pack_bf16(std::vector<float>{1.0f, 1.0f, 3.0f}, odd);
  CHECK(bits_of(odd[1]) == 0x00004040u);

  // Round trip on every length kind (empty, one, odd, even) with the special values in.
  const float specials[] = {0.0f, -0.0f, 1.0f, 1.00390625f /* 1 + 2^-8, a tie */,
                            from_bits(0x00000001u), from_bits(0x00018000u),
                            std::numeric_limits<float>::infinity(), -3.39e38f,
                            from_bits(0x7f800001u), 1e-30f, -123.456f};
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{10},
                              std::size_t{1001}}) {
    std::vector<float> values(n);
    for (std::size_t i = 0; i < n; ++i) {
      values[i] = i < std::size(specials) ? specials[i]
                                          : std::ldexp(std::sin(0.37f * static_cast<float>(i)),
                                                       static_cast<int>(i % 61) - 30);
    }
    std::vector<float> packed(static_cast<std::size_t>(bf16_packed_slots(
        static_cast<std::int64_t>(n))));
    pack_bf16(values, packed);
    std::vector<float> back(n);
    unpack_bf16(packed, back);
    for (std::size_t i = 0; i < n; ++i) {
      INFO("n " << n << ", value " << i << " = " << values[i]);
      if (std::isnan(values[i])) {
        CHECK(std::isnan(back[i]));
      } else {
        CHECK(bits_of(back[i]) == bits_of(test::reference_bf16_value(values[i])));
      }
    }
    if (n % 2 == 1) CHECK((bits_of(packed.back()) >> 16) == 0u);
  }
  std::vector<float> three(3), wrong(1);
  CHECK_THROWS_WITH(pack_bf16(three, wrong), Catch::Contains("3 values need 2 slots, got 1"));
}

TEST_CASE("the bf16 hook on a world of one: the bucket becomes its bf16 rounding",
          "[comm_hook]") {
  TCPStoreOptions o;
  o.port = 0;
  o.is_server = true;
  ProcessGroupTcp group(std::make_shared<TCPStore>(o), 0, 1);
  const std::vector<float> values{1.00390625f, -2.71828f, 3e-39f, 65504.0f, 1e20f};
  Tensor bucket = from_data(values, {5});
  CommHook hook = bf16_compress_hook();
  // Two buckets in flight at once, finished in launch order, as the Reducer does.
  Tensor other = from_data(std::vector<float>{0.1f, 0.2f}, {2});
  auto work = hook.launch(group, bucket);
  auto other_work = hook.launch(group, other);
  work->wait();
  other_work->wait();
  hook.finish(group, bucket);
  hook.finish(group, other);
  const std::vector<float> got = bucket.to_vector<float>();
  for (std::size_t i = 0; i < values.size(); ++i) {
    CHECK(bits_of(got[i]) == bits_of(test::reference_bf16_value(values[i])));
  }
  CHECK(other.to_vector<float>() == std::vector<float>{test::reference_bf16_value(0.1f),
                                                       test::reference_bf16_value(0.2f)});
  CHECK_THROWS_WITH(hook.finish(group, bucket), Catch::Contains("did not launch"));
}
