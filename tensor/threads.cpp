// CPU thread count (see threads.hpp). OpenMP runs the elementwise and reduction loops;
// Eigen, built with OpenMP, parallelises matmul with its own setting, kept in step here.
#include "tensor/threads.hpp"

#include <omp.h>

#include <algorithm>
#include <mutex>

#include <Eigen/Core>

#include "base/error.hpp"

namespace ddp {

namespace {
std::mutex eigen_mutex;        // guards the two below and every setNbThreads call
int eigen_threads_wanted = 0;  // set_num_threads' count; 0: Eigen's default, OpenMP's
int serial_eigen_holders = 0;  // SerialEigens alive, in any thread
}  // namespace

void set_num_threads(int n) {
  DDP_CHECK(n >= 1, "set_num_threads(", n, "): expected at least 1 thread");
  omp_set_num_threads(n);
  const std::lock_guard lock(eigen_mutex);
  eigen_threads_wanted = n;
  if (serial_eigen_holders == 0) Eigen::setNbThreads(n);  // else the last holder will
}

int get_num_threads() { return omp_get_max_threads(); }

int threads_for(std::int64_t items) {
  return static_cast<int>(std::clamp<std::int64_t>(items, 1, get_num_threads()));
}

SerialEigen::SerialEigen() {
  const std::lock_guard lock(eigen_mutex);
  if (serial_eigen_holders++ == 0) Eigen::setNbThreads(1);
}

SerialEigen::~SerialEigen() {
  const std::lock_guard lock(eigen_mutex);
  if (--serial_eigen_holders == 0) Eigen::setNbThreads(eigen_threads_wanted);
}

}  // namespace ddp
