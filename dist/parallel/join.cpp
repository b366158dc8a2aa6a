// Join (see join.hpp). Chapter 08.
//
// Reading order: Note [Counting who still trains], Note [Which divisor]; the count's
// arithmetic (read_join_round, in join_round.cpp); the context (construction, the count,
// finish: shadowing and the final sync). What a shadowed iteration sends is the Joinable's
// business, through its JoinHook (joinable.hpp; DDP's in distributed_data_parallel_join.cpp).
#include "dist/parallel/join.hpp"

#include <cstdio>
#include <exception>
#include <vector>

#include "autograd/grad_mode.hpp"
#include "dist/process_group.hpp"
#include "base/error.hpp"
#include "tensor/tensor.hpp"

namespace ddp {

// Note [Counting who still trains]
// --------------------------------
// Collectives match by position: the k-th collective of one rank pairs with the k-th of
// every other. A rank that has run out of batches and simply stops leaves the others in
// their next gradient all-reduce, waiting for a partner that never comes, until the
// timeout. It cannot just "leave" either: the ring needs every rank for every collective.
// So a rank that has run out keeps calling the SAME collectives as the ranks that still
// train, in the same order, with zeros as its contribution (shadowing). For that it must
// know, at every iteration, whether anyone still trains. Hence one small all-reduce at the
// start of every training iteration, on every rank:
//
//   rank 0 (3 batches)   1 1 1 | 0 0 (shadow) | 0 -> all zero: done, final sync
//   rank 1 (5 batches)   1 1 1 | 1 1          | 0
//   count                2 2 2 | 1 1          | 0
//
// A training rank sends 1 from its forward (Join::notify_join_context), a joined one
// 0 from finish(); a count of 0 means every rank has joined, and all leave the loop at the
// same collective. Instead of one number we all-reduce a vector (join.hpp, JoinRound): a 1
// at each training rank's own index, so every rank also learns WHO trains (the lowest is
// the root of this iteration's buffer broadcast, since rank 0 may have joined; the highest
// of the last iteration is the final sync's root, as in PyTorch), and two counts that say
// what the training ranks' iteration contains (gradient all-reduces or not, under no_sync;
// a buffer broadcast or not), which the joined ranks must shadow exactly. PyTorch spends
// up to three all-reduces on the same questions; this is one, of world + 2 int64s.
//
// Note [Which divisor]
// --------------------
// The ranks sum their gradients; a joined rank's part is zero. Dividing by the world size W
// (divide_by_initial_world_size, the default) makes a late iteration's update smaller by
// training/W: each example keeps the weight 1/(W b) it had while all ranks trained. Dividing
// by the number of training ranks makes each step the mean of the gradients that exist,
// full-sized. PyTorch offers both with the same default; the Reducer takes the divisor per
// iteration (prepare_for_backward), DDP's Flat and PerParameter paths too.

// The count's arithmetic, read_join_round: in join_round.cpp (exercise 08.2).

// ---- The context ----------------------------------------------------------------------

Join::Join(Joinable& joinable, JoinOptions options) : joinable_(joinable), options_(options) {
  DDP_CHECK(joinable_.join_ == nullptr, who(),
            ": this Joinable (a DistributedDataParallel) is already in a Join"
            "\nhint: one Join per Joinable at a time; call finish() on the first one");
  // The joinable may refuse here: a collective that a joined rank cannot shadow (DDP: a
  // model with SyncBatchNorm2d, whose forward all-reduces).
  hook_ = joinable_.join_hook();
  joinable_.join_ = this;
}

Join::~Join() {
  if (joinable_.join_ == this) joinable_.join_ = nullptr;
  if (!finished_ && std::uncaught_exceptions() == 0) {
    // Not an error we can throw from here: say it, the others' timeout will end the job.
    std::fprintf(stderr,
                 "%s: destroyed before finish(): the other ranks will wait for this rank's "
                 "join count until their timeout\n",
                 who().c_str());
  }
}

std::optional<JoinRound> Join::notify_join_context(Joinable& joinable, bool syncs_gradients,
                                                   bool broadcasts_buffers) {
  if (joinable.join_ == nullptr) return std::nullopt;
  return joinable.join_->count(/*training=*/true, syncs_gradients, broadcasts_buffers);
}

JoinRound Join::count(bool training, bool syncs_gradients, bool broadcasts_buffers) {
  ProcessGroup& group = joinable_.join_process_group();
  const int world = group.size();
  Tensor mine = zeros({world + 2}, TensorOptions{.dtype = DType::Int64});
  if (training) {
    std::int64_t* data = mine.data<std::int64_t>();
    data[group.rank()] = 1;
    data[world] = syncs_gradients ? 1 : 0;
    data[world + 1] = broadcasts_buffers ? 1 : 0;
  }
  // On the joinable's device: NCCL moves GPU memory only.
  Tensor shared = mine.to(joinable_.join_device());
  group.all_reduce(shared, ReduceOp::Sum)->wait();
  const std::vector<std::int64_t> summed = shared.cpu().to_vector<std::int64_t>();
  const JoinRound round = read_join_round(summed, options_.divide_by_initial_world_size, who());
  if (round.training > 0) last_highest_ = round.highest;
  return round;
}

void Join::finish() {
  DDP_CHECK(!finished_, who(), ": finish() called twice");
  // From here on this rank's forwards must not count: it is the shadow loop that does.
  joinable_.join_ = nullptr;
  finished_ = true;
  NoGradGuard no_grad;
  while (true) {
    const JoinRound round = count(/*training=*/false, false, false);
    if (round.training == 0) break;  // every rank has joined, all at this same collective
    hook_->main_hook(round);
    ++shadowed_;
  }
  // The joined ranks skipped the optimizer steps of the iterations they shadowed (and
  // their buffers saw none of the last batches): take the model of a rank that trained to
  // the end. Every rank saw the same rounds, so all name the same root.
  hook_->post_hook(last_highest_);
}

std::string Join::who() const {
  return joinable_.join_process_group().who("Join");
}

}  // namespace ddp
