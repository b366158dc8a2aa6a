// bench_allreduce: how fast a ProcessGroup all-reduces float32 (sum, in place), in the
// nccl-tests format, next to the Open MPI and gloo anchors measured on the dev box
// (bench/anchors/RESULTS.md, section 4). Chapter 05 sends readers here.
//
//   ddprun --nproc-per-node 2 build/<dir>/bin/bench_allreduce --backend tcp
//   mpirun -np 2 --mca pml ob1 --mca btl self,tcp build/<dir>/bin/bench_allreduce --backend mpi
//   bench/allreduce.sh    # the whole comparison: tcp vs Open MPI tcp vs Open MPI shm
// It checks each size's sum once, then prints numbers and asserts nothing about speed:
// speed is read as ratios, never tested.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <poll.h>

#include "bench/anchor_json.hpp"
#include "bench/bench_args.hpp"
#include "bench/timing.hpp"
#include "dist/bandwidth.hpp"
#include "base/deadline.hpp"
#include "dist/init.hpp"
#include "dist/process_group.hpp"
#include "dist/process_group_tcp.hpp"
#include "dist/socket.hpp"
#include "base/error.hpp"
#include "base/units.hpp"
#include "tensor/tensor.hpp"

namespace {

// ---- Options ---------------------------------------------------------------------------

struct Options {
  std::string backend = "tcp";
  std::string label;  // "tcp", "mpi-tcp", "mpi-shm"; derived from the backend when empty
  std::vector<std::int64_t> sizes = {4 * ddp::kKiB, 64 * ddp::kKiB, ddp::kMiB, 16 * ddp::kMiB,
                                     64 * ddp::kMiB};  // bytes
  int reps = 10;
  int timeout_s = static_cast<int>(
      std::chrono::duration_cast<std::chrono::seconds>(ddp::kDefaultTimeout).count());
  bool floor = false;  // also time the plain TCP traffic of each size (tcp backend only)
  std::optional<ddp::LinkEmulation> link;  // the tcp group's emulated link (DDP_TCP_LINK)
  std::string anchors = ddp::bench::default_anchors_dir();
};

std::int64_t parse_bytes(std::string_view flag, const std::string& text) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  DDP_CHECK(end != text.c_str() && *end == '\0' && v >= 4 && v % 4 == 0 && v <= (1LL << 30), flag,
            " ", text, ": expected a byte count, a multiple of 4 from 4 to 2^30");
  return v;
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::printf(
          "usage: bench_allreduce --backend tcp|mpi [--sizes BYTES,BYTES,...] [--reps N]\n"
          "                       [--label NAME] [--timeout-s S] [--anchors DIR] [--floor]\n"
          "run it under ddprun or mpirun; sizes default to 4 KiB, 64 KiB, 1, 16, 64 MiB\n"
          "--floor (tcp only): also time the ring's traffic on plain TCP links, nothing else,\n"
          "        hot (through 1 MiB of memory) and cold (through as much as it is)\n");
      std::exit(0);
    }
    if (flag == "--floor") {
      o.floor = true;
      continue;
    }
    DDP_CHECK(i + 1 < argc, flag, " needs a value\nhint: bench_allreduce --help");
    const std::string value = argv[++i];
    if (flag == "--backend") {
      o.backend = value;
    } else if (flag == "--label") {
      o.label = value;
    } else if (flag == "--anchors") {
      o.anchors = value;
    } else if (flag == "--reps") {
      o.reps = ddp::bench::parse_int(flag, value, 1);
    } else if (flag == "--timeout-s") {
      o.timeout_s = ddp::bench::parse_int(flag, value, 1);
    } else if (flag == "--sizes") {
      o.sizes.clear();
      for (std::size_t start = 0; start <= value.size();) {
        const std::size_t comma = std::min(value.find(',', start), value.size());
        o.sizes.push_back(parse_bytes(flag, value.substr(start, comma - start)));
        start = comma + 1;
      }
    } else {
      DDP_FAIL("unknown option ", flag, "\nhint: bench_allreduce --help");
    }
  }
  if (o.label.empty()) {
    // mpirun --mca btl self,tcp exports OMPI_MCA_btl to its ranks: that names the transport.
    const char* btl = std::getenv("OMPI_MCA_btl");
    const bool over_tcp = btl != nullptr && std::string_view(btl).find("tcp") != std::string::npos;
    o.label = o.backend != "mpi" ? o.backend : over_tcp ? "mpi-tcp" : "mpi-shm";
  }
  return o;
}

// ---- Anchors -----------------------------------------------------------------------------

// The anchor's protocol: back-to-back calls per repetition, fewer as the size grows.
int iterations_for(std::int64_t bytes) {
  if (bytes <= 64 * ddp::kKiB) return 1000;
  if (bytes <= ddp::kMiB) return 256;
  if (bytes <= 16 * ddp::kMiB) return 16;
  return 4;
}

// Median seconds per call by message size, from one anchor file's "results" array of
// flat objects ({"bytes": 4096, ..., "time_s_median": 4.4e-06, ...}). Not a JSON
// parser: it knows that shape (bench/torch/allreduce_gloo.py and
// bench/anchors/cpp/allreduce_mpi.cpp write it).
std::map<std::int64_t, double> read_allreduce_anchor(const std::string& file) {
  std::map<std::int64_t, double> times;
  std::ifstream in(file);
  if (!in) return times;
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  // The number after `"key":` inside the object that starts at `from`.
  const auto number_after = [&](std::size_t from, const char* quoted_key) -> std::optional<double> {
    const std::size_t close = text.find('}', from);
    const std::size_t at = text.find(quoted_key, from);
    if (at == std::string::npos || at > close) return std::nullopt;
    return std::strtod(text.c_str() + text.find(':', at) + 1, nullptr);
  };
  std::size_t pos = text.find("\"results\"");
  while (pos != std::string::npos && (pos = text.find('{', pos)) != std::string::npos) {
    const auto bytes = number_after(pos, "\"bytes\"");
    const auto median = number_after(pos, "\"time_s_median\"");
    if (bytes && median) times[static_cast<std::int64_t>(*bytes)] = *median;
    pos = text.find('}', pos);
  }
  return times;
}

struct Anchor {
  std::string name;                        // "MPI shm"
  std::map<std::int64_t, double> seconds;  // the faster median of run1 and run2, by bytes
};

// The three anchors at world size `np`; a missing file leaves its map empty.
std::vector<Anchor> load_anchors(const std::string& dir, int np) {
  const std::string n = std::to_string(np);
  const std::vector<std::pair<std::string, std::string>> files = {
      {"MPI shm", "allreduce_mpi_np" + n + "_shm.json"},
      {"MPI tcp", "allreduce_mpi_np" + n + "_tcp.json"},
      {"gloo", "allreduce_gloo_np" + n + ".json"}};
  std::vector<Anchor> anchors;
  for (const auto& [name, file] : files) {
    Anchor anchor{name, {}};
    for (const char* run : {"run1", "run2"}) {
      for (const auto& [bytes, s] : read_allreduce_anchor(dir + "/results/" + run + "/" + file)) {
        auto [it, fresh] = anchor.seconds.emplace(bytes, s);
        if (!fresh && s < it->second) it->second = s;
      }
    }
    anchors.push_back(std::move(anchor));
  }
  return anchors;
}

// ---- Measuring -------------------------------------------------------------------------

struct Result {
  std::int64_t bytes = 0;
  int iters = 0;
  ddp::bench::Timing per_call;  // seconds per all_reduce, min and median over repetitions
  std::optional<ddp::bench::Timing> hot, cold;  // seconds per StreamRing::stream of its traffic
};

// The anchors' protocol (RESULTS.md section 4) after the check: warm-up calls, then
// `reps` repetitions of `iters` back-to-back calls between barriers. A repetition takes
// as long as its slowest rank: its time is the maximum over ranks.
template <typename Call>
ddp::bench::Timing time_calls(ddp::ProcessGroup& group, int iters, const Options& o, Call call) {
  const std::chrono::seconds timeout(o.timeout_s);
  for (int k = 0; k < std::max(2, iters / 10); ++k) call();
  std::vector<double> per_call;
  ddp::Tensor slowest = ddp::empty({1});
  for (int r = 0; r < o.reps; ++r) {
    group.barrier()->wait(timeout);
    const double t0 = ddp::bench::now_seconds();
    for (int k = 0; k < iters; ++k) call();
    slowest.data<float>()[0] = static_cast<float>(ddp::bench::now_seconds() - t0);
    group.all_reduce(slowest, ddp::ReduceOp::Max)->wait(timeout);
    per_call.push_back(slowest.data<float>()[0] / iters);
  }
  return ddp::bench::summarize(per_call);
}

// One correctness check of the sum, then the timing.
Result measure(ddp::ProcessGroup& group, std::int64_t bytes, const Options& o) {
  const std::chrono::seconds timeout(o.timeout_s);
  const std::int64_t count = bytes / 4;
  const int world = group.size();
  ddp::Tensor t = ddp::full({count}, static_cast<double>(group.rank() + 1));
  group.all_reduce(t)->wait(timeout);
  const float want = static_cast<float>(world * (world + 1) / 2);
  const float* p = t.data<float>();
  for (std::int64_t i = 0; i < count; ++i) {
    DDP_CHECK(p[i] == want, "rank ", group.rank(), ": all_reduce of ", count, " floats: element ",
              i, " is ", p[i], ", expected ", want);
  }
  t.zero_();  // zeros from here on: a sum that grows by w every call would overflow to inf
  const int iters = iterations_for(bytes);
  return {bytes, iters, time_calls(group, iters, o, [&] { group.all_reduce(t)->wait(timeout); }),
          std::nullopt, std::nullopt};
}

// ---- The floor: what the links cost by themselves ------------------------------------
//
// A ring all-reduce of B bytes makes every rank send 2(n-1)/n B to its right neighbour
// and receive as much from its left. `--floor` times exactly that traffic on a ring of
// plain TCP connections of its own, with nothing else to do: no reduction, no waiting
// for a byte to arrive before passing it on, no header; sent in the tcp backend's
// slices. On one host every byte is copied into the kernel by its sender and out of it
// by its receiver, on the cores that run the ranks. It is timed twice:
//   hot:  through 1 MiB of memory each way, round and round, which stays in the cache:
//         those copies at their cheapest. An all-reduce, which has more to do, should
//         not beat it; from 16 MiB up ours stays 45-60 % above it. (It is a yardstick
//         measured under the same conditions, not a law: with 3 ranks on 2 cores at
//         1 MiB the all-reduce has matched it.)
//   cold: through as much memory as the traffic, so that every byte is read from and
//         written to memory, as an all-reduce of a tensor larger than the caches must
//         (at np 2 the traffic is one read and one write of the tensor, exactly).
// "x hot" and "x cold" = that floor's time / the tcp backend's: how close it comes.
class StreamRing {
 public:
  // Each rank listens where its tcp group listens; the addresses go round through an
  // all_gather of the group; each rank connects to its right and accepts its left.
  StreamRing(ddp::ProcessGroupTcp& group, std::chrono::seconds timeout) : timeout_(timeout) {
    using Clock = ddp::Socket::Clock;
    const std::string host = ddp::split_address(group.address()).first;
    ddp::Socket listener = ddp::Socket::listen(host, 0);
    const std::string address = ddp::format_address(host, listener.local_port());
    // "host:port" as one int64 per character, zero-padded.
    constexpr std::int64_t kLength = 80;
    DDP_CHECK(static_cast<std::int64_t>(address.size()) < kLength, "address too long: ", address);
    ddp::Tensor mine = ddp::zeros({kLength}, {ddp::DType::Int64});
    for (std::size_t i = 0; i < address.size(); ++i) mine.data<std::int64_t>()[i] = address[i];
    ddp::Tensor all = ddp::zeros({kLength * group.size()}, {ddp::DType::Int64});
    group.all_gather(all, mine)->wait(timeout);
    const int right = (group.rank() + 1) % group.size();
    std::string right_address;
    for (std::int64_t i = 0; i < kLength; ++i) {
      const std::int64_t c = all.data<std::int64_t>()[right * kLength + i];
      if (c == 0) break;
      right_address += static_cast<char>(c);
    }
    const auto [right_host, right_port] = ddp::split_address(right_address);
    const Clock::time_point deadline = Clock::now() + timeout;
    right_ = ddp::Socket::connect(right_host, right_port, deadline);
    left_ = listener.accept(deadline);
    DDP_CHECK(left_.valid(), "rank ", group.rank(), ": the left neighbour never connected to ",
              address, " for the floor measurement");
  }

  static constexpr std::size_t kHotWindow = 1 * ddp::kMiB;

  // Sends `bytes` to the right while receiving as many from the left, through the first
  // `window` bytes of out_ and in_, round and round.
  void stream(std::size_t bytes, std::size_t window) {
    if (out_ == nullptr || out_->size() < window) {  // page-aligned, as scratch_ in the tcp
      out_ = std::make_unique<ddp::PageBuffer>(window);  // group: Note [4K aliasing] in
      in_ = std::make_unique<ddp::PageBuffer>(window);   // dist/pipelined_ring.cpp
      std::memset(out_->data(), 1, window);  // touched: no page faults while timed
      std::memset(in_->data(), 0, window);
    }
    const auto deadline = ddp::Socket::Clock::now() + timeout_;
    std::size_t sent = 0, received = 0;
    while (sent < bytes || received < bytes) {
      bool moved = false;
      if (sent < bytes) {
        const std::size_t at = sent % window;
        const std::size_t len =
            std::min({bytes - sent, ddp::ProcessGroupTcp::kSendSliceBytes, window - at});
        const std::size_t n = check(right_.send_some(out_->data() + at, len), "sending to the right");
        sent += n;
        moved = n > 0;
      }
      if (received < bytes) {
        const std::size_t at = received % window;
        const std::size_t got = check(
            left_.recv_some(in_->data() + at, std::min(bytes - received, window - at)),
            "receiving from the left");
        received += got;
        moved = moved || got > 0;
      }
      if (moved) continue;
      DDP_CHECK(ddp::remaining_ms(deadline) > 0, "floor measurement: no progress within ",
                timeout_.count(), " s");
      pollfd fds[2] = {{left_.fd(), static_cast<short>(received < bytes ? POLLIN : 0), 0},
                       {right_.fd(), static_cast<short>(sent < bytes ? POLLOUT : 0), 0}};
      ::poll(fds, 2, std::min(100, ddp::remaining_ms(deadline)));
    }
  }

 private:
  static std::size_t check(const ddp::Socket::IoResult& r, const char* what) {
    DDP_CHECK(r.status == ddp::Socket::IoStatus::Ok ||
                  r.status == ddp::Socket::IoStatus::WouldBlock,
              "floor measurement: a neighbour failed while ", what);
    return r.bytes;
  }

  ddp::Socket left_, right_;
  std::unique_ptr<ddp::PageBuffer> out_, in_;
  std::chrono::seconds timeout_;
};

// The bytes one rank sends in a ring all-reduce of `bytes`: 2(n-1) of its n chunks.
std::size_t ring_bytes_per_rank(std::int64_t bytes, int world) {
  return static_cast<std::size_t>(bytes / 4 * 2 * (world - 1) / world * 4);
}

// ---- The emulated link's model (DDP_TCP_LINK, chapter 07) --------------------------------
//
// Over links of rate B and latency L (Note [Link model] in dist/link_emulation.cpp), a
// ring pass of k dependent steps of c bytes takes k(L + c/B) when its steps run one
// after the other: the model of chapter 07; the ring all-reduce is k = 2(n-1) steps of
// S/n, so 2(n-1)L + 2(n-1)/n S/B. The tcp group's small path (Note [Small all-reduce])
// is k = n-1 steps of S. Pipelined perfectly, as the tcp group's ring can be, the pass
// takes at least max(kL + c/B, kc/B + L) ("least"). A measurement should fall between.
struct LinkModel {
  double model_s = 0;  // k (L + c/B)
  double least_s = 0;  // max(kL + c/B, kc/B + L)
};

LinkModel link_model(const ddp::LinkEmulation& link, std::int64_t bytes, int world) {
  const bool small =
      ddp::ProcessGroupTcp::takes_small_all_reduce(static_cast<std::size_t>(bytes), world);
  const int k = small ? world - 1 : 2 * (world - 1);
  const double c = small ? static_cast<double>(bytes) : static_cast<double>(bytes) / world;
  const double L = std::chrono::duration<double>(link.latency).count();
  const double B = link.bytes_per_second;
  return {k * (L + c / B), std::max(k * L + c / B, k * c / B + L)};
}

// ---- Printing --------------------------------------------------------------------------

// busbw in GB/s (dist/bandwidth.hpp has the definition).
double busbw_gbps(std::int64_t bytes, double seconds, int world) {
  return ddp::all_reduce_busbw(bytes, seconds, world) / 1e9;
}

void print_header(const Options& o, int world, const std::vector<Anchor>& anchors,
                  const std::string& description) {
  std::printf(
      "bench_allreduce: float32 sum in place, backend %s (%s), %d ranks; per size a check, "
      "warm-up,\n%d repetitions of `iters` back-to-back calls between barriers; time = max "
      "over ranks, per call\nbusbw = algbw * 2(n-1)/n (nccl-tests). Anchors (%s/results, "
      "the faster median of run1/run2):\n",
      description.c_str(), o.label.c_str(), world, o.reps, o.anchors.c_str());
  for (const Anchor& a : anchors) {
    std::printf("  %-8s %s\n", a.name.c_str(),
                a.seconds.empty() ? "anchor not found" : "busbw at the median");
  }
  std::printf("'x NAME' = anchor median time / our median time (> 1: we are faster)\n");
  if (o.floor) {
    std::printf("hot, cold = the floors: the same bytes on plain TCP links and nothing else, "
                "through 1 MiB of\nmemory (hot) or as much as they are (cold); median. 'x hot' "
                "= hot / our time (<= 1)\n");
  }
  std::printf("\n%10s %10s %6s %6s %10s %10s %8s %8s %8s | %8s %8s %8s | %6s %6s %6s", "size",
              "count", "type", "iters", "time(us)", "min(us)", "algbw", "busbw", "best", "MPI shm",
              "MPI tcp", "gloo", "x shm", "x tcp", "x gloo");
  if (o.floor) std::printf(" | %9s %9s %6s %6s", "hot(us)", "cold(us)", "x hot", "x cold");
  if (o.link) std::printf(" | %9s %9s %7s", "model(us)", "least(us)", "/model");
  std::printf("\n");
  std::printf("%10s %10s %6s %6s %10s %10s %8s %8s %8s | %8s %8s %8s |\n", "(B)", "(elts)", "", "",
              "median", "", "(GB/s)", "(GB/s)", "busbw", "busbw", "busbw", "busbw");
}

void print_row(const Result& r, int world, const std::vector<Anchor>& anchors,
               const Options& o) {
  const double median = r.per_call.median_s;
  std::printf("%10lld %10lld %6s %6d %10.1f %10.1f %8.3f %8.3f %8.3f |",
              static_cast<long long>(r.bytes), static_cast<long long>(r.bytes / 4), "float",
              r.iters, median * 1e6, r.per_call.min_s * 1e6,
              ddp::algbw(r.bytes, median) / 1e9, busbw_gbps(r.bytes, median, world),
              busbw_gbps(r.bytes, r.per_call.min_s, world));
  std::string ratios;
  for (const Anchor& a : anchors) {
    const auto it = a.seconds.find(r.bytes);
    if (it == a.seconds.end()) {
      std::printf(" %8s", "-");
      ratios += "      -";
      continue;
    }
    std::printf(" %8.3f", busbw_gbps(r.bytes, it->second, world));
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, " %6.2f", it->second / median);
    ratios += buffer;
  }
  std::printf(" |%s", ratios.c_str());
  if (r.hot && r.cold) {
    std::printf(" | %9.1f %9.1f %6.2f %6.2f", r.hot->median_s * 1e6, r.cold->median_s * 1e6,
                r.hot->median_s / median, r.cold->median_s / median);
  }
  if (o.link) {
    const LinkModel m = link_model(*o.link, r.bytes, world);
    std::printf(" | %9.1f %9.1f %7.2f", m.model_s * 1e6, m.least_s * 1e6, median / m.model_s);
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  int rank = -1;
  try {
    Options o = parse_options(argc, argv);
    ddp::InitOptions init;
    init.backend = o.backend;
    init.timeout = std::chrono::seconds(o.timeout_s);
    std::unique_ptr<ddp::ProcessGroup> group = ddp::init_process_group(init);
    rank = group->rank();
    const int world = group->size();
    std::string description = group->backend_name();
    if (auto* tcp = dynamic_cast<ddp::ProcessGroupTcp*>(group.get())) {
      description = tcp->description();
      o.link = tcp->link();
    }
    const std::vector<Anchor> anchors = load_anchors(o.anchors, world);
    std::optional<StreamRing> floor_ring;
    if (o.floor && world > 1) {
      auto* tcp = dynamic_cast<ddp::ProcessGroupTcp*>(group.get());
      DDP_CHECK(tcp != nullptr, "--floor times plain TCP links beside the tcp backend; run it "
                "with --backend tcp");
      floor_ring.emplace(*tcp, std::chrono::seconds(o.timeout_s));
    }
    if (rank == 0) print_header(o, world, anchors, description);
    std::vector<Result> results;
    for (const std::int64_t bytes : o.sizes) {
      results.push_back(measure(*group, bytes, o));
      if (floor_ring) {
        Result& r = results.back();
        const std::size_t traffic = ring_bytes_per_rank(bytes, world);
        const std::size_t hot = std::min(traffic, StreamRing::kHotWindow);
        r.hot = time_calls(*group, r.iters, o, [&] { floor_ring->stream(traffic, hot); });
        r.cold = time_calls(*group, r.iters, o, [&] { floor_ring->stream(traffic, traffic); });
      }
      if (rank == 0) {
        print_row(results.back(), world, anchors, o);
        std::fflush(stdout);
      }
    }
    // One line per size for scripts (bench/allreduce.sh reads these).
    if (rank == 0) {
      std::printf("\n");
      for (const Result& r : results) {
        std::printf("result label=%s np=%d bytes=%lld time_us_median=%.3f time_us_min=%.3f",
                    o.label.c_str(), world, static_cast<long long>(r.bytes),
                    r.per_call.median_s * 1e6, r.per_call.min_s * 1e6);
        for (const Anchor& a : anchors) {  // anchor_MPI_shm_us=180.3 ...; 0 when missing
          std::string key = a.name;
          std::replace(key.begin(), key.end(), ' ', '_');
          const auto it = a.seconds.find(r.bytes);
          const double us = it == a.seconds.end() ? 0.0 : it->second * 1e6;
          std::printf(" anchor_%s_us=%.3f", key.c_str(), us);
        }
        if (r.hot && r.cold) {
          std::printf(" floor_hot_us_median=%.3f floor_cold_us_median=%.3f",
                      r.hot->median_s * 1e6, r.cold->median_s * 1e6);
        }
        if (o.link) {
          const LinkModel m = link_model(*o.link, r.bytes, world);
          std::printf(" model_us=%.3f least_us=%.3f", m.model_s * 1e6, m.least_s * 1e6);
        }
        std::printf("\n");
      }
    }
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_allreduce: rank %d: error: %s\n", rank, e.what());
    std::fflush(stderr);
    std::_Exit(1);  // no destructors: a backend's teardown may wait on failed peers
  }
}
