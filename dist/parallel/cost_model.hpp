// The cost model of a DDP step, chapter 07: how long a data-parallel training step takes
// when the gradients' all-reduce runs bucket by bucket beside backward, predicted on paper
// from the step's compute times, the bucket sizes and a link (bandwidth, latency).
//
//   RingLink link = parse_ring_link("1gbit,50us");
//   auto sizes = split_into_buckets(4 * 77754, 25 * kMiB, 1 * kMiB);
//   StepPrediction p = predict_step({0.030, 0.062, 0.004},
//                                   ready_at_uniform_rate(sizes, 0.062), 2, link);
//   // p.step_s, p.naive_step_s, p.exposed_comm_s, p.efficiency
//
// Pure arithmetic: it measures nothing and talks to no process group; the times come from
// a benchmark or a trace (bench_cost_model prints the tables). Its assumptions, and where
// they fail, are Note [The DDP cost model] in cost_model.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ddp {

// A link of the ring. bandwidth: the bytes per second one rank sends to its neighbour
// while every rank does the same (nccl-tests' "bus bandwidth"; +infinity = free);
// latency: the fixed cost of one of the ring's dependent steps, in seconds.
struct RingLink {
  double bandwidth_bytes_per_s = 0;
  double latency_s = 0;
};

// "1gbit,50us" -> {125e6 bytes/s, 50e-6 s}, in the grammar of the tcp backend's link
// emulation (DDP_TCP_LINK, dist/link_emulation.hpp: its parser). Throws ddp::Error naming
// `what` (the flag or variable), the text and the expected form.
RingLink parse_ring_link(std::string_view text, std::string_view what = "--link");

// {125e6, 50e-6} -> "1 Gbit/s, 50 us" (describe_link, dist/link_emulation.hpp).
std::string to_string(const RingLink& link);

// A ring all-reduce of `bytes` over `world` ranks: 2(W-1) dependent steps, each moving
// bytes/W to the next rank: 2(W-1)·latency + 2(W-1)/W · bytes / bandwidth. 0 at W = 1.
double ring_all_reduce_seconds(std::int64_t bytes, int world, const RingLink& link);

// The compute of one step on one rank, measured without communication (seconds).
struct StepTimes {
  double forward_s = 0;
  double backward_s = 0;
  double optimizer_s = 0;
};

// A bucket in launch order: its size and when backward has produced its last gradient,
// in seconds from the start of backward (0 <= ready_s <= backward_s).
struct BucketTiming {
  std::int64_t bytes = 0;
  double ready_s = 0;
};

struct StepPrediction {
  double one_process_s = 0;     // forward + backward + optimizer: the step without peers
  double step_s = 0;            // bucketed, overlapped with backward (chapter 07)
  double naive_step_s = 0;      // one all-reduce of everything after backward (chapter 06)
  double comm_s = 0;            // the buckets' ring times added up (the link's busy time)
  double exposed_comm_s = 0;    // step_s - one_process_s: communication backward did not hide
  double efficiency = 0;        // one_process_s / step_s (weak scaling, see the Note)
  double naive_efficiency = 0;  // one_process_s / naive_step_s
  // Per bucket, seconds from the start of backward: when its all-reduce starts and ends.
  std::vector<double> start_s, end_s;
};

// The step of one rank among `world` (the textbook function, Note [The DDP cost model]):
// bucket k starts at max(ready_k, end_{k-1}) and takes ring_all_reduce_seconds(bytes_k);
// step = forward + max(backward, end_last) + optimizer. Throws ddp::Error on times that
// are negative or not finite, an empty or empty-bucket list, a ready time outside
// backward, world < 1, or a link with bandwidth <= 0 or latency < 0.
StepPrediction predict_step(const StepTimes& times, std::span<const BucketTiming> buckets,
                            int world, const RingLink& link);

// ---- Helpers for when only sizes are known ------------------------------------------------

// `total_bytes` cut into buckets in launch order: the first at most `first_cap_bytes`, the
// others at most `cap_bytes`, the last what remains. An idealisation of the Reducer's
// assignment, which closes a bucket at parameter boundaries (a parameter is never split):
// good when parameters are small next to the cap. Both caps >= total: one bucket.
std::vector<std::int64_t> split_into_buckets(std::int64_t total_bytes, std::int64_t cap_bytes,
                                             std::int64_t first_cap_bytes);

// Ready times when only the sizes are known: gradients come out of backward at a uniform
// byte rate, so bucket k is ready when the bytes of buckets 0..k are out:
// ready_k = backward_s · (bytes_0 + ... + bytes_k) / total.
std::vector<BucketTiming> ready_at_uniform_rate(std::span<const std::int64_t> bytes,
                                                double backward_s);

// Ready times given as fractions of backward (from a trace): ready_k = fraction_k · backward_s.
std::vector<BucketTiming> ready_at_fractions(std::span<const std::int64_t> bytes,
                                             std::span<const double> fractions, double backward_s);

// ---- Topology: nodes of several ranks (chapter 07, "Topology") ------------------------

// A cluster of `nodes` nodes of `per_node` ranks, placed node by node (ranks 0..L-1 on the
// first): `intra` is a link inside a node (shared memory, NVLink), `inter` one between
// nodes (the network).
struct Topology {
  int nodes = 1;
  int per_node = 1;
  RingLink intra;
  RingLink inter;
};

// The flat ring over all W = nodes · per_node ranks: its 2(W-1) steps each move bytes/W
// over every link at once and wait for the slowest (inter, when there are two nodes or
// more): 2(W-1)·latency + 2(W-1)/W · bytes / bandwidth of that link.
double flat_ring_seconds(std::int64_t bytes, const Topology& topology);

// The two-level all-reduce (dist/two_level_group.hpp): a reduce-scatter in the node, (L-1)
// steps of bytes/L over intra; a ring all-reduce of bytes/L across the nodes over inter;
// an all-gather in the node like the reduce-scatter. `shared_nic`: false when each of the
// L rings across has a link of its own (the tcp backend's link emulation); true when they
// share one network card a node, whose bandwidth is inter's: L times the bytes through it.
double two_level_seconds(std::int64_t bytes, const Topology& topology, bool shared_nic);

// The bytes one all-reduce of `bytes` on every rank sends, all ranks together, over links
// inside the nodes and over links between them (payload only: the backend's few header
// bytes a collective are not counted). Exact when W (flat) or L·N (two-level) divides
// the element count (the rings cut the tensor into that many equal chunks), and for rings
// that run as rings: the tcp group sends a small all-reduce, (W-1)·S at most
// ProcessGroupTcp::kSmallAllReduceBytes, to every rank in W-1 steps instead.
struct LinkBytes {
  double intra = 0;
  double inter = 0;
};
LinkBytes flat_ring_bytes(std::int64_t bytes, const Topology& topology);
LinkBytes two_level_bytes(std::int64_t bytes, const Topology& topology);

}  // namespace ddp
