// check_same_model and check_parameters_in_sync (see replica_check.hpp). Chapter 06.
#include "dist/parallel/replica_check.hpp"

#include <map>

#include "dist/all_gather_text.hpp"
#include "base/error.hpp"
#include "base/text.hpp"  // split
#include "base/who.hpp"   // name_ranks

namespace ddp {

namespace {

Device device_of(const nn::Module& module) {
  const auto parameters = module.parameters();
  return parameters.empty() ? Device::cpu() : parameters.front().device();
}

}  // namespace

std::vector<std::string> describe_replica(const nn::Module& module) {
  std::vector<std::string> lines;
  for (const auto& [name, p] : module.named_parameters()) {
    lines.push_back("parameter " + name + " " + std::string(dtype_name(p.data().dtype())) + " " +
                    shape_str(p.shape()));
  }
  for (const auto& [name, b] : module.named_buffers()) {
    lines.push_back("buffer " + name + " " + std::string(dtype_name(b.dtype())) + " " +
                    shape_str(b.shape()));
  }
  return lines;
}

void check_same_model(const nn::Module& module, ProcessGroup& group, std::string_view who) {
  std::string mine;  // the lines, '\n' between them
  for (const std::string& line : describe_replica(module)) {
    mine += (mine.empty() ? "" : "\n") + line;
  }
  const std::vector<std::string> all = all_gather_text(group, mine, device_of(module));
  // Every rank now holds every description, so every rank finds the same verdict.
  const std::vector<std::string> reference = split(all[0], '\n');
  std::vector<int> differing;
  std::string first;  // the first difference of the first differing rank
  for (int r = 1; r < group.size(); ++r) {
    if (all[static_cast<std::size_t>(r)] == all[0]) continue;
    differing.push_back(r);
    if (!first.empty()) continue;
    const std::vector<std::string> theirs = split(all[static_cast<std::size_t>(r)], '\n');
    std::size_t i = 0;
    while (i < reference.size() && i < theirs.size() && reference[i] == theirs[i]) ++i;
    auto entry = [](const std::vector<std::string>& lines, std::size_t k) {
      return k < lines.size() ? "'" + lines[k] + "'" : std::string("nothing (its list ends)");
    };
    first = detail::concat("first difference at entry ", i + 1, ": rank 0 has ",
                           entry(reference, i), ", rank ", r, " has ", entry(theirs, i));
  }
  DDP_CHECK(differing.empty(), who, ": ", name_ranks(differing),
            differing.size() == 1 ? " holds" : " hold", " a different model than rank 0 (",
            reference.size(), " parameters and buffers on rank 0): ", first,
            "\nhint: every rank must build the same network with the same flags");
}

std::uint64_t parameter_hash(const nn::Module& module) {
  std::uint64_t hash = 14695981039346656037ull;  // FNV-1a, 64 bits
  for (const Variable& p : module.parameters()) {
    const std::vector<float> values = p.data().to_vector<float>();
    const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
    for (std::size_t i = 0; i < values.size() * sizeof(float); ++i) {
      hash = (hash ^ bytes[i]) * 1099511628211ull;
    }
  }
  return hash;
}

void check_parameters_in_sync(const nn::Module& module, ProcessGroup& group, std::int64_t step) {
  const auto mine = static_cast<std::int64_t>(parameter_hash(module));
  const Device device = device_of(module);
  Tensor input = from_data(std::span<const std::int64_t>(&mine, 1), {1}).to(device);
  Tensor output = empty({group.size()}, TensorOptions{.dtype = DType::Int64, .device = device});
  group.all_gather(output, input)->wait();
  const std::vector<std::int64_t> hashes = output.to_vector<std::int64_t>();
  // The majority is "right": one drifted rank among four names that rank, not the other
  // three. With no majority (two against two), rank 0's side is the reference.
  std::map<std::int64_t, int> votes;
  for (std::int64_t h : hashes) ++votes[h];
  std::int64_t reference = hashes[0];
  for (const auto& [h, count] : votes) {
    if (count > votes[reference]) reference = h;
  }
  std::vector<int> drifted;
  for (int r = 0; r < group.size(); ++r) {
    if (hashes[static_cast<std::size_t>(r)] != reference) drifted.push_back(r);
  }
  DDP_CHECK(drifted.empty(), "check-sync at step ", step, ": the parameters of ",
            name_ranks(drifted), " differ from the other ranks' (hashes of all ",
            module.parameters().size(), " parameters compared)",
            "\nhint: replicas drift when a rank skips a gradient average, updates its "
            "weights on its own, or runs a different recipe");
}

}  // namespace ddp
