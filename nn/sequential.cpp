// Sequential (see sequential.hpp).
#include "nn/sequential.hpp"

namespace ddp::nn {

Module& Sequential::operator[](std::size_t i) const {
  DDP_CHECK(i < size(), "Sequential[", i, "]: it has ", size(), " layers");
  return *children()[i].second;
}

Variable Sequential::forward(const Variable& x) {
  Variable out = x;
  for (const auto& [name, layer] : children()) out = (*layer)(out);
  return out;
}

std::string Sequential::describe() const {
  if (empty()) return "Sequential() (identity)";
  std::string out = "Sequential(";
  for (const auto& [name, layer] : children()) {
    out += (name == "0" ? "" : ", ") + layer->describe();
  }
  return out + ")";
}

}  // namespace ddp::nn
