// ch07_topology: the flat ring against the two-level all-reduce on nodes of several ranks,
// timed, with the bytes each kind of link carried counted and compared with the cost
// model's formula. Chapter 07, "Topology".
//
//   sbatch launch/ch07_topology.sh                  # 2 nodes x 2 ranks, the real network
//   DDP_TCP_LINK=1gbit,50us DDP_TCP_LINK_SCOPE=between-hosts sbatch launch/ch07_topology.sh
//   ddprun --nproc-per-node 4 build/release/bin/ch07_topology --layout 0,0,1,1   # one machine
//
// The nodes are the hosts, or --layout's pretend ones. For each size (--sizes, in MiB a
// rank) rank 0 prints the median time of --reps all-reduces each way, interleaved, and,
// when DDP_TCP_LINK says what the network is, the cost model's prediction for both
// (dist/parallel/cost_model.hpp; the links inside a node taken as free). Then the bytes
// all ranks sent over links inside the nodes and between them in one all-reduce of the
// last size, counted on the tcp backend's sockets, beside the formula; a count that
// differs from it ends the program with exit code 1, and "ok" means at least one was
// compared. Links that move bytes through shared memory (DDP_TCP_SHM, the default on one
// host) send nothing over a socket and are not counted. With --layout on one machine,
// DDP_TCP_LINK_SCOPE=between-hosts paces nothing (the hosts are real, the nodes are not):
// use DDP_TCP_LINK alone there, which paces every link, the nodes' too.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "dist/init.hpp"
#include "dist/link_emulation.hpp"
#include "dist/parallel/cost_model.hpp"
#include "dist/process_group_tcp.hpp"
#include "dist/two_level_group.hpp"
#include "tensor/tensor.hpp"

using namespace ddp;

namespace {

struct Options {
  std::string backend = "tcp";
  std::string layout;  // "": by host
  std::vector<double> sizes_mib = {1, 16};
  int reps = 5;
};

[[noreturn]] void usage(const std::string& what) {
  std::fprintf(stderr,
               "ch07_topology: %s\nusage: ch07_topology [--backend tcp|mpi] [--layout 0,0,1,1] "
               "[--sizes MIB,MIB,...] [--reps N]\n",
               what.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage(flag + " needs a value");
    const std::string v = argv[++i];
    if (flag == "--backend") {
      o.backend = v;
    } else if (flag == "--layout") {
      o.layout = v;
    } else if (flag == "--sizes") {
      o.sizes_mib.clear();
      std::size_t start = 0;
      for (;;) {
        const std::size_t comma = v.find(',', start);
        const std::string item = v.substr(start, comma - start);
        char* end = nullptr;
        const double mib = std::strtod(item.c_str(), &end);
        if (item.empty() || *end != '\0' || !(mib > 0)) {
          usage("--sizes '" + v + "': expected sizes in MiB above 0, separated by commas");
        }
        o.sizes_mib.push_back(mib);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (flag == "--reps") {
      o.reps = std::atoi(v.c_str());
      if (o.reps < 1) usage("--reps '" + v + "': expected a count >= 1");
    } else {
      usage("unknown flag " + flag);
    }
  }
  return o;
}

// How long `collective` took on the slowest rank (all start after a barrier).
template <typename Collective>
double seconds(ProcessGroup& timer, Collective&& collective) {
  timer.barrier()->wait();
  const auto t0 = std::chrono::steady_clock::now();
  collective();
  Tensor took = full({1}, static_cast<float>(
                              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                                  .count()));
  timer.all_reduce(took, ReduceOp::Max)->wait();
  return took.data<float>()[0];
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::int64_t sent(ProcessGroup& group) {
  const auto* tcp = dynamic_cast<const ProcessGroupTcp*>(&group);
  return tcp ? tcp->payload_bytes_sent() : 0;
}

// Whether this group's bytes go over its sockets, where payload_bytes_sent counts them:
// not through shared memory, and not on another backend. A group of one sends nothing.
bool counted(ProcessGroup& group) {
  const auto* tcp = dynamic_cast<const ProcessGroupTcp*>(&group);
  return group.size() == 1 || (tcp != nullptr && !tcp->uses_shared_memory());
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  try {
    InitOptions init;
    init.backend = options.backend;
    std::unique_ptr<ProcessGroup> world = init_process_group(init);
    const NodeLayout layout = options.layout.empty()
                                  ? layout_by_host(*world)
                                  : parse_node_layout(options.layout, world->size(), "--layout");
    const std::string banner = options.backend == "tcp"
                                   ? dynamic_cast<ProcessGroupTcp&>(*world).description()
                                   : options.backend;
    ProcessGroupTwoLevel two(std::move(world), layout);
    const bool speaker = two.rank() == 0;
    const int nodes = layout.nodes(), local = two.node().size(), size = two.size();
    const std::optional<LinkEmulation> network = link_emulation_from_env();
    Topology topology{nodes, local, {std::numeric_limits<double>::infinity(), 0}, {1, 0}};
    if (network) {
      topology.inter = {network->bytes_per_second,
                        std::chrono::duration<double>(network->latency).count()};
    }
    if (speaker) {
      std::printf("ch07_topology: %d ranks, %s, over %s; median of %d\n", size,
                  layout.describe().c_str(), banner.c_str(), options.reps);
      std::printf("%10s %12s %12s %9s   %26s%s\n", "MiB a rank", "flat ring", "two levels",
                  "speed-up", "its steps: in, across, in",
                  network ? "   model: flat    two levels" : "");
    }
    std::int64_t last_n = 0;
    for (const double mib : options.sizes_mib) {
      // A multiple of W·L elements: every ring's chunks are equal, and the formula exact.
      const std::int64_t unit = std::int64_t{size} * local;
      const std::int64_t n =
          std::max<std::int64_t>(unit, std::llround(mib * (1 << 20) / 4 / unit) * unit);
      last_n = n;
      Tensor t = zeros({n});
      Tensor slice = zeros({n / local});
      // The flat ring, the two levels, and the two levels' steps one by one.
      std::vector<double> flat, levels, scatter, across, gather;
      ProcessGroup& timer = two.flat();
      for (int rep = 0; rep < options.reps; ++rep) {
        flat.push_back(seconds(timer, [&] { two.flat().all_reduce(t)->wait(); }));
        levels.push_back(seconds(timer, [&] { two.all_reduce(t)->wait(); }));
        scatter.push_back(seconds(timer, [&] { two.node().reduce_scatter(slice, t)->wait(); }));
        across.push_back(seconds(timer, [&] { two.across().all_reduce(slice)->wait(); }));
        gather.push_back(seconds(timer, [&] { two.node().all_gather(t, slice)->wait(); }));
      }
      if (speaker) {
        const double f = median(flat), l = median(levels);
        std::printf("%10.2f %9.2f ms %9.2f ms %8.2fx   %8.2f %8.2f %8.2f ms", n * 4.0 / (1 << 20),
                    f * 1e3, l * 1e3, f / l, median(scatter) * 1e3, median(across) * 1e3,
                    median(gather) * 1e3);
        if (network) {
          std::printf("   %8.2f ms  %8.2f ms", flat_ring_seconds(n * 4, topology) * 1e3,
                      two_level_seconds(n * 4, topology, false) * 1e3);
        }
        std::printf("\n");
      }
    }

    // The bytes of one all-reduce of the last size, by kind of link, over all ranks.
    Tensor t = zeros({last_n});
    const bool crosses = layout.node_of_rank[two.rank()] !=
                         layout.node_of_rank[(two.rank() + 1) % size];
    const std::int64_t f0 = sent(two.flat()), n0 = sent(two.node()), a0 = sent(two.across());
    two.flat().all_reduce(t)->wait();
    two.all_reduce(t)->wait();
    Tensor mine = zeros({4}, TensorOptions{DType::Int64});
    std::int64_t* m = mine.data<std::int64_t>();
    m[crosses ? 1 : 0] = sent(two.flat()) - f0;
    m[2] = sent(two.node()) - n0;
    m[3] = sent(two.across()) - a0;
    // Whether every rank's groups counted: the flat one, the node's, the one across.
    Tensor all_counted = full({3}, 0.0f);
    all_counted.data<float>()[0] = counted(two.flat()) ? 1.0f : 0.0f;
    all_counted.data<float>()[1] = counted(two.node()) ? 1.0f : 0.0f;
    all_counted.data<float>()[2] = counted(two.across()) ? 1.0f : 0.0f;
    two.flat().all_reduce(mine)->wait();
    two.flat().all_reduce(all_counted, ReduceOp::Min)->wait();
    const float* c = all_counted.data<float>();
    const LinkBytes flat = flat_ring_bytes(last_n * 4, topology);
    const LinkBytes levels = two_level_bytes(last_n * 4, topology);
    // Why a row is not compared ("" when it is): its group went through shared memory or
    // another backend, or (the flat ring) the ranks are not placed node by node, as the
    // formula has them (ranks 0..L-1 on the first node), so more of its links cross nodes.
    const bool node_by_node =
        std::is_sorted(layout.node_of_rank.begin(), layout.node_of_rank.end());
    auto why_not = [&](float counted_everywhere) -> std::string {
      if (counted_everywhere == 1) return "";
      return options.backend == "tcp" ? "through shared memory: not counted"
                                      : "not the tcp backend: not counted";
    };
    std::string flat_why = why_not(c[0]);
    if (flat_why.empty() && !node_by_node) flat_why = "ranks not placed node by node: not compared";
    struct Row {
      const char* name;
      std::int64_t got;
      double want;
      std::string why_not;
    };
    const Row rows[] = {{"flat ring, inside nodes", m[0], flat.intra, flat_why},
                        {"flat ring, between nodes", m[1], flat.inter, flat_why},
                        {"two levels, inside nodes", m[2], levels.intra, why_not(c[1])},
                        {"two levels, between nodes", m[3], levels.inter, why_not(c[2])}};
    bool all_equal = true;
    int compared = 0;
    if (speaker) {
      std::printf("bytes sent by all ranks in one all-reduce of %.2f MiB a rank:\n",
                  last_n * 4.0 / (1 << 20));
    }
    for (const Row& row : rows) {
      const bool equal = static_cast<double>(row.got) == row.want;
      if (row.why_not.empty()) {
        all_equal = all_equal && equal;
        ++compared;
      }
      if (!speaker) continue;
      if (row.why_not.empty()) {
        std::printf("  %-27s %12lld  formula %12.0f  %s\n", row.name,
                    static_cast<long long>(row.got), row.want, equal ? "equal" : "DIFFERENT");
      } else {
        std::printf("  %-27s %12s  formula %12.0f  (%s)\n", row.name, "-", row.want,
                    row.why_not.c_str());
      }
    }
    two.barrier()->wait();
    if (speaker) {
      std::printf("ch07_topology: %s\n",
                  !all_equal     ? "FAIL: counts differ"
                  : compared > 0 ? "ok"
                                 : "no byte counted (shared memory, or not tcp): times only");
    }
    std::fflush(stdout);
    two.destroy();
    return all_equal ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ch07_topology: FAIL: %s\n", e.what());
    std::fflush(stderr);
    std::_Exit(1);
  }
}
