// How many CPU threads the CPU backend uses (OpenMP loops and Eigen's matmul).
// Chapter 01. Defaults to OpenMP's choice (the core count, or OMP_NUM_THREADS).
#pragma once

namespace ddp {

void set_num_threads(int n);  // n >= 1
int get_num_threads();

}  // namespace ddp
