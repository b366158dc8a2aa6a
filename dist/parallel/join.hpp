// Join: training on uneven inputs with DistributedDataParallel. Chapter 08.
//
// A rank that runs out of batches before the others (a dataset that does not divide by
// the world, per-rank data of different sizes) would stop calling collectives, and the
// others would wait in their next all-reduce until the timeout. Inside a Join, that rank
// calls finish() instead: it SHADOWS the others' collectives with zeros until every rank
// has run out, and then every rank takes the model of the last rank to finish. Our version
// of PyTorch's torch.distributed.algorithms.Join. It sees the model only through the
// Joinable interface (joinable.hpp), which DDP implements; it holds one Joinable (not a
// list, as PyTorch, whose ZeroRedundancyOptimizer is Joinable too: chapter 09's sharded
// classes are not, and do not go inside a Join). No collectives in constructor or
// destructor.
//
//   Join join(ddp, JoinOptions{.divide_by_initial_world_size = true});
//   for (const Batch& batch : my_batches) {      // each rank its own number of batches
//     Variable loss = cross_entropy(ddp(batch.images), batch.labels);  // counts (Note)
//     loss.backward();  ddp.average_gradients();  sgd.step();
//   }
//   join.finish();      // shadows until every rank has run out; then the final sync
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "dist/parallel/joinable.hpp"

namespace ddp {

// ---- One iteration's count (pure: the unit test's part) --------------------------------

// What every rank learns from the count all-reduce of one iteration. The all-reduced
// vector has world + 2 int64 entries (Note [Counting who still trains] in join.cpp):
//   [r] for r < world   1 if rank r trains in this iteration, else 0 (it has joined)
//   [world]             how many training ranks all-reduce gradients (not under no_sync)
//   [world + 1]         how many training ranks broadcast buffers in their forward
struct JoinRound {
  int training = 0;              // ranks that train in this iteration; 0: all have joined
  bool syncs_gradients = false;  // the training ranks' backward all-reduces gradients
  bool broadcasts_buffers = false;
  int lowest = -1;   // lowest training rank: the buffers' broadcast root in this iteration
  int highest = -1;  // highest training rank: the final sync's root if this is the last one
  int divisor = 0;   // what this iteration's summed gradients are divided by
};

// summed: (world + 2) -> the round. divisor: `world` with divide_by_initial_world_size, else
// the number of training ranks. Throws ddp::Error, starting with `who`, when the training
// ranks disagree (some under no_sync and others not; some broadcasting buffers and others
// not) or an entry is not a count a rank could have sent.
JoinRound read_join_round(std::span<const std::int64_t> summed, bool divide_by_initial_world_size,
                          const std::string& who);

// ---- The join context -----------------------------------------------------------------

struct JoinOptions {
  // true (PyTorch's default): the sum of the gradients is divided by the world size even
  // when fewer ranks contributed, so a late iteration's step is smaller, as if the joined
  // ranks had sent zero gradients. false: by the ranks that contributed, so every step is
  // the average of the gradients that exist. Note [Which divisor] in join.cpp.
  bool divide_by_initial_world_size = true;
};

class Join {
 public:
  // Every rank of the joinable's group makes one, before its first forward of the loop.
  // Registers with `joinable` and takes its JoinHook (no collective). For a DDP: each
  // forward with grad on then counts as one training iteration, and must be followed by
  // its backward (and, for Flat and PerParameter, by average_gradients()). Between the
  // constructor and finish(), only those may communicate: other collectives
  // (check_in_sync, sync_buffers, the program's own) belong before the Join or after
  // finish(), since a joined rank cannot shadow them. A model with SyncBatchNorm2d is
  // refused for the same reason (its forward all-reduces). Every GradientSync works;
  // no_sync() too, on the same iterations on every rank. One Join per Joinable at a time;
  // `joinable` must outlive it (it cannot move: joinable.hpp).
  explicit Join(Joinable& joinable, JoinOptions options = {});
  // Unregisters. Never communicates, never throws; a Join left without finish() outside
  // an exception says so on stderr (the other ranks will then time out waiting for it).
  ~Join();
  Join(const Join&) = delete;
  Join& operator=(const Join&) = delete;

  // This rank has run out of batches. Shadows the other ranks' iterations (their count,
  // then the hook's main_hook: for DDP their buffer broadcast and gradient collectives,
  // with zeros) until every rank has called finish(); then the hook's post_hook (DDP:
  // broadcasts the parameters and buffers from the highest rank among those that trained
  // in the last iteration, so every replica ends equal). Unregisters: later forwards are
  // plain DDP. Every wait is the group's deadline; ddp::Error on failure.
  void finish();

  // PyTorch's Join.notify_join_context: a joinable calls it at the start of each of its
  // training iterations (DDP: forward with grad on). Outside a Join (or after finish()):
  // nullopt, no collective. Inside: this rank's part of the count (it trains; its
  // iteration all-reduces gradients or not, broadcasts buffers or not), and what the
  // count says (Note [Counting who still trains] in join.cpp).
  static std::optional<JoinRound> notify_join_context(Joinable& joinable, bool syncs_gradients,
                                                      bool broadcasts_buffers);

  bool finished() const { return finished_; }
  // After finish(): how many of the others' iterations this rank shadowed (as the Join
  // counts them: one per forward with grad on, so K per step of K micro-batches), and the
  // rank whose model every rank now holds (-1 when no rank trained at all).
  std::int64_t shadowed_iterations() const { return shadowed_; }
  int final_root() const { return last_highest_; }
  const JoinOptions& options() const { return options_; }

 private:
  // The count all-reduce (Note [Counting who still trains]).
  JoinRound count(bool training, bool syncs_gradients, bool broadcasts_buffers);
  std::string who() const;  // "Join on rank 1/3 (tcp, node07)"

  Joinable& joinable_;
  JoinOptions options_;
  std::unique_ptr<JoinHook> hook_;  // the joinable's, for this Join
  bool finished_ = false;
  std::int64_t shadowed_ = 0;
  int last_highest_ = -1;  // `highest` of the last round in which some rank trained
};

}  // namespace ddp
