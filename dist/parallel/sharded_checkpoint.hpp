// Sharded checkpoints: each rank's file of its slices, and a manifest, written last, that
// makes them one checkpoint; read back as the consolidated state dict. Chapter 09.
// ddp-train --save-format sharded writes them (tools/ddp_train/checkpoint_sharded.cpp);
// read_checkpoint reads either form. The files are DDPSTATE files (nn/state_dict.hpp) and
// are written atomically there. Not here: the agreement between the ranks (the caller's),
// and reading only the pieces a rank needs (PyTorch's distributed checkpoint does that;
// reassembly reads every shard file, which is simpler to check).
//
// Note [Sharded checkpoints]
// A full save gathers every slice in one place (the optimizer state all-gathered, FSDP's
// parameters summoned whole) and rank 0 writes one file: one rank then holds the whole
// state, which is what sharding avoided. The sharded form writes what each rank has:
//
//   ck.g3.rank0-of-4 .. ck.g3.rank3-of-4   rank r's real elements of every flat buffer j:
//                                          "param.<j>" and "optimizer.<kind>.<j>" (a step
//                                          count whole), and its rank, world and generation
//   ck                                     the manifest, by rank 0, LAST: the world size, the
//                                          generation, each flat buffer's layout (numel, S),
//                                          where each parameter lies in it, the replicated
//                                          state (BatchNorm buffers, progress, settings) and
//                                          each shard file's bytes and CRC-32
//
// Manifest last. Every file is written atomically (temporary file, fsync, rename). The
// ranks then agree that every shard file is on disk (a failure on any rank stops them all,
// and no manifest is written), and only then does rank 0 rename the manifest into place:
// that rename is the save's one commit point. The previous checkpoint is its manifest and
// the files of its generation, which this save does not touch, since its files carry the
// next generation in their names. A crash before the rename leaves the old manifest and
// the old files; after it, the new ones. Only then are the files that the manifest does
// not name removed (the previous generation's, and those of a save that never got its
// manifest: its renamed shard files, and the temporary files "<name>.tmp.<pid>" that a
// rank killed mid-write leaves, of any generation, the new manifest's own included, since
// no rank is writing one then): a checkpoint exists exactly when its manifest does.
//
// Why reassembly gives the same bits as the full save. The full save's optimizer state is
// consolidate_optimizer_state's: every slice all-gathered (the ranks' slices one after the
// other, in rank order), cut at each parameter's offset by unflatten_optimizer_entry; its
// parameters are read from FSDP's gathered flat buffers, or from ZeRO's, which every rank
// holds whole after the step's all-gather: the same slices, in the same order. Reassembly
// concatenates the same slices (floats copied, never computed with) in rank order and cuts
// them with the same function at the offsets the manifest recorded, and puts the entries
// in the full file's order. So the state dict it returns is the full file's, entry for
// entry, bit for bit, and resuming from it is the full file's path: on any --shard and
// any number of ranks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "dist/parallel/shard_layout.hpp"
#include "dist/parallel/sharded_state.hpp"
#include "nn/state_dict.hpp"

namespace ddp {

inline constexpr std::int64_t kShardedCheckpointVersion = 1;

// One flat buffer of the run that saves: how it is split over the ranks, and where each of
// its parameters lies (`names`: their state_dict names, in the order of `places`).
struct SavedFlat {
  ShardLayout layout;
  FlatPlaces places;
  std::vector<std::string> names;
};

// The flat buffers the local optimizer steps (`flats[j]` is its parameter j), described
// for a manifest; `named_parameters`: the model's, in parameters() order.
std::vector<SavedFlat> saved_flats(
    const std::vector<const FlatParameter*>& flats,
    const std::vector<std::pair<std::string, Variable>>& named_parameters);

// Rank `rank`'s file of generation `generation` of the checkpoint `manifest`, saved by
// `world` ranks: "ck" -> "ck.g3.rank1-of-4", in the manifest's folder.
std::filesystem::path shard_file_path(const std::filesystem::path& manifest,
                                      std::int64_t generation, int rank, int world);

// What rank `rank` writes: its real elements of each flat buffer's parameters (`shards[j]`,
// (S): the local optimizer's parameter j) and of the local optimizer's state
// (`local_state`: "<kind>.<j>" of S elements, or int64 step counts, kept whole).
nn::StateDict shard_file_entries(int rank, int world, std::int64_t generation,
                                 const std::vector<SavedFlat>& flats,
                                 const std::vector<Tensor>& shards,
                                 const nn::StateDict& local_state);

// The manifest. `model_state`: model.state_dict(), in its order; its buffers are kept as
// "model.<name>", its parameters (every one in some flat buffer) become their places.
// `rest`: what a full checkpoint holds after the optimizer's state (progress, settings),
// kept as it is. `files[r]`: what rank r wrote (save_state_dict's summary).
nn::StateDict manifest_entries(std::int64_t generation, const std::vector<SavedFlat>& flats,
                               const nn::StateDict& model_state, const nn::StateDict& rest,
                               const std::vector<nn::FileSummary>& files);

// A manifest has a "shards.version" entry; a full checkpoint does not.
bool is_manifest(const nn::StateDict& state);

// The consolidated checkpoint that the manifest read from `path` and its shard files make:
// "model.<name>" in the model's order, "optimizer.<kind>.<i>", then the rest, as a full
// save of the same step writes them (Note [Sharded checkpoints]). Every shard file is
// checked against the manifest (there, its bytes and CRC-32, its rank, world and
// generation, each entry's name and each slice's size against the layout), and the
// manifest's own entries against each other; an error (always ddp::Error) names the file,
// the rank and what was expected.
nn::StateDict reassemble_checkpoint(const std::filesystem::path& path,
                                    const nn::StateDict& manifest);

// Either form of the checkpoint at `path`, read and checked, as the consolidated state
// dict. `shard_files` (when given): how many shard files it read; 0 for a full checkpoint.
nn::StateDict read_checkpoint(const std::filesystem::path& path, int* shard_files = nullptr);

// The generation of the next sharded save at `path`: one more than the manifest's there;
// 1 when there is no readable manifest.
std::int64_t next_generation(const std::filesystem::path& path);

// Removes the shard files of `path` (named as shard_file_path names them) other than those
// of (`generation`, `world`): what a manifest just renamed into place no longer names.
// generation 0: every one (a full checkpoint replaced the manifest). Also every temporary
// file "<shard file>.tmp.<digits>" and "<path>.tmp.<digits>" (nn::save_state_dict's), of
// any generation: call it only after the commit, when no rank writes a file of `path`.
// Best effort: it never throws; an unreadable folder costs one warning line on stderr.
// Returns how many files it removed.
int remove_stale_shard_files(const std::filesystem::path& path, std::int64_t generation, int world);

}  // namespace ddp
