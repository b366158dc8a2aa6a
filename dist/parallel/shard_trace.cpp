// The sharded wrappers' instants on the timeline (see shard_trace.hpp).
#include "dist/parallel/shard_trace.hpp"

namespace ddp {
namespace {
constexpr std::string_view kCategory = "shard";
}  // namespace

void trace_shard_event(std::string_view what, std::size_t index) {
  if (trace::enabled()) trace::instant(kCategory, detail::concat(what, " ", index));
}

trace::InstantRow shard_row(std::string what, std::string title) {
  return trace::InstantRow{
      std::string(kCategory), std::move(title), [what](std::string_view name) {
        const bool ours = name.size() > what.size() + 1 && name.substr(0, what.size()) == what &&
                          name[what.size()] == ' ';
        return ours ? name.back() : char{0};
      }};
}

}  // namespace ddp
