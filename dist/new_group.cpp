// new_group (see new_group.hpp): the checks every backend shares, the stand-in a rank
// outside the sub-group gets, and the call to the backend's split(). Chapter 05.
#include "dist/new_group.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "base/error.hpp"
#include "base/who.hpp"

namespace ddp {
namespace {

// What a rank outside the sub-group holds: it knows the group and refuses every
// collective, naming it, where a nullptr would only crash. (new_group on it is refused
// too: its check's all_gather is.)
class NonMember final : public ProcessGroup {
 public:
  NonMember(const ProcessGroup& parent, const std::vector<int>& ranks)
      : ProcessGroup(-1, static_cast<int>(ranks.size()), parent.timeout(),
                     InParent{ranks, parent.rank(), parent.size()}),
        backend_(parent.backend_name()) {}

  std::string backend_name() const override { return backend_; }
  std::shared_ptr<Work> all_reduce(Tensor&, ReduceOp) override { refuse("all_reduce"); }
  std::shared_ptr<Work> broadcast(Tensor&, int) override { refuse("broadcast"); }
  std::shared_ptr<Work> all_gather(Tensor&, const Tensor&) override { refuse("all_gather"); }
  std::shared_ptr<Work> reduce_scatter(Tensor&, const Tensor&, ReduceOp) override {
    refuse("reduce_scatter");
  }
  std::shared_ptr<Work> barrier() override { refuse("barrier"); }

 private:
  [[noreturn]] void refuse(const char* collective) const {
    DDP_FAIL(who(), ": ", collective, " refused: rank ", in_parent().rank,
             " is not a member of group ", list_ranks(in_parent().ranks),
             "\nhint: only the group's ranks call its collectives; new_group gives the "
             "others this stand-in, whose rank() is -1");
  }

  std::string backend_;
};

// "" when `ranks` is a good list for a parent of `size`, else what is wrong with it.
std::string check_list(const std::vector<int>& ranks, int size) {
  if (ranks.empty()) {
    return detail::concat("the list is empty; expected some of the parent's ranks 0..", size - 1);
  }
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= size) {
      return detail::concat("rank ", ranks[i], " (at index ", i,
                            ") is not a rank of the parent, which has ranks 0..", size - 1);
    }
    if (i > 0 && ranks[i] <= ranks[i - 1]) {
      return detail::concat(
          "expected the ranks sorted and each once, but ", ranks[i - 1], " comes before ", ranks[i],
          " (at index ", i,
          ")\nhint: rank i of the sub-group is ranks[i]; "
          "PyTorch sorts the list silently, here the order is checked: sort it and "
          "drop repeats");
    }
  }
  return "";
}

// Note [Checking that every rank passed the same list]
// A rank that passes another list would build another group, and its peers would wait
// for it until the timeout, for a reason nobody could see. So before anything is built
// every rank posts its list in one all_gather on the parent, as a bit mask of the
// parent's ranks, after a word that says whether its list was valid: exact, a few words
// a rank (1 + size/64), and every rank reads every other's. A rank with a bad list still
// takes part, so that the others learn of it at once instead of waiting out the timeout.
// `device`: where the parent's all_gather takes its tensors (the CPU, nccl's GPU).
void check_same_list(ProcessGroup& parent, Device device, const std::vector<int>& ranks,
                     const std::string& problem) {
  const std::string call = "new_group(" + list_ranks(ranks) + ")";
  const int size = parent.size();
  const std::int64_t words = 1 + (size + 63) / 64;
  Tensor mine = zeros({words}, {DType::Int64, Device::cpu()});
  auto* w = mine.data<std::int64_t>();  // [valid, mask words...]
  if (problem.empty()) {
    w[0] = 1;
    for (const int r : ranks) {
      w[1 + r / 64] = static_cast<std::int64_t>(static_cast<std::uint64_t>(w[1 + r / 64]) |
                                                (std::uint64_t{1} << (r % 64)));
    }
  }
  Tensor input = mine.to(device);
  Tensor all = zeros({size * words}, {DType::Int64, device});
  parent.all_gather(all, input)->wait();
  const std::vector<std::int64_t> got = all.to_vector<std::int64_t>();
  DDP_CHECK(problem.empty(), parent.who(), ": ", call, ": ", problem);

  std::vector<int> invalid;
  for (int r = 0; r < size; ++r) {
    if (got[r * words] != 1) invalid.push_back(r);
  }
  DDP_CHECK(invalid.empty(), parent.who(), ": ", call, ": ", name_ranks(invalid),
            " passed a list that is not valid (its own error says why); every rank of the "
            "parent passes the same list");
  // Every rank compares with rank 0's list, so that all name the same culprits.
  auto list_of = [&](int r) {
    std::vector<int> list;
    for (int q = 0; q < size; ++q) {
      if ((static_cast<std::uint64_t>(got[r * words + 1 + q / 64]) >> (q % 64)) & 1) {
        list.push_back(q);
      }
    }
    return list;
  };
  std::vector<int> other;
  for (int r = 1; r < size; ++r) {
    if (!std::equal(got.begin() + r * words, got.begin() + (r + 1) * words, got.begin())) {
      other.push_back(r);
    }
  }
  if (!other.empty()) {
    DDP_FAIL(parent.who(), ": ", call, ": ", name_ranks(other), " passed ",
             other.size() == 1 ? "another list" : "other lists", " than rank 0's ",
             list_ranks(list_of(0)), " (rank ", other[0], ": ", list_ranks(list_of(other[0])),
             ")\nhint: every rank of the parent calls new_group with the same list, in the "
             "same order relative to its other new_group calls");
  }
}

}  // namespace

std::unique_ptr<ProcessGroup> new_group(ProcessGroup& parent, const std::vector<int>& ranks) {
  check_same_list(parent, parent.own_device(), ranks, check_list(ranks, parent.size()));
  std::unique_ptr<ProcessGroup> group = parent.split(ranks);
  if (group) return group;
  return std::make_unique<NonMember>(parent, ranks);
}

}  // namespace ddp
