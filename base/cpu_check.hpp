// The CPU check: a program built with -march=native (DDP_NATIVE, the default) uses the
// instructions of the machine that built it. Run on an older CPU (a build on a login node,
// jobs on compute nodes of another generation) it would die with "Illegal instruction" and
// nothing else. So before main(), every program of the project compares the instruction
// sets the build used (DDP_BUILD_ISA, measured by CMake from the compiler's -march=native)
// with this CPU's, and stops with a message that names what is missing and the fix.
// The check itself is compiled for plain x86-64 (base/CMakeLists.txt), so it cannot trip
// over the instructions it looks for.
#pragma once

#include <string>
#include <string_view>

namespace ddp::cpu {

// The instruction sets in `built` (space-separated names, as __builtin_cpu_supports knows
// them: "avx2 fma avx512f") that `supports` says this CPU lacks, space-separated; "" when
// none is missing. A name the check does not know counts as supported.
std::string missing_features(std::string_view built, bool (*supports)(std::string_view name));

// Whether this CPU has instruction set `name` (one of the names CMake may list).
bool cpu_supports(std::string_view name);

// The instruction sets this build uses beyond plain x86-64, as CMake listed them ("" for a
// build without -march=native, or not on x86-64).
std::string_view build_isa();

// What the program prints before it stops: "ddp: this CPU lacks avx512f, which this
// build uses ...".
std::string missing_message(const std::string& missing);

}  // namespace ddp::cpu
