// deps_probe: one program linked against every library the build found (Eigen, zlib,
// MPI, Catch2's header; the CUDA runtime, cuBLAS and NCCL when built), calling one
// function of each and checking its answer against a known value. Chapter 00: the no-root
// test (tests/ch00/no_root.sh) builds it in a few seconds where ddp-train takes minutes,
// so that a fresh configure proves each library is found, links and loads. It touches no
// GPU and starts no MPI job; under ddprun each rank also says who it is.
#include <catch2/catch.hpp>  // the header only, no test runner: Catch2 is found
#include <mpi.h>
#include <zlib.h>

#include <Eigen/Core>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "base/error.hpp"

#ifdef DDP_HAVE_CUDA
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#endif
#ifdef DDP_HAVE_NCCL
#include <nccl.h>
#endif

namespace {

// ---- One line per library -----------------------------------------------------------

// (1 2 3; 4 5 6) x (1 2; 3 4; 5 6) = (22 28; 49 64), by hand.
std::string eigen() {
  Eigen::Matrix<float, 2, 3> a;
  a << 1, 2, 3, 4, 5, 6;
  Eigen::Matrix<float, 3, 2> b;
  b << 1, 2, 3, 4, 5, 6;
  const Eigen::Matrix2f c = a * b;
  DDP_CHECK(c(0, 0) == 22 && c(0, 1) == 28 && c(1, 0) == 49 && c(1, 1) == 64,
            "Eigen multiplied a 2x3 by a 3x2 wrongly");
  return ddp::detail::concat(EIGEN_WORLD_VERSION, ".", EIGEN_MAJOR_VERSION, ".",
                             EIGEN_MINOR_VERSION, " (a 2x3 times a 3x2 as by hand)");
}

// CRC-32 of "123456789" is 0xCBF43926: the check value of the CRC-32 every zip uses.
std::string zlib() {
  const char text[] = "123456789";
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(text), 9);
  DDP_CHECK(crc == 0xCBF43926UL, "zlib's crc32 of \"123456789\" is ", crc, ", not 0xCBF43926");
  return ddp::detail::concat(zlibVersion(), " (crc32 of \"123456789\" = cbf43926)");
}

// One of the few MPI functions allowed before MPI_Init: no launcher needed.
std::string mpi() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  DDP_CHECK(MPI_Get_library_version(text, &length) == MPI_SUCCESS,
            "MPI_Get_library_version failed");
  const std::string version(text, static_cast<std::size_t>(length));
  return version.substr(0, version.find(','));
}

std::string catch2() {
  return ddp::detail::concat(CATCH_VERSION_MAJOR, ".", CATCH_VERSION_MINOR, ".",
                             CATCH_VERSION_PATCH, " (header)");
}

#ifdef DDP_HAVE_CUDA
// Both answer without a GPU and without the driver: they are the libraries' own versions.
std::string cuda_runtime() {
  int version = 0;
  DDP_CHECK(cudaRuntimeGetVersion(&version) == cudaSuccess, "cudaRuntimeGetVersion failed");
  return ddp::detail::concat(version / 1000, ".", version % 1000 / 10);
}

std::string cublas() {
  int major = 0, minor = 0;
  DDP_CHECK(cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
                cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS,
            "cublasGetProperty failed");
  return ddp::detail::concat(major, ".", minor);
}
#endif

#ifdef DDP_HAVE_NCCL
std::string nccl() {
  int version = 0;
  DDP_CHECK(ncclGetVersion(&version) == ncclSuccess, "ncclGetVersion failed");
  // NCCL_VERSION_CODE since 2.9: major * 10000 + minor * 100 + patch.
  return ddp::detail::concat(version / 10000, ".", version % 10000 / 100, ".", version % 100);
}
#endif

// Under ddprun (or any launcher that sets them): who this process is.
std::string rank() {
  const char* rank = std::getenv("RANK");
  const char* world = std::getenv("WORLD_SIZE");
  if (rank == nullptr || world == nullptr) return "none (RANK, WORLD_SIZE unset)";
  return ddp::detail::concat(rank, " of ", world);
}

}  // namespace

int main() {
  try {
    const std::string who = rank();
    std::printf("deps_probe: rank %s\n", who.c_str());
    std::printf("  Eigen   %s\n", eigen().c_str());
    std::printf("  zlib    %s\n", zlib().c_str());
    std::printf("  MPI     %s\n", mpi().c_str());
    std::printf("  Catch2  %s\n", catch2().c_str());
#ifdef DDP_HAVE_CUDA
    std::printf("  CUDA    runtime %s\n", cuda_runtime().c_str());
    std::printf("  cuBLAS  %s\n", cublas().c_str());
#endif
#ifdef DDP_HAVE_NCCL
    std::printf("  NCCL    %s\n", nccl().c_str());
#endif
    std::printf("deps_probe: every library answered\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "deps_probe: %s\n", e.what());
    return 1;
  }
}
