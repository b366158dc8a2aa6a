// Checkpoints of ddp-train: --save writes one, --resume (PATH or auto) continues from it.
// Chapter 04; --resume auto and resuming on another number of ranks are chapter 08's;
// --save-format sharded is chapter 09's (checkpoint_sharded.cpp writes it, read_checkpoint
// reassembles it here). load_checkpoint's steps have names: read the file (SavedState),
// refuse other settings (check_settings), take back this rank's place in the run
// (read_place). The file format and its atomic write are nn/state_dict's, not this file's.
#include "tools/ddp_train/trainer.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dist/parallel/ledger.hpp"
#include "dist/parallel/sharded_checkpoint.hpp"
#include "dist/parallel/sharded_state.hpp"
#include "base/who.hpp"  // name_ranks
#include "nn/state_dict.hpp"

namespace ddp::train {

// ---- What a checkpoint holds ----------------------------------------------------------
// One DDPSTATE file (nn/state_dict.hpp): "model.<name>", "optimizer.<name>" and
// "progress.<counter>" entries. The epoch's loss sum is a double; it is stored as its
// 64 bits in an int64 so that a resumed run prints the very same epoch loss. Each rank
// has its own running sums (its images, its losses), so the checkpoint keeps one per rank
// ((world size) tensors): every rank calls save_checkpoint, the sums are all-gathered,
// and rank 0 writes the file (atomically: save_state_dict writes a temporary file, then
// renames it). On --resume every rank reads the file and takes back its own sums.
// --save-format sharded writes the same entries spread over one file per rank and a
// manifest, which --resume reassembles into exactly these entries first (Note [Sharded
// checkpoints], dist/parallel/sharded_checkpoint.hpp): from here on the two are one.
//
// What a checkpoint does not need to hold, because it follows from what it holds:
//   - the sampler's state: its epoch is progress.epoch, and the position in that epoch's
//     order is progress.step_in_epoch x the global batch (the permutation itself is a
//     function of --seed and the epoch, see DistributedSampler);
//   - random number generators: none is drawn from during training. The initial weights
//     come from --seed once, before any step; there is no dropout and no data
//     augmentation (data/mnist.cpp only scales and normalises); the shuffle is the
//     sampler's, above. A model or loader that draws random numbers per step would have to
//     save its Generator's state here.
//
// Note [Resuming on another world size]
// The DistributedSampler deals rank r the positions r, r + W, r + 2W, ... of the epoch's
// order, and the DataLoader cuts each rank's list into batches of b. Batch k of rank r
// is positions r + W(kb + j), j in [0, b): over all ranks, exactly the positions
// [kB, (k+1)B) with B = bW, the global batch. So with a fixed global batch, step k of an
// epoch covers the same samples whatever W is, an epoch has ceil(n / B) steps for every W,
// and the schedule (which counts steps) is the same: a run saved on W ranks and resumed
// on W' continues at the same sample. It is not the same arithmetic: each rank's
// BatchNorm normalises its own b images (b differs), the gradient average sums in
// another order, so the numbers continue close to, not equal to, the run that kept its
// W. (With a padded epoch, n not a multiple of W, only the padding at the end differs.)
// The per-rank loss sums of the old world are folded into the new one: old rank o's go to
// new rank o mod W'; their total, hence the epoch's train loss, is kept. When W' divides
// W these are exactly the positions new rank o mod W' would have trained.

namespace {

// A 0-d int64 tensor, how a checkpoint stores one counter. from_data copies the 64 bits;
// full() would pass the value through a double and round everything above 2^53 (the loss
// sum's bit pattern, a large --seed).
Tensor counter(std::int64_t value) {
  return from_data(std::span<const std::int64_t>(&value, 1), {});
}

// The settings that decide the rest of a run, as a checkpoint records them: a resumed
// run with other values would not continue the run that was saved, so it is refused,
// naming each flag that differs. (PyTorch's optimizer.load_state_dict instead restores
// the saved lr, momentum and weight decay over whatever the new run asked for, silently.)
// --max-steps, --device and --threads may change: another machine; so may --epochs
// under a constant learning rate (a longer run), but not under the cosine schedule, whose
// every step depends on the total. The number of ranks may change too, as long as the
// global batch stays (Note [Resuming on another world size]); the checkpoint records the
// ranks and the per-rank batch as well (config.world_size, config.batch_size), read on
// resume but not compared. Floating-point flags: their 64 bits.
struct RecordedSetting {
  const char* key;   // "config.<key>" in the checkpoint
  const char* flag;  // what the user types
  std::int64_t stored;
  bool is_double;
  std::optional<std::int64_t> if_absent = std::nullopt;  // else the entry must be there
};

std::vector<RecordedSetting> recorded_settings(const TrainOptions& o, std::int64_t train_images,
                                               std::int64_t global_batch) {
  auto bits = [](double v) { return std::bit_cast<std::int64_t>(v); };
  const bool cosine = o.schedule == "cosine";
  std::vector<RecordedSetting> settings = {
      {"seed", "--seed", static_cast<std::int64_t>(o.seed), false},
      // Absent from checkpoints written before chapter 08: batch_size x world_size there.
      {"global_batch_size", "the global batch (--batch-size x ranks)", global_batch, false},
      {"lr", "--lr", bits(o.lr), true},
      {"momentum", "--momentum", bits(o.momentum), true},
      {"weight_decay", "--weight-decay", bits(o.weight_decay), true},
      {"cosine_schedule", "--schedule cosine (1) or constant (0)", cosine ? 1 : 0, false},
      {"sync_bn", "--sync-bn", o.sync_bn ? 1 : 0, false},
      {"train_images", "--data (training images)", train_images, false},
      // Absent from checkpoints written before chapter 07, whose network had width 1.
      {"width", "--width", o.width, false, 1},
      // Absent before chapter 09, when SGD was the only optimizer. (--shard is not here:
      // the checkpoint holds the state unsharded, or shards that reassemble into it, which
      // any --shard resumes.)
      {"adamw", "--optimizer adamw (1) or sgd (0)", o.optimizer == "adamw" ? 1 : 0, false, 0}};
  if (cosine) {
    settings.push_back({"warmup_epochs", "--warmup-epochs", o.warmup_epochs, false});
    settings.push_back({"epochs", "--epochs (the cosine's length)", o.epochs, false});
  }
  return settings;
}

std::string setting_text(const RecordedSetting& s, std::int64_t stored) {
  if (!s.is_double) return std::to_string(stored);
  char text[32];  // the shortest text that reads back as the same double: 0.1, not 0.1000...01
  const auto end = std::to_chars(text, text + sizeof text, std::bit_cast<double>(stored)).ptr;
  return std::string(text, end);
}

// A checkpoint as read back (every CRC checked; a sharded one reassembled), its entries
// found by name; `path` names the file in every message.
class SavedState {
 public:
  explicit SavedState(const std::string& path)
      : path_(path), state_(read_checkpoint(path, &shard_files_)) {}

  const std::string& path() const { return path_; }
  int shard_files() const { return shard_files_; }  // 0: a full checkpoint
  bool has(const std::string& name) const {
    return std::any_of(state_.begin(), state_.end(),
                       [&](const auto& e) { return e.first == name; });
  }
  const Tensor& entry(const std::string& name) const {
    for (const auto& [key, t] : state_) {
      if (key == name) return t;
    }
    DDP_FAIL("checkpoint ", path_, " has no entry '", name,
             "'\nhint: was it written by ddp-train --save?");
  }
  std::int64_t value(const std::string& name) const { return entry(name).item<std::int64_t>(); }
  // The entries "<prefix><name>" as "<name>": prefix "model." gives the model's state.
  nn::StateDict with_prefix(const std::string& prefix) const {
    nn::StateDict part;
    for (const auto& [key, t] : state_) {
      if (key.starts_with(prefix)) part.emplace_back(key.substr(prefix.size()), t);
    }
    return part;
  }
  // This rank's share of a per-rank entry: old rank o's values for every o with
  // o mod (this world) = this rank (Note [Resuming on another world size]); on the same
  // world, exactly one, its own. `saved_world`: the ranks that wrote the file.
  std::vector<std::int64_t> shares(const std::string& name, std::int64_t saved_world, int rank,
                                   int world_size) const {
    const std::vector<std::int64_t> all = entry(name).to_vector<std::int64_t>();
    DDP_CHECK(static_cast<std::int64_t>(all.size()) == saved_world, "checkpoint ", path_,
              ": entry '", name, "' has ", all.size(), " values, expected one per rank of the ",
              saved_world, " that saved it (config.world_size)");
    std::vector<std::int64_t> mine;
    for (std::size_t o = static_cast<std::size_t>(rank); o < all.size();
         o += static_cast<std::size_t>(world_size)) {
      mine.push_back(all[o]);
    }
    return mine;
  }

 private:
  std::string path_;
  int shard_files_ = 0;
  nn::StateDict state_;
};

// Refuses a checkpoint whose recorded settings differ from `settings` (this run's),
// naming every flag that differs (see RecordedSetting).
void check_settings(const SavedState& checkpoint, std::int64_t saved_world,
                    const std::vector<RecordedSetting>& settings) {
  std::string differences;
  for (const RecordedSetting& s : settings) {
    const std::string key = std::string("config.") + s.key;
    std::int64_t saved = 0;
    if (checkpoint.has(key)) {
      saved = checkpoint.value(key);
    } else if (key == "config.global_batch_size") {  // written before chapter 08
      saved = checkpoint.value("config.batch_size") * saved_world;
    } else {
      saved = s.if_absent ? *s.if_absent : checkpoint.value(key);  // names the missing entry
    }
    if (saved == s.stored) continue;
    differences += std::string(differences.empty() ? "" : ", ") + s.flag + " " +
                   setting_text(s, saved) + " (this run: " + setting_text(s, s.stored) + ")";
  }
  DDP_CHECK(differences.empty(), "checkpoint ", checkpoint.path(), " was written by a run with ",
            differences, "\nhint: resume with the flags of the run that saved it");
}

// Where the saved run was, as this rank of this world takes it back: the counters, and
// its share of the per-rank sums of the epoch in progress.
struct Place {
  std::int64_t epoch = 0;
  std::int64_t step_in_epoch = 0;
  std::int64_t global_step = 0;
  std::int64_t images_seen = 0;
  double loss_sum = 0.0;
};

Place read_place(const SavedState& checkpoint, std::int64_t saved_world, int rank,
                 int world_size) {
  Place place;
  place.epoch = checkpoint.value("progress.epoch");
  place.step_in_epoch = checkpoint.value("progress.step_in_epoch");
  place.global_step = checkpoint.value("progress.global_step");
  for (std::int64_t images :
       checkpoint.shares("progress.images_seen", saved_world, rank, world_size)) {
    place.images_seen += images;
  }
  // Doubles stored as their bits. The first share is taken as it is, not added to 0.0:
  // on the same world the sum is the saved one, bit for bit.
  const std::vector<std::int64_t> losses =
      checkpoint.shares("progress.loss_sum_bits", saved_world, rank, world_size);
  for (std::size_t i = 0; i < losses.size(); ++i) {
    const double loss = std::bit_cast<double>(losses[i]);
    place.loss_sum = i == 0 ? loss : place.loss_sum + loss;
  }
  return place;
}

}  // namespace

void Trainer::save_checkpoint(const std::string& path) {
  const ledger::Label label("checkpoint");
  const std::vector<std::int64_t> all = gather_over_ranks(
      {std::bit_cast<std::int64_t>(loss_sum_), images_seen_});  // (loss bits, images) per rank
  const std::vector<const FlatParameter*> flats = sharded_flats();
  // Chapter 09: with no flat buffers (one process) make_optimizer said it writes full ones.
  if (options_.save_format == "sharded" && !flats.empty()) {
    save_sharded_checkpoint(path, all);
    return;
  }
  // Chapter 09: a sharded optimizer's slices, gathered into the unsharded layout on every
  // rank (sharded_state.hpp), and FSDP's parameters gathered whole, for rank 0 to write.
  const nn::StateDict state =
      flats.empty() ? optimizer().state_dict()
                    : consolidate_optimizer_state(optimizer(), flats, model_->parameters(), *group_);
  std::optional<FullyShardedDataParallel::SummonFullParameters> whole;
  if (fsdp_) whole.emplace(*fsdp_);
  together("writing the checkpoint", [&] { write_checkpoint(path, all, state); });
}

void Trainer::write_checkpoint(const std::string& path, const std::vector<std::int64_t>& all,
                               const nn::StateDict& optimizer) {
  if (rank() != 0) return;
  nn::StateDict state;
  for (auto& [name, t] : model_->state_dict()) state.emplace_back("model." + name, t);
  for (const auto& [name, t] : optimizer) state.emplace_back("optimizer." + name, t);
  for (auto& entry : run_entries(all)) state.push_back(std::move(entry));
  nn::save_state_dict(state, path);
  // A sharded checkpoint saved here before is replaced: its shard files go (after the
  // rename, as a manifest's predecessors do: Note [Sharded checkpoints]).
  remove_stale_shard_files(path, 0, 0);
}

nn::StateDict Trainer::run_entries(const std::vector<std::int64_t>& all) const {
  std::vector<std::int64_t> loss_bits, images;
  for (std::size_t r = 0; r < all.size(); r += 2) {
    loss_bits.push_back(all[r]);
    images.push_back(all[r + 1]);
  }
  auto per_rank = [](const std::vector<std::int64_t>& v) {
    return from_data(std::span<const std::int64_t>(v), {static_cast<std::int64_t>(v.size())});
  };
  nn::StateDict state;
  state.emplace_back("progress.epoch", counter(epoch_));
  state.emplace_back("progress.step_in_epoch", counter(step_in_epoch_));
  state.emplace_back("progress.global_step", counter(global_step_));
  state.emplace_back("progress.images_seen", per_rank(images));
  state.emplace_back("progress.loss_sum_bits", per_rank(loss_bits));
  // Recorded, not compared on resume (see recorded_settings): the shape of the run.
  state.emplace_back("config.batch_size", counter(batch_size_));
  state.emplace_back("config.world_size", counter(world_size()));
  for (const RecordedSetting& s : recorded_settings(options_, train_set_.size(), global_batch())) {
    state.emplace_back(std::string("config.") + s.key, counter(s.stored));
  }
  return state;
}

// --resume auto: every rank looks at --save's path itself (they may be on different nodes);
// they must come to the same answer, or some would resume and others start fresh.
std::string Trainer::resume_path() {
  if (options_.resume != "auto") return options_.resume;
  const std::string& path = options_.save;
  std::int64_t usable = 0;
  std::string why = "none there yet";
  if (std::filesystem::exists(path)) {
    try {
      static_cast<void>(read_checkpoint(path));  // the whole file, every CRC; every shard
      usable = 1;
    } catch (const Error& e) {
      const std::string message = e.what();
      why = "not usable: " + message.substr(0, message.find('\n'));
    }
  }
  const std::vector<std::int64_t> all = gather_over_ranks({usable});
  std::vector<int> disagree;
  for (int r = 0; r < world_size(); ++r) {
    if (all[static_cast<std::size_t>(r)] != all[0]) disagree.push_back(r);
  }
  DDP_CHECK(disagree.empty(), "--resume auto: rank 0 ", all[0] ? "can" : "cannot",
            " read a checkpoint at ", path, ", but ", name_ranks(disagree), " ",
            all[0] ? "cannot" : "can", " (this is rank ", rank(), ": ",
            usable ? "readable" : why, ")\nhint: every rank must see the same --save file "
            "(a shared filesystem, or one node)");
  if (rank() == 0) {
    if (usable) {
      std::printf("--resume auto: resuming from %s\n", path.c_str());
    } else {
      std::printf("--resume auto: no checkpoint at %s (%s): starting fresh\n", path.c_str(),
                  why.c_str());
    }
    std::fflush(stdout);
  }
  return usable ? path : std::string();
}

void Trainer::load_checkpoint(const std::string& path) {
  const SavedState checkpoint(path);
  const std::int64_t saved_world = checkpoint.value("config.world_size");
  check_settings(checkpoint, saved_world,
                 recorded_settings(options_, train_set_.size(), global_batch()));
  {
    std::optional<FullyShardedDataParallel::SummonFullParameters> whole;
    if (fsdp_) whole.emplace(*fsdp_, /*writeback=*/true);  // loaded, then back into the shards
    model_->load_state_dict(checkpoint.with_prefix("model."), path);
  }
  // The optimizer's state is saved unsharded (consolidated): a sharded run takes its slices.
  const nn::StateDict saved = checkpoint.with_prefix("optimizer.");
  const std::vector<const FlatParameter*> flats = sharded_flats();
  optimizer().load_state_dict(
      flats.empty() ? saved : shard_optimizer_state(saved, flats, model_->parameters(), path), path);
  const Place place = read_place(checkpoint, saved_world, rank(), world_size());
  epoch_ = place.epoch;
  step_in_epoch_ = place.step_in_epoch;
  global_step_ = place.global_step;
  images_seen_ = place.images_seen;
  loss_sum_ = place.loss_sum;
  if (rank() == 0) {
    std::printf("resumed from %s: epoch %lld, step %lld of it (%lld steps in all)\n", path.c_str(),
                static_cast<long long>(epoch_ + 1), static_cast<long long>(step_in_epoch_),
                static_cast<long long>(global_step_));
    if (checkpoint.shard_files() > 0) {
      std::printf("the checkpoint is sharded: reassembled from its manifest and %d shard "
                  "files (Note [Sharded checkpoints])\n", checkpoint.shard_files());
    }
    if (saved_world != world_size()) {
      std::printf("resumed on %d rank%s from a checkpoint of %lld: epoch %lld's order continues "
                  "at sample %lld (global batch %lld); close to, not bitwise equal to, a run "
                  "that kept %lld\n",
                  world_size(), world_size() == 1 ? "" : "s", static_cast<long long>(saved_world),
                  static_cast<long long>(epoch_ + 1),
                  static_cast<long long>(step_in_epoch_ * global_batch()),
                  static_cast<long long>(global_batch()), static_cast<long long>(saved_world));
    }
  }
}

}  // namespace ddp::train
