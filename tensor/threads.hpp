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

}  // namespace ddp
