// CPU thread count (see threads.hpp). OpenMP runs the elementwise and reduction loops;
// Eigen, built with OpenMP, parallelises matmul with its own setting, kept in step here.
#include "tensor/threads.hpp"

#include <omp.h>

#include <algorithm>

#include <Eigen/Core>

#include "tensor/error.hpp"

namespace ddp {

void set_num_threads(int n) {
  DDP_CHECK(n >= 1, "set_num_threads(", n, "): expected at least 1 thread");
  omp_set_num_threads(n);
  Eigen::setNbThreads(n);
}

int get_num_threads() { return omp_get_max_threads(); }

int threads_for(std::int64_t items) {
  return static_cast<int>(std::clamp<std::int64_t>(items, 1, get_num_threads()));
}

SerialEigen::SerialEigen() : saved_(Eigen::nbThreads()) { Eigen::setNbThreads(1); }

SerialEigen::~SerialEigen() { Eigen::setNbThreads(saved_); }

}  // namespace ddp
