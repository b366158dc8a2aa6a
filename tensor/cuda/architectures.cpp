// Which GPUs a build runs on (see architectures.hpp, Note [Which GPUs a build runs on]).
#include "tensor/cuda/architectures.hpp"

#include <charconv>

#include "base/error.hpp"

namespace ddp::cuda {

bool build_runs_on(std::string_view architectures, int major, int minor) {
  const int gpu = major * 10 + minor;
  while (!architectures.empty()) {
    const std::size_t semicolon = architectures.find_first_of(";,");
    std::string_view entry = architectures.substr(0, semicolon);
    architectures = semicolon == std::string_view::npos ? std::string_view()
                                                        : architectures.substr(semicolon + 1);
    if (entry == "all" || entry == "all-major") return true;
    bool sass = true, ptx = true;
    if (entry.ends_with("-real")) {
      ptx = false;
      entry.remove_suffix(5);
    } else if (entry.ends_with("-virtual")) {
      sass = false;
      entry.remove_suffix(8);
    }
    int built = 0;
    const auto [end, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), built);
    if (ec != std::errc() || end != entry.data() + entry.size()) continue;  // not a number
    if (sass && built / 10 == major && built % 10 <= minor) return true;
    if (ptx && built <= gpu) return true;
  }
  return false;
}

std::string no_code_for_gpu(std::string_view architectures, int index, const std::string& name,
                            int major, int minor) {
  return detail::concat("cuda:", index, " (", name, ") has compute capability ", major, ".",
                        minor, ", and this build has no GPU code that runs on it "
                        "(CMAKE_CUDA_ARCHITECTURES=", architectures, ")\nhint: reconfigure with "
                        "-DCMAKE_CUDA_ARCHITECTURES=", major, minor,
                        " (or =native on a node with this GPU) and build again");
}

}  // namespace ddp::cuda
