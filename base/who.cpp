// rank_label and name_ranks (see who.hpp).
#include "base/who.hpp"

#include "base/error.hpp"  // detail::concat

namespace ddp {

std::string rank_label(int rank, const std::string& about) { return rank_label(rank, 0, about); }

std::string rank_label(int rank, int size, const std::string& about) {
  std::string label = detail::concat("rank ", rank);
  if (size > 0) label += detail::concat("/", size);
  if (!about.empty()) label += " (" + about + ")";
  return label;
}

std::string name_ranks(const std::vector<int>& ranks) {
  if (ranks.size() == 1) return detail::concat("rank ", ranks[0]);
  if (ranks.size() == 2) return detail::concat("ranks ", ranks[0], " and ", ranks[1]);
  std::string s = "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

std::string list_ranks(const std::vector<int>& ranks) {
  std::string s = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

}  // namespace ddp
