// The anchors the benchmarks compare against: where they are (bench/anchors, whose
// README.md says where each file came from), and readers for their result files
// (results/runN/*.json) and the CPU they ran on (machine.json). Not a JSON library: the
// SGEMM reader knows an array "results" of flat objects with "n", "threads",
// "GFLOPs_median", "GFLOPs_best" and, for torch, "path", and nothing else; nested
// objects (torch's "time_s") are skipped.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ddp::bench {

// bench/anchors of this source tree, the default of every benchmark's --anchors DIR.
std::string default_anchors_dir();

struct AnchorRow {
  std::string path;  // "oneDNN mkldnn_linear", "torch.mm (libblas)"; "Eigen" for sgemm_eigen
  int n = 0;
  int threads = 0;
  double gflops_median = 0.0;
  double gflops_best = 0.0;
};

// Every result of one file; std::nullopt when the file cannot be read or has no
// "results" array. `default_path` names rows that have no "path" key.
std::optional<std::vector<AnchorRow>> read_sgemm_anchor(const std::string& file,
                                                        const std::string& default_path);

// The "cpu_model" of a run's machine.json ("AMD EPYC"); std::nullopt when unreadable.
std::optional<std::string> read_anchor_cpu_model(const std::string& machine_json);

// A number nested in an anchor JSON file, found by its chain of keys: for
// results/run1/single_t2.json, {"step_timing", "128", "median"} is the median step time
// in seconds at batch 128, and {"train", "epoch_s", "median"} the median epoch time.
// Each key is looked up among the members of the object the previous key named (not
// inside arrays). std::nullopt when the file cannot be read or a key is missing.
std::optional<double> read_anchor_number(const std::string& file,
                                         const std::vector<std::string>& keys);

// "model name" from /proc/cpuinfo ("Intel(R) Xeon(R) Processor"); "unknown" elsewhere.
std::string this_cpu_model();

}  // namespace ddp::bench
