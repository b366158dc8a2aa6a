// read_join_round (see join.hpp). This file holds exactly the function of exercise 08.2:
// the exercise build links the participant's copy in its place (tutorial/EXERCISES.md,
// Note [How an exercise replaces the reference]).
#include "dist/parallel/join.hpp"

#include "base/error.hpp"

namespace ddp {

// Note [Counting who still trains] and Note [Which divisor] (join.cpp) say what the count
// holds and why the divisor has two rules.
JoinRound read_join_round(std::span<const std::int64_t> summed, bool divide_by_initial_world_size,
                          const std::string& who) {
  DDP_CHECK(summed.size() >= 3, who, ": the join count has ", summed.size(),
            " entries; it needs world + 2 with world >= 1");
  const int world = static_cast<int>(summed.size()) - 2;
  JoinRound round;
  for (int r = 0; r < world; ++r) {
    DDP_CHECK(summed[r] == 0 || summed[r] == 1, who, ": join count entry ", r, " is ", summed[r],
              "; each rank writes 0 or 1 at its own index only"
              "\nhint: every rank must hold a Join around the same DDP (one Join at a time)");
    if (summed[r] == 0) continue;
    ++round.training;
    if (round.lowest < 0) round.lowest = r;
    round.highest = r;
  }
  const std::int64_t syncing = summed[world], broadcasting = summed[world + 1];
  DDP_CHECK(syncing == 0 || syncing == round.training, who, ": ", syncing, " of the ",
            round.training,
            " ranks still training all-reduce gradients in this iteration, the others are "
            "under no_sync()\nhint: every rank must use no_sync() on the same iterations");
  DDP_CHECK(broadcasting == 0 || broadcasting == round.training, who, ": ", broadcasting,
            " of the ", round.training,
            " ranks still training broadcast buffers in this forward, the others do not"
            "\nhint: every rank must train (module.train()) or evaluate on the same "
            "iterations, with the same DDPOptions::broadcast_buffers");
  round.syncs_gradients = syncing > 0;
  round.broadcasts_buffers = broadcasting > 0;
  round.divisor = divide_by_initial_world_size ? world : round.training;
  return round;
}

}  // namespace ddp
