// How many CPU threads the CPU backend uses (OpenMP loops and Eigen's matmul).
// Chapter 01. Defaults to OpenMP's choice (the core count, or OMP_NUM_THREADS).
#pragma once

#include <cstdint>

namespace ddp {

void set_num_threads(int n);  // n >= 1
int get_num_threads();
// Threads for a loop over `items` independent pieces of work (images, channels):
// get_num_threads(), but never more than there are pieces, and at least 1.
int threads_for(std::int64_t items);

// Note [Eigen inside our loops]
// The CPU kernels that loop over images (conv2d_cpu) call Eigen's matrix product from
// inside an OpenMP region, one product per thread. Eigen does not split a product again
// when that region has several threads. But with one image (B = 1) the region has one
// thread, which looks to Eigen like serial code: with set_num_threads(n > 1) it splits
// the product over n threads and, first, picks its K blocking for n threads. The sum
// over K is then cut at other places than with set_num_threads(1), and the bits depend
// on the thread count. Whether the two blockings differ depends on the CPU: for K = 1152
// the 2-core dev box (32 KiB L1, AVX2) blocks by 288 either way, so the bug never showed
// there; an H100 host's AVX-512 cores block by 584 serially and by 320 for two threads,
// which is how it was found. A SerialEigen held around such a loop keeps every product
// on its own thread: results identical at every thread count, at the price of Eigen's
// own threads for a lone image. Eigen's setting is process-wide, so the holders are
// counted: the first to arrive sets Eigen to one thread, the last to leave restores what
// set_num_threads asked for (also when it was called meanwhile). Meanwhile a product on
// another thread (ddp::matmul) runs serially too: slower, never wrong.
class SerialEigen {
 public:
  SerialEigen();
  ~SerialEigen();
  SerialEigen(const SerialEigen&) = delete;
  SerialEigen& operator=(const SerialEigen&) = delete;
};

}  // namespace ddp
