// The DDP cost model (chapter 07): the ring all-reduce's time, the bucketed step's
// timeline, and the `--link` parser. See cost_model.hpp for the API.
#include "dist/parallel/cost_model.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "dist/link_emulation.hpp"

#include "base/error.hpp"

namespace ddp {

// Note [The DDP cost model]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// One rank's step. Backward produces the gradients last layer first; the Reducer groups
// them into buckets in that order and launches a bucket's all-reduce when its last
// gradient is ready. The buckets share one link, so their all-reduces run one after
// another, in launch order; the optimizer waits for all of them:
//
//   start_k = max(ready_k, end_{k-1})          end_k = start_k + ring(S_k)
//   step    = forward + max(backward, end_last) + optimizer
//   ring(S) = 2(W-1)·alpha + 2(W-1)/W · S / B
//
//   backward  |==================================================|
//   ready         ^0          ^1             ^2                 ^3
//   link           [0]         [----1----]    [-----2-----]      [----3----]
//                                                                |exposed  |
//
// Chapter 06 (naive) waits for backward, then all-reduces everything at once:
// forward + backward + ring(S_total) + optimizer. The efficiency is weak scaling: each
// of the W ranks does the one-process step's work (the same batch per rank), so W ranks
// do W steps' work in one step, and efficiency = one-process step / W-rank step.
//
// What the formula leaves out, and where it fails:
// * Compute is not slowed by communication. On a GPU, NCCL's kernels take a few SMs and
//   some memory bandwidth from backward; on a shared CPU (2 cores, several ranks and their
//   communication threads) the ring's copies and sums take the very cores backward runs
//   on, so overlap buys less than predicted there, or nothing.
// * Latency is paid per bucket: 2(W-1)·alpha each, so many small buckets lose on a slow
//   (high-latency) link, as the exercise table shows. A backend's software overhead per
//   collective (a thread hand-off, a wake-up) belongs in alpha: measure alpha with that
//   backend's small all-reduces, not from the wire's specification.
// * The last bucket can never be hidden: it is ready when backward ends, so at least
//   ring(S_last) is exposed. A smaller last bucket hides more, at one latency more.
// * Ready times: with only sizes known, gradients are assumed to come out at a uniform
//   byte rate. Convolutional nets break that: their last layers hold most parameters and
//   come first in backward, while the early high-resolution layers take most of its time,
//   so bytes come out early and the uniform rate is pessimistic. Measure them (a trace)
//   and use ready_at_fractions.
// * One bandwidth for the ring: a ring moves as fast as its slowest link (nccl-tests'
//   PERFORMANCE.md: the bus bandwidth reflects the hardware bottleneck), across nodes the
//   network card; tree algorithms, several cards or in-network reduction change B or the
//   formula.
// * Every rank equally fast. A step lasts as long as its slowest rank; stragglers, data
//   loading and the forward's buffer broadcast are not in it.

namespace {

void check_time(double seconds, const char* what) {
  DDP_CHECK(std::isfinite(seconds) && seconds >= 0, "predict_step: ", what,
            " must be a finite time >= 0 seconds, got ", seconds);
}

void check_link(const RingLink& link, const char* caller) {
  DDP_CHECK(link.bandwidth_bytes_per_s > 0, caller,
            ": link bandwidth must be > 0 bytes/s (+infinity for a free link), got ",
            link.bandwidth_bytes_per_s);
  DDP_CHECK(std::isfinite(link.latency_s) && link.latency_s >= 0, caller,
            ": link latency must be a finite time >= 0 seconds, got ", link.latency_s);
}

}  // namespace

// ---- The link ------------------------------------------------------------------------

RingLink parse_ring_link(std::string_view text, std::string_view what) {
  // One grammar for links: the tcp backend's DDP_TCP_LINK (dist/link_emulation.hpp), so
  // that what the model reads is what the emulation runs.
  const LinkEmulation link = parse_link_emulation(std::string(text), std::string(what).c_str());
  return RingLink{link.bytes_per_second, std::chrono::duration<double>(link.latency).count()};
}

std::string to_string(const RingLink& link) {
  return describe_link(link.bandwidth_bytes_per_s, link.latency_s);
}

double ring_all_reduce_seconds(std::int64_t bytes, int world, const RingLink& link) {
  DDP_CHECK(bytes >= 0, "ring_all_reduce_seconds: bytes must be >= 0, got ", bytes);
  DDP_CHECK(world >= 1, "ring_all_reduce_seconds: world must be >= 1, got ", world);
  check_link(link, "ring_all_reduce_seconds");
  if (world == 1) return 0;  // nothing to exchange
  const double steps = 2.0 * (world - 1);
  return steps * link.latency_s +
         steps / world * static_cast<double>(bytes) / link.bandwidth_bytes_per_s;
}

// ---- The step ------------------------------------------------------------------------

StepPrediction predict_step(const StepTimes& times, std::span<const BucketTiming> buckets,
                            int world, const RingLink& link) {
  check_time(times.forward_s, "forward_s");
  check_time(times.backward_s, "backward_s");
  check_time(times.optimizer_s, "optimizer_s");
  DDP_CHECK(world >= 1, "predict_step: world must be >= 1, got ", world);
  check_link(link, "predict_step");
  DDP_CHECK(!buckets.empty(), "predict_step: no buckets (a model with gradients has at least one)");

  StepPrediction p;
  std::int64_t total_bytes = 0;
  double link_free = 0;  // end_{k-1}: when the link has finished the previous bucket
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    const BucketTiming& b = buckets[k];
    DDP_CHECK(b.bytes > 0, "predict_step: bucket ", k, " has ", b.bytes,
              " bytes; a bucket holds at least one gradient");
    DDP_CHECK(std::isfinite(b.ready_s) && b.ready_s >= 0 && b.ready_s <= times.backward_s,
              "predict_step: bucket ", k, " is ready at ", b.ready_s, " s, outside backward [0, ",
              times.backward_s, "] s");
    const double ring = ring_all_reduce_seconds(b.bytes, world, link);
    p.start_s.push_back(std::max(b.ready_s, link_free));
    p.end_s.push_back(p.start_s.back() + ring);
    link_free = p.end_s.back();
    p.comm_s += ring;
    total_bytes += b.bytes;
  }
  p.one_process_s = times.forward_s + times.backward_s + times.optimizer_s;
  p.step_s = times.forward_s + std::max(times.backward_s, link_free) + times.optimizer_s;
  p.naive_step_s = p.one_process_s + ring_all_reduce_seconds(total_bytes, world, link);
  p.exposed_comm_s = p.step_s - p.one_process_s;
  // A step of no time at all (every time 0) scales perfectly.
  p.efficiency = p.step_s > 0 ? p.one_process_s / p.step_s : 1.0;
  p.naive_efficiency = p.naive_step_s > 0 ? p.one_process_s / p.naive_step_s : 1.0;
  return p;
}

// ---- Helpers for when only sizes are known -------------------------------------------

std::vector<std::int64_t> split_into_buckets(std::int64_t total_bytes, std::int64_t cap_bytes,
                                             std::int64_t first_cap_bytes) {
  DDP_CHECK(total_bytes > 0, "split_into_buckets: total_bytes must be > 0, got ", total_bytes);
  DDP_CHECK(cap_bytes > 0 && first_cap_bytes > 0,
            "split_into_buckets: the caps must be > 0 bytes, got cap ", cap_bytes,
            " and first cap ", first_cap_bytes);
  std::vector<std::int64_t> sizes{std::min(total_bytes, first_cap_bytes)};
  for (std::int64_t left = total_bytes - sizes.front(); left > 0; left -= sizes.back()) {
    sizes.push_back(std::min(left, cap_bytes));
  }
  return sizes;
}

std::vector<BucketTiming> ready_at_fractions(std::span<const std::int64_t> bytes,
                                             std::span<const double> fractions, double backward_s) {
  DDP_CHECK(bytes.size() == fractions.size(), "ready_at_fractions: ", bytes.size(),
            " bucket sizes but ", fractions.size(), " ready fractions");
  check_time(backward_s, "backward_s");
  std::vector<BucketTiming> buckets;
  for (std::size_t k = 0; k < bytes.size(); ++k) {
    DDP_CHECK(fractions[k] >= 0 && fractions[k] <= 1, "ready_at_fractions: bucket ", k,
              " is ready at fraction ", fractions[k], " of backward, outside [0, 1]");
    buckets.push_back({bytes[k], fractions[k] * backward_s});
  }
  return buckets;
}

std::vector<BucketTiming> ready_at_uniform_rate(std::span<const std::int64_t> bytes,
                                                double backward_s) {
  const std::int64_t total = std::accumulate(bytes.begin(), bytes.end(), std::int64_t{0});
  DDP_CHECK(total > 0, "ready_at_uniform_rate: the buckets hold ", total,
            " bytes; need at least one byte");
  std::vector<double> fractions;
  std::int64_t out = 0;  // bytes backward has produced when bucket k is complete
  for (const std::int64_t b : bytes) {
    DDP_CHECK(b > 0, "ready_at_uniform_rate: a bucket of ", b, " bytes; each must hold > 0");
    out += b;
    fractions.push_back(static_cast<double>(out) / static_cast<double>(total));
  }
  return ready_at_fractions(bytes, fractions, backward_s);
}

// ---- Topology ----------------------------------------------------------------------------

namespace {

void check_topology(const Topology& t, const char* who) {
  DDP_CHECK(t.nodes >= 1 && t.per_node >= 1, who, ": nodes and per_node must be >= 1, got ",
            t.nodes, " and ", t.per_node);
  check_link(t.intra, who);
  check_link(t.inter, who);
}

}  // namespace

double flat_ring_seconds(std::int64_t bytes, const Topology& topology) {
  check_topology(topology, "flat_ring_seconds");
  const RingLink& slowest = topology.nodes > 1 ? topology.inter : topology.intra;
  return ring_all_reduce_seconds(bytes, topology.nodes * topology.per_node, slowest);
}

double two_level_seconds(std::int64_t bytes, const Topology& topology, bool shared_nic) {
  check_topology(topology, "two_level_seconds");
  DDP_CHECK(bytes >= 0, "two_level_seconds: bytes must be >= 0, got ", bytes);
  const int local = topology.per_node;
  const double slice = static_cast<double>(bytes) / local;
  // Reduce-scatter and all-gather in the node: each is half a ring of L ranks, L-1 steps
  // that each move one slice.
  const double in_node = (local - 1) * topology.intra.latency_s +
                         (local - 1) * slice / topology.intra.bandwidth_bytes_per_s;
  // Across: a ring of N over a slice; L of them through one card when it is shared.
  RingLink across = topology.inter;
  if (shared_nic) across.bandwidth_bytes_per_s /= local;
  const double between = ring_all_reduce_seconds(static_cast<std::int64_t>(slice),
                                                 topology.nodes, across);
  return 2 * in_node + between;
}

LinkBytes flat_ring_bytes(std::int64_t bytes, const Topology& topology) {
  check_topology(topology, "flat_ring_bytes");
  const int world = topology.nodes * topology.per_node;
  // Every rank sends 2(W-1)/W · bytes to its right neighbour; N of the W links cross
  // nodes (the last rank of each node sends to the next node's first), unless N = 1.
  const double per_rank = 2.0 * (world - 1) / world * static_cast<double>(bytes);
  const int crossing = topology.nodes > 1 ? topology.nodes : 0;
  return {per_rank * (world - crossing), per_rank * crossing};
}

LinkBytes two_level_bytes(std::int64_t bytes, const Topology& topology) {
  check_topology(topology, "two_level_bytes");
  const int local = topology.per_node, nodes = topology.nodes;
  const double world = static_cast<double>(local) * nodes;
  const double slice = static_cast<double>(bytes) / local;
  // Each rank: (L-1)/L · bytes in the reduce-scatter and as much in the all-gather, inside
  // its node; 2(N-1)/N · slice across.
  return {world * 2.0 * (local - 1) * slice, world * 2.0 * (nodes - 1) / nodes * slice};
}

}  // namespace ddp
