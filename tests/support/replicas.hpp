// What the DDP tests compare (chapters 06 and 07): a model against its reference, and the
// ranks' replicas against each other. Header-only; for test programs that run as ranks.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "dist/all_gather_text.hpp"
#include "dist/parallel/replica_check.hpp"  // parameter_hash
#include "dist/process_group.hpp"
#include "nn/module.hpp"

namespace ddp::test {

// The largest |a - b| over every parameter element of two models of one layout.
inline double max_difference(const nn::Module& a, const nn::Module& b) {
  const auto pa = a.parameters(), pb = b.parameters();
  double worst = 0.0;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    const auto x = pa[i].data().to_vector<float>(), y = pb[i].data().to_vector<float>();
    for (std::size_t j = 0; j < x.size(); ++j) {
      worst = std::max(worst, std::fabs(static_cast<double>(x[j]) - static_cast<double>(y[j])));
    }
  }
  return worst;
}

// True when every rank's parameters are the same bits as rank 0's (parameter_hash, all
// gathered on the parameters' device: NCCL moves GPU memory only).
inline bool identical_on_all_ranks(const nn::Module& m, ProcessGroup& group) {
  const std::vector<std::string> all =
      all_gather_text(group, std::to_string(parameter_hash(m)), m.parameters().front().device());
  return std::all_of(all.begin(), all.end(), [&](const std::string& h) { return h == all[0]; });
}

}  // namespace ddp::test
