// Copied unchanged from the project's anchors (shared/anchors/cpp/sgemm_eigen.cpp), which
// measured results/run{1,2} with it on 2026-11-22; bench/anchors/README.md says how.
// Item 5: Eigen sgemm C = A*B (float32, column-major, square n^3), 1 and 2 threads.
//   g++ -O3 -march=native -fopenmp -I/usr/include/eigen3 sgemm_eigen.cpp -o sgemm_eigen
//   ./sgemm_eigen [reps=10]
// GFLOP/s = 2 n^3 / time; one warm-up product, then `reps` timed products.
#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#ifdef EIGEN_VECTORIZE_AVX2
#define AVX2_ON "true"
#else
#define AVX2_ON "false"
#endif
#ifdef EIGEN_VECTORIZE_FMA
#define FMA_ON "true"
#else
#define FMA_ON "false"
#endif

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  std::printf("{\"bench\": \"sgemm_eigen\", \"eigen\": \"%d.%d.%d\", \"simd\": \"%s\", \"avx2\": %s, \"fma\": %s, \"reps\": %d, "
              "\"results\": [\n", EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION,
              Eigen::SimdInstructionSetsInUse(), AVX2_ON, FMA_ON, reps);
  bool first = true;
  for (int n : {1024, 2048}) {
    Eigen::MatrixXf A = Eigen::MatrixXf::Random(n, n), B = Eigen::MatrixXf::Random(n, n), C(n, n);
    for (int nt : {1, 2}) {
      Eigen::setNbThreads(nt);
      std::vector<double> t;
      for (int r = 0; r < reps + 1; ++r) {
        double t0 = omp_get_wtime();
        C.noalias() = A * B;
        if (r > 0) t.push_back(omp_get_wtime() - t0);
      }
      std::sort(t.begin(), t.end());
      const double fl = 2.0 * n * n * n;
      std::printf("%s  {\"n\": %d, \"threads\": %d, \"time_s_min\": %.6g, \"time_s_median\": %.6g, "
                  "\"GFLOPs_best\": %.4g, \"GFLOPs_median\": %.4g, \"check\": %.3g}",
                  first ? "" : ",\n", n, Eigen::nbThreads(), t.front(), t[t.size() / 2],
                  fl / t.front() / 1e9, fl / t[t.size() / 2] / 1e9, C(n / 2, n / 3));
      first = false;
    }
  }
  std::printf("\n]}\n");
  return 0;
}
