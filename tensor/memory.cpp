// ddp::memory (see memory.hpp): atomic counters per category, a thread's current category,
// and the budget checked before each allocation.
#include "tensor/memory.hpp"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "base/error.hpp"
#include "base/units.hpp"
#include "tensor/tensor.hpp"

namespace ddp::memory {
namespace {

struct Counter {
  std::atomic<std::int64_t> live{0};
  std::atomic<std::int64_t> peak{0};

  void add(std::int64_t bytes) {
    const std::int64_t now = live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::int64_t seen = peak.load(std::memory_order_relaxed);
    while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }
  void sub(std::int64_t bytes) { live.fetch_sub(bytes, std::memory_order_relaxed); }
  Counts read() const {
    return {live.load(std::memory_order_relaxed), peak.load(std::memory_order_relaxed)};
  }
};

struct Tally {
  std::array<Counter, kCategories> by_category;
  Counter total;
  std::atomic<std::int64_t> limit{-1};  // -1: none
  std::mutex source_mutex;
  std::string limit_source;
};

Tally& tally() {
  static Tally instance;
  return instance;
}

thread_local Category t_current = Category::Activations;

std::string mib(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / kMiB);
  return text;
}

}  // namespace

std::string_view name(Category category) {
  switch (category) {
    case Category::Parameters: return "parameters";
    case Category::Gradients: return "gradients";
    case Category::OptimizerState: return "optimizer state";
    case Category::Activations: return "activations";
    case Category::Communication: return "communication";
  }
  return "unknown";
}

Scope::Scope(Category category) : previous_(t_current) { t_current = category; }
Scope::~Scope() { t_current = previous_; }
Category current() { return t_current; }

void tag(const Tensor& tensor, Category category) {
  if (tensor.defined()) tensor.storage()->set_category(category);
}

Snapshot snapshot() {
  Snapshot out;
  for (int c = 0; c < kCategories; ++c) out.by_category[c] = tally().by_category[c].read();
  out.total = tally().total.read();
  return out;
}

void reset_peaks() {
  Tally& l = tally();
  for (Counter& c : l.by_category) c.peak.store(c.live.load());
  l.total.peak.store(l.total.live.load());
}

void set_limit(std::optional<std::int64_t> bytes, std::string source) {
  DDP_CHECK(!bytes || *bytes > 0, "memory::set_limit: a budget must be positive, got ", *bytes);
  Tally& l = tally();
  {
    std::lock_guard lock(l.source_mutex);
    l.limit_source = std::move(source);
  }
  l.limit.store(bytes ? *bytes : -1);
}

std::optional<std::int64_t> limit_from_environment() {
  const char* text = std::getenv("DDP_MEMORY_LIMIT_MB");
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long megabytes = std::strtoll(text, &end, 10);
  DDP_CHECK(*end == '\0' && errno == 0 && megabytes > 0 && megabytes < (1LL << 40),
            "DDP_MEMORY_LIMIT_MB='", text,
            "' is not a budget: expected a positive whole number of MiB (e.g. 512)");
  return megabytes * kMiB;
}

std::string format_table(const Snapshot& s) {
  std::string out;
  char line[128];
  std::snprintf(line, sizeof line, "  %-16s %11s %11s %15s\n", "category", "live MiB", "peak MiB",
                "live bytes");
  out += line;
  const auto row = [&](std::string_view label, const Counts& c) {
    std::snprintf(line, sizeof line, "  %-16.*s %11.2f %11.2f %15lld\n",
                  static_cast<int>(label.size()), label.data(), static_cast<double>(c.live) / kMiB,
                  static_cast<double>(c.peak) / kMiB, static_cast<long long>(c.live));
    out += line;
  };
  for (int c = 0; c < kCategories; ++c) row(name(static_cast<Category>(c)), s.by_category[c]);
  row("total", s.total);
  return out;
}

void on_allocate(Category category, std::size_t nbytes) {
  Tally& l = tally();
  const auto bytes = static_cast<std::int64_t>(nbytes);
  const std::int64_t budget = l.limit.load(std::memory_order_relaxed);
  // Checked, then counted: two threads allocating at once may both pass a budget that
  // only one of them fits. A budget is a teaching and planning tool, not an allocator.
  if (budget >= 0 && l.total.live.load(std::memory_order_relaxed) + bytes > budget) {
    std::string held;
    for (int c = 0; c < kCategories; ++c) {
      held += detail::concat(c == 0 ? "" : ", ", name(static_cast<Category>(c)), " ",
                             mib(l.by_category[c].live.load()));
    }
    std::string source;
    {
      std::lock_guard lock(l.source_mutex);
      source = l.limit_source;
    }
    DDP_FAIL("memory budget exceeded: allocating ", bytes, " bytes (", mib(bytes), ") of ",
             name(category), " would hold ", mib(l.total.live.load() + bytes),
             " in tensors, over the budget of ", mib(budget), " (", source, ")\nheld now: ",
             held, "\nhint: a smaller model or batch, or a larger budget");
  }
  l.total.add(bytes);
  l.by_category[static_cast<int>(category)].add(bytes);
}

void on_free(Category category, std::size_t nbytes) noexcept {
  Tally& l = tally();
  l.by_category[static_cast<int>(category)].sub(static_cast<std::int64_t>(nbytes));
  l.total.sub(static_cast<std::int64_t>(nbytes));
}

void on_retag(Category from, Category to, std::size_t nbytes) noexcept {
  if (from == to) return;
  Tally& l = tally();
  l.by_category[static_cast<int>(from)].sub(static_cast<std::int64_t>(nbytes));
  l.by_category[static_cast<int>(to)].add(static_cast<std::int64_t>(nbytes));
}

}  // namespace ddp::memory
