// CPU thread count (see threads.hpp). OpenMP runs the elementwise and reduction loops;
// Eigen, built with OpenMP, parallelises matmul with its own setting, kept in step here.
#include "tensor/threads.hpp"

#include <omp.h>

#include <algorithm>
#include <mutex>

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

namespace {
std::mutex serial_eigen_mutex;
int serial_eigen_holders = 0;  // SerialEigens alive, in any thread
int eigen_threads_before = 1;  // Eigen::nbThreads() when the first of them arrived
}  // namespace

SerialEigen::SerialEigen() {
  const std::lock_guard lock(serial_eigen_mutex);
  if (serial_eigen_holders++ == 0) {
    eigen_threads_before = Eigen::nbThreads();
    Eigen::setNbThreads(1);
  }
}

SerialEigen::~SerialEigen() {
  const std::lock_guard lock(serial_eigen_mutex);
  if (--serial_eigen_holders == 0) Eigen::setNbThreads(eigen_threads_before);
}

}  // namespace ddp
