// consolidate_optimizer_state, shard_optimizer_state and the cutting (and the parsing of
// "<kind>.<j>" names) they share with a sharded checkpoint (see sharded_state.hpp).
#include "dist/parallel/sharded_state.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <string>

#include "autograd/grad_mode.hpp"
#include "base/error.hpp"

namespace ddp {

namespace {

// The model's index of each parameter of `flat`, in the flat buffer's order.
std::vector<std::size_t> model_indices(const FlatParameter& flat,
                                       const std::vector<Variable>& parameters) {
  std::vector<std::size_t> out;
  for (const Variable& p : flat.parameters()) {
    const auto it = std::find_if(parameters.begin(), parameters.end(),
                                 [&](const Variable& q) { return q.same(p); });
    DDP_CHECK(it != parameters.end(), "sharded optimizer state: a parameter of a flat buffer "
              "is not among the model's parameters");
    out.push_back(static_cast<std::size_t>(it - parameters.begin()));
  }
  return out;
}

}  // namespace

std::pair<std::string, std::size_t> split_entry_name(const std::string& name,
                                                     std::string_view source) {
  const std::size_t dot = name.rfind('.');
  const std::string_view digits =
      dot == std::string::npos ? std::string_view() : std::string_view(name).substr(dot + 1);
  std::size_t index = 0;
  // from_chars, not stoul: a name read from a file may hold anything ("exp_avg.x", "step.",
  // "w.-1", twenty digits), and each must give this ddp::Error, naming the file and the
  // entry, never std::invalid_argument naming nothing. Digits only: no sign, no space.
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  DDP_CHECK(dot != std::string::npos && dot > 0 && !digits.empty() && ec == std::errc() &&
                end == digits.data() + digits.size(),
            source, ": entry '", name, "' is not <kind>.<index>");
  return {name.substr(0, dot), index};
}

FlatPlaces places_of(const FlatParameter& flat, const std::vector<Variable>& parameters) {
  FlatPlaces places;
  places.index = model_indices(flat, parameters);
  for (std::size_t k = 0; k < flat.parameters().size(); ++k) {
    places.offset.push_back(flat.offset(k));
    places.shape.push_back(flat.parameters()[k].shape());
  }
  return places;
}

void unflatten_optimizer_entry(const std::string& kind, const Tensor& whole,
                               const FlatPlaces& places, nn::StateDict& full) {
  for (std::size_t k = 0; k < places.index.size(); ++k) {
    const std::string name = kind + "." + std::to_string(places.index[k]);
    if (whole.dtype() == DType::Int64) {  // a step count: the same for the whole buffer
      full.emplace_back(name, whole.clone());
      continue;
    }
    const std::int64_t numel = ddp::numel(places.shape[k]);
    full.emplace_back(name, whole.narrow(0, places.offset[k], numel).view(places.shape[k]).clone());
  }
}

void sort_by_parameter(nn::StateDict& full) {
  std::stable_sort(full.begin(), full.end(), [](const auto& a, const auto& b) {
    return split_entry_name(a.first, "sort_by_parameter").second <
           split_entry_name(b.first, "sort_by_parameter").second;
  });
}

nn::StateDict consolidate_optimizer_state(const nn::Optimizer& local,
                                          const std::vector<const FlatParameter*>& flats,
                                          const std::vector<Variable>& parameters,
                                          ProcessGroup& group) {
  NoGradGuard no_grad;
  nn::StateDict full;
  for (const auto& [name, tensor] : local.state_dict()) {
    const auto [kind, j] = split_entry_name(name, "consolidate_optimizer_state");
    DDP_CHECK(j < flats.size(), "consolidate_optimizer_state: entry '", name, "' but ",
              flats.size(), " flat buffers");
    const FlatParameter& flat = *flats[j];
    if (tensor.dtype() == DType::Int64) {
      unflatten_optimizer_entry(kind, tensor, places_of(flat, parameters), full);
      continue;
    }
    Tensor padded = empty({flat.layout().padded_numel()}, {.device = tensor.device()});
    group.all_gather(padded, tensor.contiguous())->wait();
    unflatten_optimizer_entry(kind, padded, places_of(flat, parameters), full);
  }
  sort_by_parameter(full);
  return full;
}

nn::StateDict shard_optimizer_state(const nn::StateDict& full,
                                    const std::vector<const FlatParameter*>& flats,
                                    const std::vector<Variable>& parameters,
                                    std::string_view source) {
  NoGradGuard no_grad;
  std::map<std::pair<std::string, std::size_t>, Tensor> by_name;  // (kind, i) -> tensor
  std::vector<std::string> kinds;
  for (const auto& [name, tensor] : full) {
    auto key = split_entry_name(name, source);
    if (std::find(kinds.begin(), kinds.end(), key.first) == kinds.end()) kinds.push_back(key.first);
    by_name[key] = tensor;
  }
  nn::StateDict out;
  for (std::size_t j = 0; j < flats.size(); ++j) {
    const FlatParameter& flat = *flats[j];
    const std::vector<std::size_t> index = model_indices(flat, parameters);
    const ShardLayout& layout = flat.layout();
    const std::int64_t begin = layout.begin(flat.rank()), end = layout.real_end(flat.rank());
    for (const std::string& kind : kinds) {
      std::size_t present = 0;
      for (std::size_t i : index) present += by_name.count({kind, i});
      if (present == 0) continue;  // e.g. momentum never started for these parameters
      DDP_CHECK(present == index.size(), source, ": '", kind, "' is there for ", present, " of the ",
                index.size(), " parameters that share a flat buffer: all or none");
      const Tensor& first = by_name.at({kind, index[0]});
      if (first.dtype() == DType::Int64) {
        out.emplace_back(kind + "." + std::to_string(j), first.clone());
        continue;
      }
      Tensor slice = zeros({layout.shard_numel}, {.device = flat.flat().device()});
      for (std::size_t k = 0; k < index.size(); ++k) {
        const Variable& p = flat.parameters()[k];
        const Tensor& whole = by_name.at({kind, index[k]});
        DDP_CHECK(whole.numel() == p.numel(), source, ": '", kind, ".", index[k], "' has ",
                  whole.numel(), " elements, parameter ", index[k], " has ", p.numel());
        const std::int64_t lo = std::max(begin, flat.offset(k));
        const std::int64_t hi = std::min(end, flat.offset(k) + p.numel());
        if (lo >= hi) continue;
        slice.narrow(0, lo - begin, hi - lo)
            .copy_(whole.reshape({whole.numel()}).narrow(0, lo - flat.offset(k), hi - lo));
      }
      out.emplace_back(kind + "." + std::to_string(j), slice);
    }
  }
  return out;
}

}  // namespace ddp
