// --save-format sharded: every rank writes the slices it holds, then rank 0 the manifest,
// last. Chapter 09. What the files hold, why the manifest comes last and why resuming them
// gives the full checkpoint's bits: Note [Sharded checkpoints] (dist/parallel/
// sharded_checkpoint.hpp), which reads them back too (read_checkpoint, in load_checkpoint).
// Nothing here gathers a parameter or an optimizer slice: each rank writes what it has.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "dist/parallel/sharded_checkpoint.hpp"
#include "nn/state_dict.hpp"
#include "tools/ddp_train/trainer.hpp"

namespace ddp::train {

void Trainer::save_sharded_checkpoint(const std::string& path,
                                      const std::vector<std::int64_t>& all) {
  const std::vector<SavedFlat> flats = saved_flats(sharded_flats(), model_->named_parameters());
  // The files of the checkpoint at `path` stay untouched: this one's carry the next
  // generation in their names. Rank 0 reads it off the manifest there; all use its answer.
  const std::int64_t generation = gather_over_ranks({rank() == 0 ? next_generation(path) : 0})[0];
  nn::FileSummary written;
  together("writing its shard file of the checkpoint", [&] {
    std::vector<Tensor> shards;  // the local optimizer's parameter j: this rank's slice of j
    for (const Variable& slice : local_optimizer().parameters()) shards.push_back(slice.data());
    written = nn::save_state_dict(shard_file_entries(rank(), world_size(), generation, flats,
                                                     shards, local_optimizer().state_dict()),
                                  shard_file_path(path, generation, rank(), world_size()));
  });
  // Past `together`, every rank's file is on disk (written, fsync'ed, renamed into place):
  // only now may a manifest name them.
  const std::vector<std::int64_t> summaries =
      gather_over_ranks({static_cast<std::int64_t>(written.bytes), written.crc32});
  together("writing the checkpoint's manifest", [&] {
    if (rank() != 0) return;
    std::vector<nn::FileSummary> files;
    for (std::size_t r = 0; r < summaries.size(); r += 2) {
      files.push_back(
          {static_cast<std::uint64_t>(summaries[r]), static_cast<std::uint32_t>(summaries[r + 1])});
    }
    // The commit point: until this rename, `path` is the previous checkpoint.
    nn::save_state_dict(
        manifest_entries(generation, flats, model_->state_dict(), run_entries(all), files), path);
    remove_stale_shard_files(path, generation, world_size());
  });
}

}  // namespace ddp::train
