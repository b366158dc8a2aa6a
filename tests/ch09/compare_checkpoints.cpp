// ch09_compare: the largest difference between two ddp-train checkpoints, entry by entry.
//
//   ch09_compare A.ckpt B.ckpt TOLERANCE [PREFIX...]
//
// Either may be a sharded checkpoint (--save-format sharded): its manifest is given, and
// it is compared as read_checkpoint reassembles it, which is what --resume reads.
//
// Every float32 entry whose name starts with one of the PREFIXes (default: "model." and
// "optimizer.") must be in both files with the same shape and differ by at most TOLERANCE
// anywhere; int64 entries (step counts, progress) must be equal. Prints the largest
// difference per prefix; exits 0 when within TOLERANCE, 1 otherwise (naming the entry),
// 2 on bad arguments or an unreadable file.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "dist/parallel/sharded_checkpoint.hpp"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: ch09_compare A.ckpt B.ckpt TOLERANCE [PREFIX...]\n");
    return 2;
  }
  try {
    const ddp::nn::StateDict a = ddp::read_checkpoint(argv[1]);
    const ddp::nn::StateDict b = ddp::read_checkpoint(argv[2]);
    const double tolerance = std::strtod(argv[3], nullptr);
    std::vector<std::string> prefixes(argv + 4, argv + argc);
    if (prefixes.empty()) prefixes = {"model.", "optimizer."};
    std::map<std::string, ddp::Tensor> in_b(b.begin(), b.end());
    int failures = 0;
    for (const std::string& prefix : prefixes) {
      double worst = 0.0;
      std::string where = "all equal";
      std::size_t entries = 0;
      for (const auto& [name, ta] : a) {
        if (!name.starts_with(prefix)) continue;
        ++entries;
        const auto it = in_b.find(name);
        if (it == in_b.end() || it->second.shape() != ta.shape() ||
            it->second.dtype() != ta.dtype()) {
          std::fprintf(stderr, "%s: '%s' is %s in %s, %s in %s\n", prefix.c_str(), name.c_str(),
                       ta.describe().c_str(), argv[1],
                       it == in_b.end() ? "missing" : it->second.describe().c_str(), argv[2]);
          ++failures;
          continue;
        }
        if (ta.dtype() == ddp::DType::Int64) {
          if (ta.to_vector<std::int64_t>() != it->second.to_vector<std::int64_t>()) {
            std::fprintf(stderr, "%s: '%s' differs\n", prefix.c_str(), name.c_str());
            ++failures;
          }
          continue;
        }
        const std::vector<float> x = ta.to_vector<float>(), y = it->second.to_vector<float>();
        for (std::size_t i = 0; i < x.size(); ++i) {
          const double d = std::fabs(static_cast<double>(x[i]) - static_cast<double>(y[i]));
          if (d > worst || std::isnan(d)) {
            worst = std::isnan(d) ? INFINITY : d;
            where = name;
          }
        }
      }
      std::printf("%s: %zu entries, largest difference %g (%s)\n", prefix.c_str(), entries,
                  worst, where.c_str());
      if (entries == 0 || !(worst <= tolerance)) {
        std::fprintf(stderr, "%s: %s\n", prefix.c_str(),
                     entries == 0 ? "no such entries"
                                  : ("larger than the tolerance " + std::to_string(tolerance) +
                                     " at " + where).c_str());
        ++failures;
      }
    }
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ch09_compare: %s\n", e.what());
    return 2;
  }
}
