// Sequential (see sequential.hpp).
#include "nn/sequential.hpp"

namespace ddp::nn {

Module& Sequential::operator[](std::size_t i) const {
  DDP_CHECK(i < layers_.size(), "Sequential[", i, "]: it has ", layers_.size(), " layers");
  return *layers_[i];
}

Variable Sequential::forward(const Variable& x) {
  Variable out = x;
  for (const auto& layer : layers_) out = layer->forward(out);
  return out;
}

std::string Sequential::describe() const {
  if (layers_.empty()) return "Sequential() (identity)";
  std::string out = "Sequential(";
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    out += (i == 0 ? "" : ", ") + layers_[i]->describe();
  }
  return out + ")";
}

}  // namespace ddp::nn
