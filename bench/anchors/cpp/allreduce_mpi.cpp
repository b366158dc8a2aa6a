// Copied unchanged from the project's anchors (shared/anchors/cpp/allreduce_mpi.cpp), which
// measured results/run{1,2} with it on 2026-11-22; bench/anchors/README.md says how.
// Item 4a: MPI_Allreduce(float, MPI_SUM, out-of-place) time per call and bus
// bandwidth as nccl-tests defines it: busbw = bytes * 2(n-1)/n / time.
//   mpicxx -O2 -std=c++17 allreduce_mpi.cpp -o allreduce_mpi
//   mpirun -np 2 ./allreduce_mpi [reps=10] [label=default]      (JSON on stdout)
// Per size: a correctness check, warm-up calls, then `reps` repetitions of
// `iters` back-to-back calls between barriers; a repetition's time is the max
// over ranks; per-call time = repetition time / iters; min and median over reps.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  const std::string label = argc > 2 ? argv[2] : "default";
  const std::vector<size_t> sizes = {4u, 4u << 10, 64u << 10, 1u << 20, 16u << 20, 64u << 20};

  char ver[MPI_MAX_LIBRARY_VERSION_STRING];
  int len;
  MPI_Get_library_version(ver, &len);
  std::string v(ver, len);
  v = v.substr(0, v.find_first_of("\n,"));
  if (rank == 0)
    std::printf("{\"bench\": \"mpi_allreduce\", \"np\": %d, \"label\": \"%s\", \"mpi\": \"%s\", "
                "\"reps\": %d, \"results\": [\n", n, label.c_str(), v.c_str(), reps);

  for (size_t si = 0; si < sizes.size(); ++si) {
    const size_t bytes = sizes[si], count = bytes / sizeof(float);
    std::vector<float> send(count, float(rank + 1)), recv(count, 0.f);

    MPI_Allreduce(send.data(), recv.data(), (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const float expect = n * (n + 1) / 2.0f;
    int ok = recv.front() == expect && recv.back() == expect && recv[count / 2] == expect;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);

    const int iters = (int)std::clamp<size_t>((256u << 20) / bytes, 4, 1000);
    for (int i = 0; i < std::max(2, iters / 4); ++i)
      MPI_Allreduce(send.data(), recv.data(), (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);

    std::vector<double> per_call;
    for (int r = 0; r < reps; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int i = 0; i < iters; ++i)
        MPI_Allreduce(send.data(), recv.data(), (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double t = MPI_Wtime() - t0, tmax;
      MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      per_call.push_back(tmax / iters);
    }
    std::sort(per_call.begin(), per_call.end());
    const double tmin = per_call.front();
    const double tmed = reps % 2 ? per_call[reps / 2]
                                 : 0.5 * (per_call[reps / 2 - 1] + per_call[reps / 2]);
    const double f = 2.0 * (n - 1) / n;
    if (rank == 0)
      std::printf("  {\"bytes\": %zu, \"iters\": %d, \"correct\": %s, \"time_s_min\": %.9g, "
                  "\"time_s_median\": %.9g, \"algbw_GBps_median\": %.6g, "
                  "\"busbw_GBps_median\": %.6g, \"busbw_GBps_best\": %.6g}%s\n",
                  bytes, iters, ok ? "true" : "false", tmin, tmed, bytes / tmed / 1e9,
                  bytes * f / tmed / 1e9, bytes * f / tmin / 1e9,
                  si + 1 < sizes.size() ? "," : "");
  }
  if (rank == 0) std::printf("]}\n");
  MPI_Finalize();
  return 0;
}
