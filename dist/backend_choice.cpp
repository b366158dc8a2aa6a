// choose_backend (see backend_choice.hpp): --backend auto, decided by GPU identity.
// Chapter 05.
#include "dist/backend_choice.hpp"

#include <map>
#include <optional>
#include <utility>

#include "base/error.hpp"
#include "base/text.hpp"  // split, to_integer

namespace ddp {

namespace {

// "GPU-5d2c3e4f": enough of a UUID to tell a node's GPUs apart on one line.
std::string short_uuid(const std::string& uuid) { return uuid.substr(0, 12); }

// "rank 2", "ranks 2 and 5", "ranks 2, 3 and 5".
std::string list_ranks(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

}  // namespace

BackendChoice choose_backend(const std::vector<RankGpu>& ranks, bool nccl_built) {
  std::vector<int> on_cpu;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].gpu_uuid.empty()) on_cpu.push_back(static_cast<int>(r));
  }
  if (on_cpu.size() == ranks.size()) return {"tcp", "the ranks train on the CPU"};
  if (!on_cpu.empty()) {
    return {"tcp", detail::concat(list_ranks(on_cpu), on_cpu.size() == 1 ? " trains" : " train",
                                  " on the CPU")};
  }

  // Two ranks on one GPU: NCCL refuses them, the tcp group stages through host memory.
  // The UUID says which GPU it is, whatever index each rank knows it by, and whatever the
  // host is called (containers on one node may each have a name of their own).
  std::map<std::string, int> owner;  // uuid -> first rank
  std::map<std::string, int> ranks_on;                       // host -> ranks there
  for (const RankGpu& r : ranks) ++ranks_on[r.host];
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const RankGpu& me = ranks[r];
    const auto [it, fresh] = owner.emplace(me.gpu_uuid, static_cast<int>(r));
    if (fresh) continue;
    const int here = ranks_on[me.host];
    return {"tcp", detail::concat(list_ranks({it->second, static_cast<int>(r)}), " on ", me.host,
                                  " share ", short_uuid(me.gpu_uuid),
                                  me.visible_gpus < here
                                      ? detail::concat(" (", here, " ranks, ", me.visible_gpus,
                                                       me.visible_gpus == 1 ? " GPU" : " GPUs",
                                                       " in view)")
                                      : std::string(),
                                  "; nccl wants a GPU per rank")};
  }

  if (!nccl_built) {
    return {"tcp", "every rank has a GPU of its own, but this build has no NCCL: for nccl, "
                   "set NCCL_HOME to NCCL's prefix (>= 2.14) and reconfigure"};
  }
  return {"nccl", "every rank has a GPU of its own"};
}

bool nccl_built() {
#ifdef DDP_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

// ---- On the wire -----------------------------------------------------------------------
std::string encode(const RankGpu& rank) {
  return detail::concat(rank.host, '\t', rank.gpu_uuid, '\t', rank.visible_gpus);
}

RankGpu decode_rank_gpu(const std::string& line) {
  const std::vector<std::string> f = split(line, '\t');
  const std::optional<int> visible = f.size() == 3 ? to_integer<int>(f[2]) : std::nullopt;
  DDP_CHECK(visible.has_value(), "--backend auto: a rank's GPU report '", line,
            "' is not 'host<TAB>uuid<TAB>visible GPUs'");
  return {f[0], f[1], *visible};
}

}  // namespace ddp
