// Sharded checkpoints (see sharded_checkpoint.hpp, Note [Sharded checkpoints]).
// Sections: the files' names -> what is written -> reading back and reassembling.
#include "dist/parallel/sharded_checkpoint.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <system_error>

#include "autograd/grad_mode.hpp"
#include "base/error.hpp"

namespace ddp {

namespace {

// The manifest's entries (Note [Sharded checkpoints]); every value int64.
//   shards.version       [1]           kShardedCheckpointVersion
//   shards.world_size    [1]           the ranks that saved it
//   shards.generation    [1]           in the shard files' names
//   shards.flat.<j>      [2]           flat buffer j: (numel, S)
//   shards.param.<name>  [3 + ndim]    parameter <name>: (index, flat j, offset, shape...)
//   shards.file.<r>      [2]           rank r's file: (bytes, CRC-32)
// Buffers ("model.<name>") and the parameters' places come in the model's state_dict order.
constexpr char kPrefix[] = "shards.";
constexpr char kParamPrefix[] = "shards.param.";
constexpr char kOptimizerPrefix[] = "optimizer.";  // a shard file's "optimizer.<kind>.<j>"

Tensor int64s(const std::vector<std::int64_t>& values) {
  return from_data(std::span<const std::int64_t>(values),
                   {static_cast<std::int64_t>(values.size())});
}

// "ck" + generation 3, rank 1 of 4 -> "ck.g3.rank1-of-4".
std::string shard_file_name(const std::string& base, std::int64_t generation, int rank, int world) {
  return base + ".g" + std::to_string(generation) + ".rank" + std::to_string(rank) + "-of-" +
         std::to_string(world);
}

// The (generation, world) of a shard file name of `base`, or nothing for any other name.
std::optional<std::pair<std::int64_t, int>> parse_shard_file_name(const std::string& base,
                                                                  const std::string& name) {
  const std::string head = base + ".g";
  if (!name.starts_with(head)) return std::nullopt;
  long long generation = 0;
  int rank = 0, world = 0;
  char tail = 0;
  const std::string rest = name.substr(head.size());
  // %c after the last number: anything left over (a ".tmp.<pid>") is not a shard file; nor
  // is a name that only reads as one ("g03").
  if (std::sscanf(rest.c_str(), "%lld.rank%d-of-%d%c", &generation, &rank, &world, &tail) != 3 ||
      rest != shard_file_name("", generation, rank, world).substr(2)) {
    return std::nullopt;
  }
  return std::make_pair(static_cast<std::int64_t>(generation), world);
}

// "ck.g3.rank1-of-4.tmp.5171" -> "ck.g3.rank1-of-4": the file that nn::save_state_dict's
// temporary file "<target>.tmp.<pid>" was to become; nothing for any other name.
std::optional<std::string> temporary_file_target(const std::string& name) {
  const std::string marker = ".tmp.";
  const std::size_t at = name.rfind(marker);
  if (at == std::string::npos || at == 0) return std::nullopt;
  const std::string pid = name.substr(at + marker.size());
  if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return name.substr(0, at);
}

}  // namespace

std::filesystem::path shard_file_path(const std::filesystem::path& manifest,
                                      std::int64_t generation, int rank, int world) {
  return manifest.parent_path() /
         shard_file_name(manifest.filename().string(), generation, rank, world);
}

// ---- What is written: each rank's slices, then the manifest ----------------------------

std::vector<SavedFlat> saved_flats(
    const std::vector<const FlatParameter*>& flats,
    const std::vector<std::pair<std::string, Variable>>& named_parameters) {
  std::vector<Variable> parameters;
  for (const auto& [name, p] : named_parameters) parameters.push_back(p);
  std::vector<SavedFlat> out;
  for (const FlatParameter* flat : flats) {
    SavedFlat saved{.layout = flat->layout(), .places = places_of(*flat, parameters), .names = {}};
    for (std::size_t i : saved.places.index) saved.names.push_back(named_parameters[i].first);
    out.push_back(std::move(saved));
  }
  return out;
}

nn::StateDict shard_file_entries(int rank, int world, std::int64_t generation,
                                 const std::vector<SavedFlat>& flats,
                                 const std::vector<Tensor>& shards,
                                 const nn::StateDict& local_state) {
  DDP_CHECK(shards.size() == flats.size(), "shard_file_entries: ", shards.size(), " shards for ",
            flats.size(), " flat buffers");
  nn::StateDict out = {{"shard.rank", int64s({rank})},
                       {"shard.world_size", int64s({world})},
                       {"shard.generation", int64s({generation})}};
  // The padding is not written: rank r's real elements are [begin(r), real_end(r)).
  auto real = [&](const Tensor& slice, std::size_t j) {
    return slice.narrow(0, 0, flats[j].layout.real_numel(rank));
  };
  for (std::size_t j = 0; j < flats.size(); ++j) {
    out.emplace_back("param." + std::to_string(j), real(shards[j], j));
  }
  for (const auto& [name, tensor] : local_state) {
    const std::size_t j = split_entry_name(name, "shard_file_entries: the local state").second;
    DDP_CHECK(j < flats.size(), "shard_file_entries: optimizer entry '", name, "' but ",
              flats.size(), " flat buffers");
    out.emplace_back("optimizer." + name,
                     tensor.dtype() == DType::Int64 ? tensor : real(tensor, j));
  }
  return out;
}

nn::StateDict manifest_entries(std::int64_t generation, const std::vector<SavedFlat>& flats,
                               const nn::StateDict& model_state, const nn::StateDict& rest,
                               const std::vector<nn::FileSummary>& files) {
  const int world = static_cast<int>(files.size());
  nn::StateDict out = {{"shards.version", int64s({kShardedCheckpointVersion})},
                       {"shards.world_size", int64s({world})},
                       {"shards.generation", int64s({generation})}};
  std::map<std::string, std::vector<std::int64_t>> place;  // parameter name -> its entry
  for (std::size_t j = 0; j < flats.size(); ++j) {
    const SavedFlat& f = flats[j];
    DDP_CHECK(f.layout.world == world, "manifest_entries: flat buffer ", j, " is split over ",
              f.layout.world, " ranks, but ", world, " files were written");
    out.emplace_back("shards.flat." + std::to_string(j),
                     int64s({f.layout.numel, f.layout.shard_numel}));
    for (std::size_t k = 0; k < f.names.size(); ++k) {
      std::vector<std::int64_t> v = {static_cast<std::int64_t>(f.places.index[k]),
                                     static_cast<std::int64_t>(j), f.places.offset[k]};
      v.insert(v.end(), f.places.shape[k].begin(), f.places.shape[k].end());
      place[f.names[k]] = std::move(v);
    }
  }
  for (const auto& [name, tensor] : model_state) {
    const auto it = place.find(name);
    if (it == place.end()) {
      out.emplace_back("model." + name, tensor);  // a buffer: replicated, written once here
    } else {
      out.emplace_back(kParamPrefix + name, int64s(it->second));
    }
  }
  out.insert(out.end(), rest.begin(), rest.end());
  for (int r = 0; r < world; ++r) {
    const nn::FileSummary& file = files[static_cast<std::size_t>(r)];
    out.emplace_back("shards.file." + std::to_string(r),
                     int64s({static_cast<std::int64_t>(file.bytes), file.crc32}));
  }
  return out;
}

bool is_manifest(const nn::StateDict& state) {
  return std::any_of(state.begin(), state.end(),
                     [](const auto& e) { return e.first == "shards.version"; });
}

// ---- Reading back: the manifest, every shard file checked, the flat buffers rebuilt -----

namespace {

// The manifest as read: its entries by name, and what they say.
struct Manifest {
  std::string path;
  int world = 0;
  std::int64_t generation = 0;
  std::vector<ShardLayout> layouts;    // flat buffer j
  std::vector<FlatPlaces> places;      // the parameters of flat buffer j
  std::vector<nn::FileSummary> files;  // rank r's file
};

std::vector<std::int64_t> values_of(const nn::StateDict& manifest, const std::string& name,
                                    const std::string& path, std::size_t at_least) {
  for (const auto& [key, t] : manifest) {
    if (key != name) continue;
    DDP_CHECK(t.dtype() == DType::Int64 && static_cast<std::size_t>(t.numel()) >= at_least,
              "sharded checkpoint ", path, ": manifest entry '", name, "' is ", t.describe(),
              ", expected at least ", at_least, " int64 values");
    return t.to_vector<std::int64_t>();
  }
  DDP_FAIL("sharded checkpoint ", path, ": the manifest has no entry '", name,
           "'\nhint: was it written by ddp-train --save-format sharded?");
}

// Whether `shape` (no negative dimension) has at most `room` elements, without
// overflowing on the way (a manifest read from disk may say anything).
bool fits(const Shape& shape, std::int64_t room) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return true;
  std::int64_t n = 1;
  for (const std::int64_t d : shape) {
    if (n > room / d) return false;
    n *= d;
  }
  return true;
}

Manifest read_manifest(const std::filesystem::path& path, const nn::StateDict& entries) {
  Manifest m;
  m.path = path.string();
  const std::int64_t version = values_of(entries, "shards.version", m.path, 1)[0];
  DDP_CHECK(version == kShardedCheckpointVersion, "sharded checkpoint ", m.path,
            ": manifest version ", version, ", this build reads version ",
            kShardedCheckpointVersion);
  const std::int64_t world = values_of(entries, "shards.world_size", m.path, 1)[0];
  m.generation = values_of(entries, "shards.generation", m.path, 1)[0];
  DDP_CHECK(world >= 1 && world <= INT_MAX, "sharded checkpoint ", m.path, ": world size ", world);
  m.world = static_cast<int>(world);
  for (std::size_t j = 0;; ++j) {
    const std::string name = "shards.flat." + std::to_string(j);
    const auto named = [&](const auto& e) { return e.first == name; };
    if (std::none_of(entries.begin(), entries.end(), named)) break;
    const std::vector<std::int64_t> v = values_of(entries, name, m.path, 2);
    const ShardLayout layout = make_shard_layout(v[0], m.world);
    DDP_CHECK(layout.shard_numel == v[1], "sharded checkpoint ", m.path, ": flat buffer ", j,
              " of ", v[0], " elements over ", m.world, " ranks has shards of ", layout.shard_numel,
              ", the manifest says ", v[1]);
    m.layouts.push_back(layout);
  }
  m.places.resize(m.layouts.size());
  // Each parameter's entry: (index, flat j, offset, shape...). The indices are the model's
  // parameters() positions, which name the optimizer's entries: each of 0 .. P-1 once.
  const auto parameters = std::count_if(entries.begin(), entries.end(), [](const auto& e) {
    return e.first.starts_with(kParamPrefix);
  });
  std::set<std::int64_t> indices;
  for (const auto& [name, t] : entries) {
    if (!name.starts_with(kParamPrefix)) continue;
    const std::vector<std::int64_t> v = values_of(entries, name, m.path, 3);
    const std::string where = "sharded checkpoint " + m.path + ": manifest entry '" + name + "'";
    DDP_CHECK(v[0] >= 0 && v[0] < parameters && indices.insert(v[0]).second, where,
              " gives the parameter index ", v[0], ", but the manifest places ", parameters,
              " parameters, each at one of the indices 0 .. ", parameters - 1);
    const Shape shape(v.begin() + 3, v.end());
    DDP_CHECK(std::all_of(shape.begin(), shape.end(), [](std::int64_t d) { return d >= 0; }),
              where, " gives the parameter the shape ", shape_str(shape),
              ", which has a negative dimension");
    const auto j = static_cast<std::size_t>(v[1]);
    DDP_CHECK(v[1] >= 0 && j < m.layouts.size() && v[2] >= 0 && v[2] <= m.layouts[j].numel &&
                  fits(shape, m.layouts[j].numel - v[2]),
              where, " places a parameter of shape ", shape_str(shape), " at offset ", v[2],
              " of flat buffer ", v[1], ", which the manifest's layout does not have");
    m.places[j].index.push_back(static_cast<std::size_t>(v[0]));
    m.places[j].offset.push_back(v[2]);
    m.places[j].shape.push_back(shape);
  }
  for (int r = 0; r < m.world; ++r) {
    const std::vector<std::int64_t> v =
        values_of(entries, "shards.file." + std::to_string(r), m.path, 2);
    m.files.push_back({static_cast<std::uint64_t>(v[0]), static_cast<std::uint32_t>(v[1])});
  }
  return m;
}

// Rank r's shard file, read and checked against the manifest: there, the bytes and the
// CRC-32 the manifest recorded, its own rank, world and generation.
nn::StateDict read_shard_file(const Manifest& m, int r) {
  const std::filesystem::path file = shard_file_path(m.path, m.generation, r, m.world);
  const nn::FileSummary& expected = m.files[static_cast<std::size_t>(r)];
  const std::string who = "sharded checkpoint " + m.path + ": rank " + std::to_string(r) +
                          "'s shard file " + file.string();
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(file, ec);
  DDP_CHECK(!ec, who, " is missing (", ec.message(), "); the manifest names it, ", expected.bytes,
            " bytes\nhint: a sharded checkpoint is its manifest and every "
            "shard file it names, side by side: copy or move them together");
  DDP_CHECK(size == expected.bytes, who, " has ", size, " bytes, the manifest expects ",
            expected.bytes, ": not the file this checkpoint wrote");
  nn::FileSummary got;
  nn::StateDict state = nn::read_state_dict(file, &got);
  DDP_CHECK(got.crc32 == expected.crc32, who, " has CRC-32 ", got.crc32, ", the manifest expects ",
            expected.crc32, ": not the file this checkpoint wrote");
  const std::pair<const char*, std::int64_t> header[] = {
      {"shard.rank", r}, {"shard.world_size", m.world}, {"shard.generation", m.generation}};
  for (const auto& [name, want] : header) {
    const std::int64_t have = values_of(state, name, file.string(), 1)[0];
    DDP_CHECK(have == want, who, " says ", name, " ", have, ", the manifest expects ", want);
  }
  return state;
}

// The flat buffers rebuilt from every rank's slices, in rank order: "param.<j>" and
// "optimizer.<kind>.<j>" (float32, numel elements), in rank 0's order; step counts whole.
nn::StateDict rebuild_flats(const Manifest& m) {
  NoGradGuard no_grad;
  nn::StateDict whole;
  for (int r = 0; r < m.world; ++r) {
    nn::StateDict state = read_shard_file(m, r);
    std::erase_if(state, [](const auto& e) { return e.first.starts_with("shard."); });
    const std::string file = shard_file_path(m.path, m.generation, r, m.world).string();
    const std::string who =
        "sharded checkpoint " + m.path + ": rank " + std::to_string(r) + "'s shard file " + file;
    DDP_CHECK(r == 0 || state.size() == whole.size(), who, " has ", state.size(),
              " entries, rank 0's has ", whole.size());
    for (std::size_t e = 0; e < state.size(); ++e) {
      const auto& [name, slice] = state[e];
      const auto [kind, j] = split_entry_name(name, who);
      DDP_CHECK(kind == "param" || (kind.starts_with(kOptimizerPrefix) &&
                                    kind.size() > std::string(kOptimizerPrefix).size()),
                who, ": entry '", name, "' is neither param.<j> nor optimizer.<kind>.<j>");
      DDP_CHECK(j < m.layouts.size(), who, " has '", name, "', but the manifest has ",
                m.layouts.size(), " flat buffers");
      const ShardLayout& layout = m.layouts[j];
      if (r == 0) {
        whole.emplace_back(name, slice.dtype() == DType::Int64
                                     ? slice
                                     : empty({layout.numel}, {.dtype = DType::Float32}));
      }
      DDP_CHECK(whole[e].first == name, "sharded checkpoint ", m.path, ": rank ", r,
                "'s shard file ", file, " has '", name, "' where rank 0's has '", whole[e].first,
                "'");
      if (slice.dtype() == DType::Int64) {  // a step count: the same on every rank
        DDP_CHECK(slice.to_vector<std::int64_t>() == whole[e].second.to_vector<std::int64_t>(),
                  "sharded checkpoint ", m.path, ": rank ", r, "'s shard file ", file, ": '", name,
                  "' differs from rank 0's");
        continue;
      }
      DDP_CHECK(slice.numel() == layout.real_numel(r), "sharded checkpoint ", m.path, ": rank ", r,
                "'s shard file ", file, ": '", name, "' has ", slice.numel(),
                " elements; the manifest's layout gives rank ", r, " elements [", layout.begin(r),
                ", ", layout.real_end(r), ") of flat buffer ", j, "'s ", layout.numel, ": ",
                layout.real_numel(r));
      if (slice.numel() > 0) whole[e].second.narrow(0, layout.begin(r), slice.numel()).copy_(slice);
    }
  }
  return whole;
}

}  // namespace

nn::StateDict reassemble_checkpoint(const std::filesystem::path& path,
                                    const nn::StateDict& manifest) {
  const Manifest m = read_manifest(path, manifest);
  const nn::StateDict whole = rebuild_flats(m);  // every entry's name checked there
  std::map<std::string, Tensor> flat;  // "param.<j>" -> flat buffer j's parameters
  nn::StateDict optimizer;
  const std::string rank0 = shard_file_path(path, m.generation, 0, m.world).string();
  for (const auto& [name, tensor] : whole) {
    if (name.starts_with("param.")) {
      flat[name] = tensor;
      continue;
    }
    // "optimizer.<kind>.<j>": cut exactly as consolidate_optimizer_state cuts its gather.
    const auto [kind, j] = split_entry_name(name, rank0);
    unflatten_optimizer_entry(kind.substr(std::string(kOptimizerPrefix).size()), tensor,
                              m.places[j], optimizer);
  }
  sort_by_parameter(optimizer);
  nn::StateDict out, rest;
  for (const auto& [name, tensor] : manifest) {
    if (name.starts_with(kParamPrefix)) {
      const std::vector<std::int64_t> v = tensor.to_vector<std::int64_t>();
      const Shape shape(v.begin() + 3, v.end());
      const auto buffer_it = flat.find("param." + std::to_string(v[1]));
      DDP_CHECK(buffer_it != flat.end(), "sharded checkpoint ", m.path, ": manifest entry '", name,
                "' places the parameter in flat buffer ", v[1], ", but the shard files (",
                rank0, ", ...) have no 'param.", v[1], "'");
      const Tensor& buffer = buffer_it->second;
      out.emplace_back("model." + name.substr(std::string(kParamPrefix).size()),
                       buffer.narrow(0, v[2], numel(shape)).view(shape).clone());
    } else if (name.starts_with("model.")) {
      out.emplace_back(name, tensor);
    } else if (!name.starts_with(kPrefix)) {
      rest.emplace_back(name, tensor);
    }
  }
  for (auto& [name, tensor] : optimizer) out.emplace_back("optimizer." + name, tensor);
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

nn::StateDict read_checkpoint(const std::filesystem::path& path, int* shard_files) {
  nn::StateDict state = nn::read_state_dict(path);
  if (shard_files) *shard_files = 0;
  if (!is_manifest(state)) return state;
  nn::StateDict whole = reassemble_checkpoint(path, state);
  if (shard_files) {
    *shard_files = static_cast<int>(values_of(state, "shards.world_size", path.string(), 1)[0]);
  }
  return whole;
}

std::int64_t next_generation(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return 1;
  try {
    const nn::StateDict state = nn::read_state_dict(path);
    if (!is_manifest(state)) return 1;
    return values_of(state, "shards.generation", path.string(), 1)[0] + 1;
  } catch (const Error&) {
    return 1;  // unreadable: it names no files that a new generation could overwrite
  }
}

int remove_stale_shard_files(const std::filesystem::path& path, std::int64_t generation,
                             int world) {
  const std::filesystem::path folder =
      path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  const std::string base = path.filename().string();
  // Stale: a shard file of another (generation, world), and any temporary file of a shard
  // file or of `path` itself, whatever its generation. When this runs, no rank is writing
  // one: every rank's shard file of this save was renamed into place before the manifest
  // was written (and a failed write deletes its own), and the manifest's was renamed just
  // now. So a ".tmp.<pid>" here is a killed save's, the current generation's included: a
  // save that dies before its manifest leaves the old one, and the next save reuses the
  // dead save's generation (next_generation).
  auto stale = [&](const std::string& name) {
    if (const auto shard = parse_shard_file_name(base, name)) {
      return shard->first != generation || shard->second != world;
    }
    const std::optional<std::string> target = temporary_file_target(name);
    return target && (*target == base || parse_shard_file_name(base, *target).has_value());
  };
  // Best effort, and it never throws: the checkpoint is already committed, and a stale file
  // left behind is named by no manifest (the next save tries again). Hence increment(ec):
  // the range-for's ++ throws filesystem_error, which the caller would report as a failed
  // save after the commit.
  std::vector<std::filesystem::path> doomed;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(folder, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code type_ec;  // an entry gone meanwhile: skipped, the listing goes on
    if (stale(it->path().filename().string()) && it->is_regular_file(type_ec)) {
      doomed.push_back(it->path());
    }
  }
  if (ec) {
    std::fprintf(stderr,
                 "ddp: warning: could not list %s to remove the stale files of checkpoint %s "
                 "(%s); the next save tries again\n",
                 folder.string().c_str(), path.string().c_str(), ec.message().c_str());
  }
  int removed = 0;
  for (const auto& file : doomed) removed += std::filesystem::remove(file, ec) ? 1 : 0;
  return removed;
}

}  // namespace ddp
