// Chapter 07: the DDP cost model (dist/parallel/cost_model.hpp) against timelines worked
// out by hand, its edge cases (one bucket = chapter 06's naive step; a free link = compute
// only; one rank = no communication), the bounds every timeline must respect, the helpers
// that turn sizes into buckets and ready times, the --link grammar, and bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "dist/link_emulation.hpp"
#include "dist/parallel/cost_model.hpp"
#include "base/error.hpp"
#include "base/units.hpp"

using Catch::Contains;
using ddp::BucketTiming;
using ddp::RingLink;
using ddp::StepTimes;

namespace {

// 1e6 bytes/s and 1 ms per ring step: at W = 2, ring(S) = 2 ms + S / 1e6 s.
const RingLink kSlow{1e6, 1e-3};
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("ring all-reduce: 2(W-1) latencies + 2(W-1)/W of the bytes over the link",
          "[cost_model]") {
  // W = 2: 2 steps of 1 ms + 1 x 1000 B / 1e6 B/s = 3 ms.
  CHECK(ddp::ring_all_reduce_seconds(1000, 2, kSlow) == Approx(0.003));
  // W = 4: 6 x 0.1 ms + 1.5 x 4000 / 1e6 = 0.6 + 6 ms.
  CHECK(ddp::ring_all_reduce_seconds(4000, 4, {1e6, 1e-4}) == Approx(0.0066));
  // W = 8, 100 MB over 12.5 GB/s, no latency: 1.75 x 8 ms = 14 ms.
  CHECK(ddp::ring_all_reduce_seconds(100'000'000, 8, {12.5e9, 0}) == Approx(0.014));
  // One rank exchanges nothing; a free link costs only its latencies.
  CHECK(ddp::ring_all_reduce_seconds(1 << 20, 1, kSlow) == 0);
  CHECK(ddp::ring_all_reduce_seconds(1 << 20, 3, {kInf, 1e-6}) == Approx(4e-6));
}

TEST_CASE("three buckets, ready times known: the timeline by hand", "[cost_model]") {
  // W = 2 on kSlow. Buckets of 1000, 3000, 2000 B take 3, 5, 4 ms and are ready 2, 6 and
  // 10 ms into a 10 ms backward:
  //   bucket 0: starts  2 (ready),               ends  5
  //   bucket 1: starts  6 (ready; link free at 5), ends 11
  //   bucket 2: starts 11 (link busy until 11),   ends 15   -> 5 ms after backward
  // step = 5 fwd + max(10, 15) + 1 opt = 21 ms; one process 16 ms; naive 16 + ring(6000)
  // = 16 + 2 + 6 = 24 ms.
  const std::vector<BucketTiming> buckets{{1000, 0.002}, {3000, 0.006}, {2000, 0.010}};
  const auto p = ddp::predict_step({0.005, 0.010, 0.001}, buckets, 2, kSlow);
  REQUIRE(p.start_s.size() == 3);
  REQUIRE(p.end_s.size() == 3);
  CHECK(p.start_s[0] == Approx(0.002));
  CHECK(p.end_s[0] == Approx(0.005));
  CHECK(p.start_s[1] == Approx(0.006));
  CHECK(p.end_s[1] == Approx(0.011));
  CHECK(p.start_s[2] == Approx(0.011));
  CHECK(p.end_s[2] == Approx(0.015));
  CHECK(p.one_process_s == Approx(0.016));
  CHECK(p.step_s == Approx(0.021));
  CHECK(p.naive_step_s == Approx(0.024));
  CHECK(p.comm_s == Approx(0.012));
  CHECK(p.exposed_comm_s == Approx(0.005));
  CHECK(p.efficiency == Approx(16.0 / 21.0));
  CHECK(p.naive_efficiency == Approx(16.0 / 24.0));
}

TEST_CASE("a bucket waits for the link, not only for its gradients", "[cost_model]") {
  // BucketTiming 1 is ready at 1 ms but the link is busy with bucket 0 (ready 0, 2 + 8 = 10 ms)
  // until 10 ms; it starts there and ends at 10 + 3 = 13 ms, 3 ms after a 10 ms backward.
  const std::vector<BucketTiming> buckets{{8000, 0.0}, {1000, 0.001}};
  const auto p = ddp::predict_step({0, 0.010, 0}, buckets, 2, kSlow);
  CHECK(p.start_s[1] == Approx(0.010));
  CHECK(p.end_s[1] == Approx(0.013));
  CHECK(p.step_s == Approx(0.013));
  CHECK(p.exposed_comm_s == Approx(0.003));
}

TEST_CASE("buckets done before backward ends cost nothing: backward is the floor", "[cost_model]") {
  // Gradients of frozen early layers never come: the last bucket is ready at 5 ms of a
  // 10 ms backward and its ring (3 ms) ends at 8 ms, hidden. step = 1 + 10 + 1 = 12 ms.
  const std::vector<BucketTiming> buckets{{1000, 0.005}};
  const auto p = ddp::predict_step({0.001, 0.010, 0.001}, buckets, 2, kSlow);
  CHECK(p.end_s[0] == Approx(0.008));
  CHECK(p.step_s == Approx(0.012));
  CHECK(p.exposed_comm_s == 0);
  CHECK(p.efficiency == 1.0);
}

TEST_CASE("all but the last bucket hidden: only the last one's ring is exposed", "[cost_model]") {
  // Small early buckets finish long before backward ends; the last one (ready at the end)
  // is never hidden: exposed = ring(1000 B) = 3 ms exactly.
  const std::vector<BucketTiming> buckets{{1000, 0.0}, {1000, 0.010}, {1000, 0.050}, {1000, 0.100}};
  const auto p = ddp::predict_step({0.020, 0.100, 0.005}, buckets, 2, kSlow);
  CHECK(p.exposed_comm_s == Approx(0.003));
  CHECK(p.step_s == Approx(0.128));
  // Naive: one ring of all 4000 B after backward, 2 + 4 = 6 ms exposed instead of 3.
  CHECK(p.naive_step_s == Approx(0.125 + 0.002 + 0.004));
}

TEST_CASE("one bucket is chapter 06's naive step: nothing overlaps", "[cost_model]") {
  const StepTimes t{0.030, 0.062, 0.004};
  const std::int64_t bytes = 4 * 77754;
  for (const int world : {2, 3, 4, 8}) {
    CAPTURE(world);
    const std::vector<BucketTiming> one{{bytes, t.backward_s}};
    const auto p = ddp::predict_step(t, one, world, {125e6, 50e-6});
    CHECK(p.step_s == Approx(p.naive_step_s));
    CHECK(p.exposed_comm_s == Approx(ddp::ring_all_reduce_seconds(bytes, world, {125e6, 50e-6})));
    CHECK(p.exposed_comm_s == Approx(p.comm_s));
  }
}

TEST_CASE("a free link, or one rank, costs nothing: the step is compute only", "[cost_model]") {
  const StepTimes t{0.030, 0.062, 0.004};
  const auto sizes = ddp::split_into_buckets(100 * ddp::kMiB, 25 * ddp::kMiB, ddp::kMiB);
  const auto buckets = ddp::ready_at_uniform_rate(sizes, t.backward_s);
  for (const auto& [world, link] : {std::pair{8, RingLink{kInf, 0}}, std::pair{1, kSlow}}) {
    CAPTURE(world);
    const auto p = ddp::predict_step(t, buckets, world, link);
    CHECK(p.step_s == p.one_process_s);
    CHECK(p.naive_step_s == p.one_process_s);
    CHECK(p.exposed_comm_s == 0);
    CHECK(p.efficiency == 1.0);
    CHECK(p.one_process_s == Approx(0.096));
  }
}

TEST_CASE("every timeline: compute <= step <= naive + the extra buckets' latencies",
          "[cost_model]") {
  // Bounds that hold whatever the sizes: the step is at least the compute and at least
  // compute + the last bucket's ring (it is ready when backward ends); at most, every
  // bucket waits until the end of backward, which is the naive step plus one ring latency
  // term per extra bucket.
  const StepTimes t{0.010, 0.040, 0.002};
  for (const double cap_mib : {0.25, 1.0, 5.0, 25.0}) {
    for (const int world : {2, 4, 8}) {
      for (const RingLink link : {RingLink{125e6, 50e-6}, RingLink{12e9, 1e-5}, kSlow}) {
        CAPTURE(cap_mib, world, link.bandwidth_bytes_per_s);
        const auto sizes = ddp::split_into_buckets(
            40 * ddp::kMiB, static_cast<std::int64_t>(cap_mib * ddp::kMiB), ddp::kMiB);
        const auto p =
            ddp::predict_step(t, ddp::ready_at_uniform_rate(sizes, t.backward_s), world, link);
        const double extra = (sizes.size() - 1) * 2.0 * (world - 1) * link.latency_s;
        CHECK(p.step_s >= p.one_process_s);
        CHECK(p.step_s >=
              Approx(p.one_process_s + ddp::ring_all_reduce_seconds(sizes.back(), world, link)));
        CHECK(p.step_s <= Approx(p.naive_step_s + extra));
        CHECK(p.exposed_comm_s <= Approx(p.comm_s));
      }
    }
  }
}

TEST_CASE("split_into_buckets: a small first bucket, then caps, then the rest", "[cost_model]") {
  using V = std::vector<std::int64_t>;
  const std::int64_t MiB = ddp::kMiB;
  CHECK(ddp::split_into_buckets(10 * MiB, 4 * MiB, MiB) == V{MiB, 4 * MiB, 4 * MiB, MiB});
  CHECK(ddp::split_into_buckets(9 * MiB, 4 * MiB, MiB) == V{MiB, 4 * MiB, 4 * MiB});
  // The chapter's ResNet: 311,016 bytes of gradients fit the 1 MiB first bucket.
  CHECK(ddp::split_into_buckets(311016, 25 * MiB, MiB) == V{311016});
  CHECK(ddp::split_into_buckets(311016, MiB / 4, MiB / 4) == V{262144, 48872});
  CHECK(ddp::split_into_buckets(100, 100, 100) == V{100});
  CHECK_THROWS_WITH(ddp::split_into_buckets(0, MiB, MiB), Contains("total_bytes must be > 0"));
  CHECK_THROWS_WITH(ddp::split_into_buckets(MiB, 0, MiB), Contains("caps must be > 0"));
  CHECK_THROWS_WITH(ddp::split_into_buckets(MiB, MiB, -1), Contains("caps must be > 0"));
}

TEST_CASE("ready times from sizes (uniform byte rate) and from fractions", "[cost_model]") {
  const std::vector<std::int64_t> sizes{1000, 3000, 2000};
  // Cumulative 1000, 4000, 6000 of 6000 bytes over a 12 ms backward: 2, 8, 12 ms.
  const auto uniform = ddp::ready_at_uniform_rate(sizes, 0.012);
  REQUIRE(uniform.size() == 3);
  CHECK(uniform[0].ready_s == Approx(0.002));
  CHECK(uniform[1].ready_s == Approx(0.008));
  CHECK(uniform[2].ready_s == 0.012);  // exactly the end of backward: the last is never early
  CHECK(uniform[1].bytes == 3000);
  const std::vector<double> fractions{0.1, 0.5, 1.0};
  const auto traced = ddp::ready_at_fractions(sizes, fractions, 0.020);
  CHECK(traced[0].ready_s == Approx(0.002));
  CHECK(traced[1].ready_s == Approx(0.010));
  CHECK(traced[2].ready_s == Approx(0.020));

  const std::vector<double> two{0.5, 1.0};
  CHECK_THROWS_WITH(ddp::ready_at_fractions(sizes, two, 0.02),
                    Contains("3 bucket sizes but 2 ready fractions"));
  const std::vector<double> late{0.5, 0.9, 1.5};
  CHECK_THROWS_WITH(ddp::ready_at_fractions(sizes, late, 0.02),
                    Contains("bucket 2") && Contains("outside [0, 1]"));
  const std::vector<std::int64_t> empty_bucket{1000, 0};
  CHECK_THROWS_WITH(ddp::ready_at_uniform_rate(empty_bucket, 0.02), Contains("each must hold > 0"));
}

TEST_CASE("predict_step: bad input is an error that names it", "[cost_model]") {
  const StepTimes t{0.01, 0.02, 0.001};
  const std::vector<BucketTiming> ok{{1000, 0.02}};
  CHECK_NOTHROW(ddp::predict_step(t, ok, 2, kSlow));
  CHECK_THROWS_WITH(ddp::predict_step({-0.01, 0.02, 0.001}, ok, 2, kSlow),
                    Contains("forward_s must be a finite time >= 0"));
  CHECK_THROWS_WITH(ddp::predict_step({0.01, std::nan(""), 0.001}, ok, 2, kSlow),
                    Contains("backward_s"));
  CHECK_THROWS_WITH(ddp::predict_step({0.01, 0.02, kInf}, ok, 2, kSlow), Contains("optimizer_s"));
  CHECK_THROWS_WITH(ddp::predict_step(t, ok, 0, kSlow), Contains("world must be >= 1, got 0"));
  CHECK_THROWS_WITH(ddp::predict_step(t, ok, 2, {0, 1e-3}), Contains("bandwidth must be > 0"));
  CHECK_THROWS_WITH(ddp::predict_step(t, ok, 2, {1e6, -1e-3}), Contains("latency must be"));
  CHECK_THROWS_WITH(ddp::predict_step(t, std::vector<BucketTiming>{}, 2, kSlow),
                    Contains("no buckets"));
  CHECK_THROWS_WITH(
      ddp::predict_step(t, std::vector<BucketTiming>{{1000, 0.0}, {0, 0.01}}, 2, kSlow),
      Contains("bucket 1 has 0 bytes"));
  CHECK_THROWS_WITH(ddp::predict_step(t, std::vector<BucketTiming>{{1000, 0.03}}, 2, kSlow),
                    Contains("bucket 0 is ready at 0.03 s, outside backward [0, 0.02] s"));
  CHECK_THROWS_WITH(ddp::predict_step(t, std::vector<BucketTiming>{{1000, -0.001}}, 2, kSlow),
                    Contains("outside backward"));
  CHECK_THROWS_WITH(ddp::ring_all_reduce_seconds(-1, 2, kSlow), Contains("bytes must be >= 0"));
}

TEST_CASE("the model reads links in the link emulation's grammar", "[cost_model][link]") {
  const RingLink a = ddp::parse_ring_link("1gbit,50us");
  CHECK(a.bandwidth_bytes_per_s == Approx(125e6));
  CHECK(a.latency_s == Approx(50e-6));
  const RingLink b = ddp::parse_ring_link("100mbit,1.5ms");
  CHECK(b.bandwidth_bytes_per_s == Approx(12.5e6));
  CHECK(b.latency_s == Approx(1.5e-3));
  const RingLink c = ddp::parse_ring_link("125MB/s,0us");  // bytes per second too
  CHECK(c.bandwidth_bytes_per_s == Approx(125e6));
  CHECK(c.latency_s == 0);
  CHECK(ddp::to_string(a) == "1 Gbit/s, 50 us");
  CHECK(ddp::to_string(b) == "100 Mbit/s, 1.5 ms");
  CHECK(ddp::to_string({kInf, 0}) == "unlimited, 0 us");
  // The same values as the emulation (its own tests cover the grammar and its errors).
  const ddp::LinkEmulation e = ddp::parse_link_emulation("100mbit,1.5ms");
  CHECK(b.bandwidth_bytes_per_s == e.bytes_per_second);
  CHECK(e.describe() == ddp::to_string(b));  // and the same words (describe_link)
  for (const char* bad : {"", "1gbit", ",50us", "0gbit,50us", "1gbit,-5us"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH(ddp::parse_ring_link(bad, "--link"), Contains("--link"));
  }
}

// ---- Topology: nodes of several ranks (Note [Two levels], dist/two_level_group.cpp) ----

TEST_CASE("topology: the flat ring waits for the network, two levels send less over it",
          "[cost_model][topology]") {
  // 2 nodes of 2 ranks, 8 MB a rank; inside a node 10 GB/s, between nodes 125 MB/s
  // (1 Gbit/s); no latencies.
  const ddp::Topology t{2, 2, {10e9, 0}, {125e6, 0}};
  // Flat: 2(4-1)/4 = 1.5 x 8 MB over the network's 125 MB/s = 96 ms.
  CHECK(ddp::flat_ring_seconds(8'000'000, t) == Approx(0.096));
  // Two levels: in the node, 1 step of 4 MB at 10 GB/s, twice: 0.8 ms; across, a ring of 2
  // over 4 MB: 1 x 4 MB / 125 MB/s = 32 ms, each ring on a link of its own.
  CHECK(ddp::two_level_seconds(8'000'000, t, false) == Approx(0.0328));
  // Both rings through one card a node: twice the bytes through it, 64 ms.
  CHECK(ddp::two_level_seconds(8'000'000, t, true) == Approx(0.0648));
  // Latencies: flat 6 steps of the network's; two levels 1 + 2 + 1 steps.
  const ddp::Topology slow{2, 2, {kInf, 1e-6}, {kInf, 1e-3}};
  CHECK(ddp::flat_ring_seconds(1000, slow) == Approx(6e-3));
  CHECK(ddp::two_level_seconds(1000, slow, false) == Approx(2e-3 + 2e-6));
  // One node: both are one ring over the node's links, and two levels add nothing across.
  const ddp::Topology one{1, 4, {1e6, 0}, {1, 0}};
  CHECK(ddp::flat_ring_seconds(4000, one) == Approx(0.006));
  CHECK(ddp::two_level_seconds(4000, one, false) == Approx(0.006));
}

TEST_CASE("topology: bytes over each kind of link, counted by hand", "[cost_model][topology]") {
  // 2 nodes of 2, S = 4000 bytes. Flat: every rank sends 1.5 S = 6000; ranks 1 and 3
  // send to the other node.
  const ddp::Topology t{2, 2, {1, 0}, {1, 0}};
  const ddp::LinkBytes flat = ddp::flat_ring_bytes(4000, t);
  CHECK(flat.intra == 12000);
  CHECK(flat.inter == 12000);
  // Two levels: each rank sends 1 slice of 2000 in the reduce-scatter and 1 in the
  // all-gather (inside), and 2(2-1)/2 x 2000 across: 4 x 4000 inside, 4 x 2000 between.
  const ddp::LinkBytes two = ddp::two_level_bytes(4000, t);
  CHECK(two.intra == 16000);
  CHECK(two.inter == 8000);
  // 4 nodes of 8 ranks, S = 32 MB: the network carries 2(N-1)·S = 192 MB in all with two
  // levels, against N · 2(W-1)/W · S = 4 x 62 MB = 248 MB over 4 links with the flat ring.
  const ddp::Topology big{4, 8, {1, 0}, {1, 0}};
  CHECK(ddp::two_level_bytes(32'000'000, big).inter == Approx(192e6));
  CHECK(ddp::flat_ring_bytes(32'000'000, big).inter == Approx(4 * 2.0 * 31 / 32 * 32e6));
  // One node: nothing between nodes.
  CHECK(ddp::flat_ring_bytes(4000, {1, 4, {1, 0}, {1, 0}}).inter == 0);
  CHECK(ddp::two_level_bytes(4000, {1, 4, {1, 0}, {1, 0}}).inter == 0);
  CHECK_THROWS_WITH(ddp::two_level_bytes(4000, {0, 4, {1, 0}, {1, 0}}),
                    Contains("nodes and per_node must be >= 1"));
}
