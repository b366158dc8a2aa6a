// Whether this build's GPU code runs on a GPU: the build holds machine code (SASS) for the
// architectures CMAKE_CUDA_ARCHITECTURES names as "-real" or plain, and PTX (compiled by
// the driver when a program loads) for the plain and "-virtual" ones. Chapter 02.
//
// Note [Which GPUs a build runs on]
// SASS built for compute capability X.y runs on X.z with z >= y (the same major version:
// sm_80 code runs on an A10's 8.6 and an L4's 8.9); PTX for X.y runs on every GPU of X.y or
// newer, at the cost of a compile when the program starts. "80-real;90", the default
// (cmake/DdpDependencies.cmake), runs on 8.x and on 9.0 and newer, not on a T4 (7.5). A
// kernel that has no code for the GPU fails only when it is launched, with CUDA's
// "no kernel image is available": the backend checks before its first allocation on a
// GPU instead, and names the fix.
#pragma once

#include <string>
#include <string_view>

namespace ddp::cuda {

// `architectures` as CMAKE_CUDA_ARCHITECTURES writes them ("80-real;90", "86", "all";
// ',' separates as ';' does): true when one of them gives code that runs on compute
// capability major.minor. "all" and "all-major" are taken to run everywhere. "native" never
// gets here: the configure resolves it to the GPUs it saw ("75-real;86-real"), and a
// "native" given anyway runs nowhere, so that the check cannot pass every GPU unseen.
bool build_runs_on(std::string_view architectures, int major, int minor);

// The error for GPU `index` (`name`, major.minor) that the build has no code for.
std::string no_code_for_gpu(std::string_view architectures, int index, const std::string& name,
                            int major, int minor);

}  // namespace ddp::cuda
