# Finds every dependency on the machine and says at configure time what was found.
# Nothing is downloaded: tools/install-deps.sh installs the Debian or Fedora/EL packages
# (on a cluster, modules or Spack provide them: README.md), and the CUDA toolkit (nvcc,
# cuBLAS, NCCL) is expected on PATH, under $CUDA_HOME, or in /usr/local/cuda (which need
# not be on PATH). Catch2 is needed by the tests only. Chapter 00 walks through the output.
include_guard(GLOBAL)

# ddp_require(<find_package arguments...> DEBIAN <package> RPM <package>): find_package,
# and when it fails, one short error naming the Debian and the Fedora/EL package instead
# of CMake's page of advice.
macro(ddp_require name)
  cmake_parse_arguments(_req "" "DEBIAN;RPM" "" ${ARGN})
  find_package(${name} ${_req_UNPARSED_ARGUMENTS} QUIET)
  if(NOT ${name}_FOUND)
    message(FATAL_ERROR "${name} not found (Debian package: ${_req_DEBIAN}; "
                        "Fedora/EL: ${_req_RPM}).\n"
                        "hint: run tools/install-deps.sh, load it as a module, or point "
                        "CMake at it with -D${name}_DIR=... / -DCMAKE_PREFIX_PATH=...")
  endif()
endmacro()

# ---- CPU side: always required -------------------------------------------------------
ddp_require(Eigen3 3.3 NO_MODULE DEBIAN libeigen3-dev RPM eigen3-devel)
ddp_require(ZLIB DEBIAN zlib1g-dev RPM zlib-devel)
# FindMPI runs MPI_Get_library_version (a try_run, ~1 s) so the line below can name the
# library; the answer is kept in the cache so that re-configuring skips it.
if(DEFINED CACHE{DDP_MPI_LIBRARY_VERSION})
  set(MPI_CXX_LIBRARY_VERSION_STRING "${DDP_MPI_LIBRARY_VERSION}")
endif()
set(MPI_DETERMINE_LIBRARY_VERSION TRUE)
ddp_require(MPI COMPONENTS CXX DEBIAN "libopenmpi-dev openmpi-bin"
            RPM "openmpi-devel, then module load mpi/openmpi-x86_64")
set(DDP_MPI_LIBRARY_VERSION "${MPI_CXX_LIBRARY_VERSION_STRING}" CACHE INTERNAL "")
ddp_require(OpenMP COMPONENTS CXX DEBIAN "g++ (libgomp)" RPM "gcc-c++ (libgomp)")
ddp_require(Threads DEBIAN libc6-dev RPM glibc-devel)

# Catch2 v2 (single header catch2/catch.hpp; v3 is a different library) builds the tests,
# nothing else. Without it the libraries and programs still build and the tests are off
# for this configure only: DDP_BUILD_TESTS stays ON in the cache, so configuring again
# after installing Catch2 brings them back. A test step then finds no tests, and the
# presets' noTestsAction "error" makes it fail rather than pass with nothing run.
if(DDP_BUILD_TESTS)
  find_package(Catch2 2.13 QUIET)
  if(NOT Catch2_FOUND)
    set(_ddp_catch2_other "")
    if(Catch2_CONSIDERED_VERSIONS)  # e.g. a Catch2 v3, which cannot stand in for v2
      string(JOIN ", " _ddp_catch2_other ${Catch2_CONSIDERED_VERSIONS})
      set(_ddp_catch2_other " (found only Catch2 ${_ddp_catch2_other})")
    endif()
    message(WARNING
      "Catch2 v2 not found${_ddp_catch2_other}: building the libraries and programs, "
      "WITHOUT the tests.\n"
      "The tests need Catch2 v2 (>= 2.13; v3 is a different library): Debian package "
      "catch2, Fedora and EPEL 9 catch2-devel, EPEL 8 catch-devel, Spack catch2@2.13.10; "
      "or -DCMAKE_PREFIX_PATH=<where it is installed>.\n"
      "Until then ctest finds no tests, so the test step of `cmake --workflow --preset ...` "
      "or `ctest --preset ...` fails (\"No tests were found\"). "
      "-DDDP_BUILD_TESTS=OFF builds without tests and without this warning.")
    set(DDP_BUILD_TESTS OFF)
  endif()
endif()

# "Open MPI v4.1.4, package: Debian OpenMPI, ..." -> "Open MPI v4.1.4"
string(REGEX REPLACE ",.*" "" _ddp_mpi_library "${MPI_CXX_LIBRARY_VERSION_STRING}")
message(STATUS "Found Eigen3 ${Eigen3_VERSION} (${EIGEN3_INCLUDE_DIR})")
message(STATUS "Found ZLIB ${ZLIB_VERSION_STRING}")
message(STATUS "Found MPI ${MPI_CXX_VERSION}: ${_ddp_mpi_library} (launcher ${MPIEXEC_EXECUTABLE})")
message(STATUS "Found OpenMP ${OpenMP_CXX_VERSION} (${OpenMP_CXX_FLAGS})")
if(DDP_BUILD_TESTS)
  message(STATUS "Found Catch2 ${Catch2_VERSION}")
endif()

# ---- CUDA ----------------------------------------------------------------------------
# AUTO builds the CUDA backend when a working nvcc is found; ON insists; OFF never looks.
# Without a GPU the code still compiles and links, and the GPU tests report "Skipped".
set(DDP_HAVE_CUDA OFF)
if(NOT DDP_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "DDP_CUDA=${DDP_CUDA}: expected AUTO, ON or OFF")
endif()
if(NOT DDP_CUDA STREQUAL "OFF")
  # Where nvcc is: CMAKE_CUDA_COMPILER or $CUDACXX when given, else PATH and $CUDA_HOME,
  # else /usr/local/cuda/bin, which a fresh toolkit install does not put on PATH.
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(DDP_NVCC nvcc
                 HINTS ENV CUDA_HOME ENV CUDA_PATH PATH_SUFFIXES bin
                 PATHS /usr/local/cuda/bin)
    if(DDP_NVCC)
      set(ENV{CUDACXX} "${DDP_NVCC}")
    endif()
  endif()
  # nvcc compiles host code with the same g++ as the rest of the build, not whichever
  # g++ is first on PATH (they differ on clusters after `module load gcc`).
  if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER AND NOT DEFINED ENV{CUDAHOSTCXX})
    set(ENV{CUDAHOSTCXX} "${CMAKE_CXX_COMPILER}")
  endif()

  if(DDP_CUDA STREQUAL "AUTO")
    # Compiles a tiny CUDA project first: an nvcc that cannot build (say, with a host
    # compiler it does not support) means "CPU only", not a failed configure.
    include(CheckLanguage)
    check_language(CUDA)
  elseif(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    message(FATAL_ERROR "DDP_CUDA=ON but nvcc was not found "
                        "(PATH, $CUDA_HOME, /usr/local/cuda/bin).\n"
                        "hint: module load cuda / put the toolkit's bin on PATH, "
                        "or configure with -DDDP_CUDA=OFF (or AUTO)")
  endif()

  if(DDP_CUDA STREQUAL "ON" OR CMAKE_CUDA_COMPILER)
    # Which GPUs to build for (Note [Which GPUs a build runs on], tensor/cuda/
    # architectures.hpp). Asked (-D or $CUDAARCHS): as asked, except "native", which is
    # resolved here to the GPUs nvidia-smi lists, as "-real" (CMake's own meaning of it),
    # so that the build and the backend's check both know them. Else, where nvidia-smi lists
    # GPUs: theirs (a T4 gets 75, an L4 89), said in a line. Else A100 = sm_80 and
    # H100/H200 = sm_90 (SASS for both, plus PTX of sm_90 that newer GPUs compile at load
    # time).
    set(_ddp_asked "$ENV{CUDAARCHS}")
    if(DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(_ddp_asked "${CMAKE_CUDA_ARCHITECTURES}")
    endif()
    if(_ddp_asked STREQUAL "" OR _ddp_asked STREQUAL "native")
      find_program(DDP_NVIDIA_SMI nvidia-smi)
      set(_ddp_caps "")
      if(DDP_NVIDIA_SMI)
        execute_process(COMMAND ${DDP_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
                        OUTPUT_VARIABLE _ddp_smi RESULT_VARIABLE _ddp_smi_rc ERROR_QUIET
                        TIMEOUT 20)
        if(_ddp_smi_rc EQUAL 0)
          string(REGEX MATCHALL "[0-9]+\\.[0-9]+" _ddp_smi "${_ddp_smi}")
          foreach(cap IN LISTS _ddp_smi)
            string(REPLACE "." "" cap "${cap}")
            list(APPEND _ddp_caps ${cap})
          endforeach()
          list(REMOVE_DUPLICATES _ddp_caps)
        endif()
      endif()
      # A GPU newer than this nvcc (its --list-gpu-arch lacks it) keeps the default, whose
      # PTX the driver compiles for it.
      if(_ddp_caps AND CMAKE_CUDA_COMPILER)
        execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --list-gpu-arch
                        OUTPUT_VARIABLE _ddp_known ERROR_QUIET TIMEOUT 20)
        foreach(cap IN LISTS _ddp_caps)
          if(NOT _ddp_known MATCHES "compute_${cap}\n")
            message(STATUS "ddp.cpp: nvidia-smi lists a GPU of compute capability ${cap}, "
                           "which ${CMAKE_CUDA_COMPILER} does not know: the default "
                           "architectures instead")
            set(_ddp_caps "")
            break()
          endif()
        endforeach()
      endif()
      if(_ddp_caps AND _ddp_asked STREQUAL "native")
        # FORCE: -D...=native put "native" in the cache. Cached resolved, a later configure
        # (a login node without the GPU) keeps it; -D...=native again resolves again.
        list(TRANSFORM _ddp_caps APPEND "-real" OUTPUT_VARIABLE _ddp_real)
        set(CMAKE_CUDA_ARCHITECTURES "${_ddp_real}" CACHE STRING
            "CUDA architectures (native: those nvidia-smi listed)" FORCE)
        message(STATUS "ddp.cpp: native: nvidia-smi lists GPUs of compute capability "
                       "${_ddp_caps}: building for them (CMAKE_CUDA_ARCHITECTURES=${_ddp_real})")
      elseif(_ddp_caps)
        # Cached: a later configure (after a git pull, on a login node without the GPU)
        # keeps it.
        set(CMAKE_CUDA_ARCHITECTURES "${_ddp_caps}" CACHE STRING
            "CUDA architectures (those nvidia-smi listed at the first configure)")
        message(STATUS "ddp.cpp: nvidia-smi lists GPUs of compute capability ${_ddp_caps}: "
                       "building for them (CMAKE_CUDA_ARCHITECTURES=${_ddp_caps}); for other "
                       "GPUs (a login node's may differ from the compute nodes'), pass "
                       "-DCMAKE_CUDA_ARCHITECTURES")
      elseif(NOT _ddp_asked STREQUAL "native")
        set(CMAKE_CUDA_ARCHITECTURES "80-real;90")
      endif()
      # "native" that nvidia-smi could not resolve stays CMake's: enable_language detects the
      # GPUs (CMAKE_CUDA_ARCHITECTURES_NATIVE), which tensor/CMakeLists.txt hands the check.
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_EXTENSIONS OFF)
    # CMake 3.25 (Debian 12) knows nvcc's C++20 flag only from 3.26 on; nvcc >= 12 has it.
    if(NOT "cuda_std_20" IN_LIST CMAKE_CUDA_COMPILE_FEATURES)
      if(CMAKE_CUDA_COMPILER_VERSION VERSION_LESS 12.0)
        message(FATAL_ERROR "nvcc ${CMAKE_CUDA_COMPILER_VERSION} cannot compile C++20; "
                            "ddp.cpp needs CUDA >= 12.0.\n"
                            "hint: -DDDP_CUDA=OFF builds the CPU backend only")
      endif()
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
      list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
    endif()
    find_package(CUDAToolkit REQUIRED)
    set(DDP_HAVE_CUDA ON)
    message(STATUS "Found CUDA ${CUDAToolkit_VERSION} (nvcc ${CMAKE_CUDA_COMPILER}, "
                   "host compiler ${CMAKE_CUDA_HOST_COMPILER}, archs ${CMAKE_CUDA_ARCHITECTURES})")
    if(TARGET CUDA::cublas)
      message(STATUS "Found cuBLAS (${CUDA_cublas_LIBRARY})")
    else()
      message(FATAL_ERROR "CUDA ${CUDAToolkit_VERSION} found but not cuBLAS.\n"
                          "hint: install the toolkit's libcublas, or -DDDP_CUDA=OFF")
    endif()
  else()
    message(STATUS "CUDA: no working nvcc found, building the CPU backend only "
                   "(-DDDP_CUDA=ON makes this an error)")
  endif()
else()
  message(STATUS "CUDA: off (DDP_CUDA=OFF), building the CPU backend only")
endif()

# NCCL ships in the CUDA toolkit's lib/ here, or in the system's library folders.
set(DDP_HAVE_NCCL OFF)
if(DDP_HAVE_CUDA)
  find_path(NCCL_INCLUDE_DIR nccl.h
            HINTS ENV NCCL_HOME ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include /usr/include
            PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl
               HINTS ENV NCCL_HOME ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64
                     /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu
               PATH_SUFFIXES lib lib64)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h _nccl_ver REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
    string(REGEX REPLACE ".*NCCL_MAJOR ([0-9]+).*NCCL_MINOR ([0-9]+).*NCCL_PATCH ([0-9]+).*"
                         "\\1.\\2.\\3" NCCL_VERSION "${_nccl_ver}")
  endif()
  # 2.14 brought what the nccl group is built on: nonblocking communicators
  # (ncclCommInitRankConfig, config.blocking = 0) and ncclCommFinalize.
  if(NCCL_VERSION AND NCCL_VERSION VERSION_LESS 2.14)
    message(WARNING "NCCL ${NCCL_VERSION} (${NCCL_INCLUDE_DIR}/nccl.h) is older than 2.14: the "
                    "nccl process group will not be built (hint: set NCCL_HOME to a newer one)")
  elseif(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    add_library(ddp_nccl INTERFACE)
    target_include_directories(ddp_nccl SYSTEM INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(ddp_nccl INTERFACE ${NCCL_LIBRARY})
    add_library(NCCL::NCCL ALIAS ddp_nccl)
    set(DDP_HAVE_NCCL ON)
    message(STATUS "Found NCCL ${NCCL_VERSION} (${NCCL_LIBRARY})")
  else()
    message(STATUS "NCCL not found: the nccl process group will not be built "
                   "(hint: set NCCL_HOME to its install prefix)")
  endif()
endif()
