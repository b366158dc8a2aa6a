// check_same_model and check_parameters_in_sync (see replica_check.hpp). Chapter 06.
#include "dist/parallel/replica_check.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include "base/error.hpp"

namespace ddp {

namespace {

Device device_of(const nn::Module& module) {
  const auto parameters = module.parameters();
  return parameters.empty() ? Device::cpu() : parameters.front().device();
}

// "1, 3" for {1, 3}.
std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

std::string ranks_word(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rank_list(ranks);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    start = end == std::string::npos ? text.size() : end + 1;
  }
  return lines;
}

}  // namespace

std::vector<std::string> all_gather_text(ProcessGroup& group, const std::string& text,
                                         Device device) {
  // Collectives move tensors of one shape on every rank, so first the lengths, then every
  // text padded to the longest, 8 bytes per int64 element.
  const auto world = static_cast<std::int64_t>(group.size());
  const std::int64_t mine = static_cast<std::int64_t>(text.size());
  const TensorOptions int64s{.dtype = DType::Int64, .device = device};
  Tensor length = from_data(std::span<const std::int64_t>(&mine, 1), {1}).to(device);
  Tensor lengths = empty({world}, int64s);
  group.all_gather(lengths, length)->wait();
  const std::vector<std::int64_t> all_lengths = lengths.to_vector<std::int64_t>();
  const std::int64_t longest = *std::max_element(all_lengths.begin(), all_lengths.end());
  const std::int64_t words = (longest + 7) / 8;
  std::vector<std::int64_t> packed(static_cast<std::size_t>(words), 0);
  std::memcpy(packed.data(), text.data(), text.size());
  Tensor input = from_data(std::span<const std::int64_t>(packed), {words}).to(device);
  Tensor output = empty({world * words}, int64s);
  group.all_gather(output, input)->wait();
  const std::vector<std::int64_t> all = output.to_vector<std::int64_t>();
  std::vector<std::string> texts;
  for (std::int64_t r = 0; r < world; ++r) {
    const char* bytes = reinterpret_cast<const char*>(all.data() + r * words);
    texts.emplace_back(bytes, static_cast<std::size_t>(all_lengths[static_cast<std::size_t>(r)]));
  }
  return texts;
}

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

void check_same_model(const nn::Module& module, ProcessGroup& group) {
  std::string mine;
  for (const std::string& line : describe_replica(module)) mine += line + '\n';
  const std::vector<std::string> all = all_gather_text(group, mine, device_of(module));
  // Every rank now holds every description, so every rank finds the same verdict.
  const std::vector<std::string> reference = split_lines(all[0]);
  std::vector<int> differing;
  std::string first;  // the first difference of the first differing rank
  for (int r = 1; r < group.size(); ++r) {
    if (all[static_cast<std::size_t>(r)] == all[0]) continue;
    differing.push_back(r);
    if (!first.empty()) continue;
    const std::vector<std::string> theirs = split_lines(all[static_cast<std::size_t>(r)]);
    std::size_t i = 0;
    while (i < reference.size() && i < theirs.size() && reference[i] == theirs[i]) ++i;
    auto entry = [](const std::vector<std::string>& lines, std::size_t k) {
      return k < lines.size() ? "'" + lines[k] + "'" : std::string("nothing (its list ends)");
    };
    first = detail::concat("first difference at entry ", i + 1, ": rank 0 has ",
                           entry(reference, i), ", rank ", r, " has ", entry(theirs, i));
  }
  DDP_CHECK(differing.empty(), "DistributedDataParallel: ", ranks_word(differing),
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
            ranks_word(drifted), " differ from the other ranks' (hashes of all ",
            module.parameters().size(), " parameters compared)",
            "\nhint: replicas drift when a rank skips a gradient average, updates its "
            "weights on its own, or runs a different recipe");
}

}  // namespace ddp
