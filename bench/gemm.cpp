// bench_gemm: how fast ddp::matmul multiplies square float32 matrices on the CPU, next
// to raw Eigen in the same process and to the PyTorch/Eigen anchors measured on the dev
// box (bench/anchors/RESULTS.md, section 5); then, when a GPU is usable, the same on
// the GPU (gemm_gpu.cpp). Chapter 01 (CPU) and 02 (GPU) send readers here.
//
// It prints numbers and asserts nothing: speed is read as ratios, never tested.
//   bench_gemm [--threads 2] [--reps 10] [--warmup 1] [--sizes 1024,2048]
//              [--gpu-sizes 1024,2048,4096] [--anchors DIR]
// --anchors DIR: the anchors folder, bench/anchors by default (reads results/run1 and
// run2), or a folder of fresh sgemm_*.json (bench/anchors/README.md says how to make one).
#include <Eigen/Core>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/bench_args.hpp"
#include "bench/anchor_json.hpp"
#include "bench/gemm_gpu.hpp"
#include "bench/timing.hpp"
#include "base/error.hpp"
#include "tensor/ops.hpp"
#include "tensor/random.hpp"
#include "tensor/tensor.hpp"
#include "tensor/threads.hpp"

using ddp::bench::parse_int;
using ddp::bench::parse_int_list;

namespace {

using ddp::bench::AnchorRow;
using ddp::bench::gemm_gflops;
using ddp::bench::Timing;
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr double kTargetRatio = 0.9;  // ours / Eigen, at the median

// ---- Options ---------------------------------------------------------------------------

struct Options {
  int threads = 2;
  int reps = 10;
  int warmup = 1;
  std::vector<int> sizes = {1024, 2048};
  std::vector<int> gpu_sizes = {1024, 2048, 4096};  // a GPU needs larger n to fill up
  std::string anchors = ddp::bench::default_anchors_dir();
};

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::printf(
          "usage: bench_gemm [--threads N] [--reps N] [--warmup N] [--sizes N,N,...]"
          " [--gpu-sizes N,N,...] [--anchors DIR]\n");
      std::exit(0);
    }
    DDP_CHECK(i + 1 < argc, flag, " needs a value\nhint: bench_gemm --help");
    const std::string value = argv[++i];
    if (flag == "--threads") {
      options.threads = parse_int(flag, value, 1);
    } else if (flag == "--reps") {
      options.reps = parse_int(flag, value, 1);
    } else if (flag == "--warmup") {
      options.warmup = parse_int(flag, value, 0);
    } else if (flag == "--anchors") {
      options.anchors = value;
    } else if (flag == "--sizes") {
      options.sizes = parse_int_list(flag, value);
    } else if (flag == "--gpu-sizes") {
      options.gpu_sizes = parse_int_list(flag, value);
    } else {
      DDP_FAIL("unknown option ", flag, "\nhint: bench_gemm --help");
    }
  }
  return options;
}

// ---- Measuring -------------------------------------------------------------------------

struct CpuResult {
  Timing ours;
  Timing eigen;
  double max_rel_diff = 0.0;  // |ours - Eigen| / max |Eigen|, over all elements
};

// Times ddp::matmul and a plain Eigen product on the same inputs, alternating the two
// in every repetition so that a slow spell of the machine hits both alike.
CpuResult measure_cpu(int n, const Options& options) {
  ddp::Generator gen(static_cast<std::uint64_t>(n));
  const ddp::Tensor a = ddp::randn({n, n}, gen);
  const ddp::Tensor b = ddp::randn({n, n}, gen);
  const RowMajor ea = Eigen::Map<const RowMajor>(a.data<float>(), n, n);
  const RowMajor eb = Eigen::Map<const RowMajor>(b.data<float>(), n, n);
  RowMajor ec(n, n);

  // ddp::matmul allocates its result on every call, as torch.mm does; Eigen writes
  // into `ec`, allocated once. At these sizes the allocation is well under 1 %.
  ddp::Tensor c;
  std::vector<double> ours, eigen;
  for (int r = 0; r < options.warmup + options.reps; ++r) {
    double t0 = ddp::bench::now_seconds();
    c = ddp::matmul(a, b);
    const double t_ours = ddp::bench::now_seconds() - t0;
    t0 = ddp::bench::now_seconds();
    ec.noalias() = ea * eb;
    const double t_eigen = ddp::bench::now_seconds() - t0;
    if (r >= options.warmup) {
      ours.push_back(t_ours);
      eigen.push_back(t_eigen);
    }
  }

  const Eigen::Map<const RowMajor> ours_c(c.data<float>(), n, n);
  CpuResult result{ddp::bench::summarize(ours), ddp::bench::summarize(eigen), 0.0};
  result.max_rel_diff = (ours_c - ec).cwiseAbs().maxCoeff() / ec.cwiseAbs().maxCoeff();
  return result;
}

// ---- Printing --------------------------------------------------------------------------

void print_row(int n, const std::string& path, double median_gflops, double best_gflops,
               const std::string& median_ms, const std::string& ratio) {
  std::printf("%6d  %-36s %8.1f %8.1f %9s  %s\n", n, path.c_str(), median_gflops, best_gflops,
              median_ms.c_str(), ratio.c_str());
}

std::string format(const char* spec, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, spec, value);
  return buffer;
}

struct AnchorFile {
  std::string run;  // "run1", "run2", or "now" for a fresh OUTDIR
  std::string file;
  std::string default_path;
  std::vector<AnchorRow> rows;
  std::string cpu_model;  // from the run's machine.json; "unknown" when absent
};

// Reads the SGEMM anchors under `dir`: its sgemm_{torch,eigen}.json when it has them
// (a fresh measurement, labelled "now"), otherwise those of results/run1
// and results/run2. A file it cannot read is added to `missing` and left out.
std::vector<AnchorFile> load_anchors(const std::string& dir, std::vector<std::string>& missing) {
  const bool single_run = std::filesystem::exists(dir + "/sgemm_torch.json") ||
                          std::filesystem::exists(dir + "/sgemm_eigen.json");
  const std::vector<std::pair<std::string, std::string>> runs =
      single_run ? std::vector<std::pair<std::string, std::string>>{{"now", dir}}
                 : std::vector<std::pair<std::string, std::string>>{
                       {"run1", dir + "/results/run1"}, {"run2", dir + "/results/run2"}};
  std::vector<AnchorFile> files;
  for (const auto& [run, folder] : runs) {
    for (const auto& [name, default_path] :
         {std::pair{"sgemm_torch.json", "torch"}, std::pair{"sgemm_eigen.json", "Eigen"}}) {
      const std::string file = folder + "/" + name;
      auto rows = ddp::bench::read_sgemm_anchor(file, default_path);
      if (!rows) {
        missing.push_back(file);
        continue;
      }
      const auto cpu = ddp::bench::read_anchor_cpu_model(folder + "/machine.json");
      files.push_back({run, file, default_path, std::move(*rows), cpu.value_or("unknown")});
    }
  }
  return files;
}

// "oneDNN mkldnn_linear" -> "torch oneDNN"; "torch.mm (libblas)" -> "torch.mm (netlib BLAS)".
std::string anchor_label(const AnchorFile& file, const AnchorRow& row) {
  std::string what = row.path;
  if (what.starts_with("oneDNN")) what = "torch oneDNN";
  if (what.starts_with("torch.mm")) what = "torch.mm (netlib BLAS)";
  if (file.default_path == "Eigen") what = "Eigen (anchors/cpp)";
  return "anchor " + file.run + ": " + what;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse_options(argc, argv);
    ddp::set_num_threads(options.threads);
    Eigen::setNbThreads(options.threads);

    std::printf(
        "bench_gemm: C = A @ B, float32, square n x n x n, %d thread(s) "
        "(OpenMP %d, Eigen %d), %d warm-up + %d timed repetitions\n",
        options.threads, ddp::get_num_threads(), Eigen::nbThreads(), options.warmup, options.reps);
    std::printf(
        "GFLOP/s = 2 n^3 / time: 'median' from the median time, 'best' from the fastest\n"
        "Eigen %d.%d.%d, SIMD: %s\n\n",
        EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION,
        Eigen::SimdInstructionSetsInUse());

    std::vector<std::string> missing;
    const std::vector<AnchorFile> anchors = load_anchors(options.anchors, missing);

    std::printf("%6s  %-36s %8s %8s %9s  %s\n", "n", "path", "median", "best", "ms(med)",
                "ours/this (median)");
    bool all_on_target = true;
    for (const int n : options.sizes) {
      const CpuResult r = measure_cpu(n, options);
      const double ours = gemm_gflops(n, r.ours.median_s);
      const double ratio = ours / gemm_gflops(n, r.eigen.median_s);
      all_on_target = all_on_target && ratio >= kTargetRatio;
      print_row(n, "ddp::matmul (cpu)", ours, gemm_gflops(n, r.ours.min_s),
                format("%.2f", r.ours.median_s * 1e3), "");
      print_row(n, "Eigen, same process", gemm_gflops(n, r.eigen.median_s),
                gemm_gflops(n, r.eigen.min_s), format("%.2f", r.eigen.median_s * 1e3),
                format("%.2fx", ratio) + (ratio >= kTargetRatio ? "  (target >= 0.9x: met)"
                                                                : "  (target >= 0.9x: MISSED)"));
      for (const AnchorFile& file : anchors) {
        for (const AnchorRow& row : file.rows) {
          if (row.n != n || row.threads != options.threads) continue;
          print_row(n, anchor_label(file, row), row.gflops_median, row.gflops_best, "-",
                    format("%.2fx", ours / row.gflops_median));
        }
      }
      std::printf("%6s  results agree: max |ours - Eigen| / max |Eigen| = %.1e\n\n", "",
                  r.max_rel_diff);
    }

    for (const std::string& file : missing) std::printf("anchor not found: %s\n", file.c_str());
    if (anchors.empty()) {
      std::printf("no anchors read (--anchors DIR: bench/anchors, or a folder of fresh"
                  " sgemm_*.json)\n");
    } else {
      std::printf("anchors: %s (no row: no anchor at that thread count)\n",
                  std::filesystem::weakly_canonical(options.anchors).c_str());
      const std::string here = ddp::bench::this_cpu_model();
      std::printf("CPU here: %s; anchors measured on: %s\n", here.c_str(),
                  anchors.front().cpu_model.c_str());
      if (anchors.front().cpu_model != here) {
        std::printf(
            "  different CPUs: the anchor rows are context, not a target; rerun the"
            " anchors on this machine (bench/README.md)\n");
      }
      std::printf(
          "noise: anchor medians moved up to +-25 %% between runs and 2-thread GEMM is the"
          " noisiest number there;\n       rerun the anchor in the same session before"
          " reading a ratio (bench/anchors/RESULTS.md).\n");
    }
    std::printf("ours/Eigen >= %.1fx at every size: %s\n", kTargetRatio,
                all_on_target ? "yes" : "no");

    ddp::bench::run_gpu_gemm({options.gpu_sizes, options.warmup, options.reps, 10});
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gemm: error: %s\n", e.what());
    return 1;
  }
}
