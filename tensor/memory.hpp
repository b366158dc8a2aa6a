// ddp::memory: the bytes this process holds in tensors, live and at their peak, by what
// they are for, and an optional budget. Chapter 09.
//
// Every Storage (CPU, GPU and page-locked host memory alike) is counted from its
// allocation to its free under one category. A new storage takes its thread's current
// category (Activations unless a Scope says otherwise); the code that knows better
// retags it: a Module's parameters and buffers, autograd's gradients, an optimizer's
// state, a process group's staging buffers. The counts are the bytes the tensors asked
// for (what torch.cuda.memory_allocated reports), not what the caching allocator keeps
// in reserve, and not the std::vectors of the communication code.
//
// The budget (set_limit, or DDP_MEMORY_LIMIT_MB through limit_from_environment) makes
// an allocation that would take the live total past it throw a ddp::Error naming the
// budget, the category and the bytes asked, before anything is allocated: the "does
// this model fit one rank?" question of chapter 09, asked on any machine.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ddp {
class Tensor;
}

namespace ddp::memory {

enum class Category : std::uint8_t {
  Parameters,      // a Module's parameters and buffers: the model's state
  Gradients,       // the parameters' .grad (under DDP: the Reducer's buckets they view)
  OptimizerState,  // momentum, Adam's moments
  Activations,     // everything else: activations kept for backward, temporaries
  Communication,   // staging and bucket copies made for a collective
};
inline constexpr int kCategories = 5;
std::string_view name(Category category);  // "parameters", "optimizer state", ...

// New storages on this thread take `category` while the Scope lives. Scopes nest.
class Scope {
 public:
  explicit Scope(Category category);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Category previous_;
};
Category current();  // this thread's category for new storages

// Moves the bytes of `tensor`'s whole storage to `category` (views share one storage:
// a gradient that views a bucket retags the bucket). Undefined tensors are ignored.
void tag(const Tensor& tensor, Category category);

struct Counts {
  std::int64_t live = 0;  // bytes held now
  std::int64_t peak = 0;  // the most held at once since the last reset_peaks()
};
struct Snapshot {
  std::array<Counts, kCategories> by_category{};
  Counts total;
  const Counts& operator[](Category c) const { return by_category[static_cast<int>(c)]; }
};
Snapshot snapshot();
void reset_peaks();  // every peak := its live bytes (the start of a measured region)

// ---- The budget ---------------------------------------------------------------------------
// nullopt: no budget (the default). A limit below the live total applies to the next
// allocation. `source` is how the budget error names where it came from
// ("DDP_MEMORY_LIMIT_MB=512").
void set_limit(std::optional<std::int64_t> bytes, std::string source = "memory::set_limit");
// DDP_MEMORY_LIMIT_MB (MiB, a positive integer) as bytes; nullopt when unset or empty;
// a ddp::Error naming the variable and its value when it is not a positive integer.
std::optional<std::int64_t> limit_from_environment();

// A table of the snapshot, one row per category and a total, in MiB with the bytes:
//   category          live MiB   peak MiB         live bytes
std::string format_table(const Snapshot& snapshot);

// ---- What Storage calls -------------------------------------------------------------------
// Counts `nbytes` under `category`; throws the budget's ddp::Error instead when they do
// not fit (nothing counted then).
void on_allocate(Category category, std::size_t nbytes);
void on_free(Category category, std::size_t nbytes) noexcept;
void on_retag(Category from, Category to, std::size_t nbytes) noexcept;

}  // namespace ddp::memory
