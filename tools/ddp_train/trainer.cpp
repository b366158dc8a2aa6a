// Trainer (see trainer.hpp): the training loop. Chapter 04; made data-parallel in chapter
// 06. In reading order: the constructor (data, model, DDP, optimizer, schedule), run and
// run_epochs (epochs, summaries, checkpoints), train_epoch, train_step (the lines of a
// step). What the loop calls lives in files named after it: evaluate.cpp, metrics_csv.cpp,
// checkpoint.cpp, rank_setup.cpp, over_ranks.cpp, stop_agreement.cpp.
#include "tools/ddp_train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "autograd/functions.hpp"
#include "dist/parallel/comm_hooks.hpp"
#include "dist/parallel/ledger.hpp"
#include "dist/parallel/replica_check.hpp"
#include "dist/parallel/sync_batch_norm.hpp"
#include "dist/process_group_tcp.hpp"
#include "tensor/memory.hpp"
#include "tensor/threads.hpp"
#include "tools/ddp_train/progress.hpp"
#include "tools/ddp_train/rank_setup.hpp"
#include "base/units.hpp"  // kMiB

namespace ddp::train {

namespace {

// --bucket-cap-mb 0.25 -> 262,144 bytes (at least one).
std::int64_t mebibytes(double mib) {
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(mib * kMiB));
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Trainer::Trainer(TrainOptions options)
    : options_(std::move(options)),
      launch_(discover_for_training()),
      device_(resolve_device(options_.device, launch_.local_rank)),
      group_(join_process_group(options_, launch_, device_, backend_choice_)),
      batch_size_(per_rank_batch(options_, world_size())),
      train_set_(MnistSplit::Train, data_folder(options_)),
      test_set_(MnistSplit::Test, data_folder(options_)),
      sampler_(train_set_.size(), world_size(), rank(), /*shuffle=*/true, options_.seed,
               /*drop_last=*/false),
      init_generator_(options_.seed) {
  set_num_threads(threads_per_rank(options_, launch_));
  check_same_data();
  // Chapter 09: DDP_MEMORY_LIMIT_MB, a budget for the tensors of each rank (tensor/memory.hpp).
  if (const std::optional<std::int64_t> budget = memory::limit_from_environment()) {
    memory::set_limit(budget, detail::concat("DDP_MEMORY_LIMIT_MB=", *budget / kMiB));
    if (rank() == 0) {
      std::printf("memory budget: %lld MiB of tensors per rank (DDP_MEMORY_LIMIT_MB)\n",
                  static_cast<long long>(*budget / kMiB));
    }
  }
  // Every rank builds the model from the same seed; DDP checks they agree and copies
  // rank 0's values anyway. SyncBatchNorm goes in before DDP and the optimizer see the
  // parameters (convert_sync_batchnorm makes new ones).
  model_ = std::make_shared<nn::ResNetMnist>(init_generator_, options_.width);
  if (group_ && options_.sync_bn) convert_sync_batchnorm(*model_, *group_);
  if (!options_.trace.empty()) {
    // After the SyncBatchNorm swap, so that the new layers are named too. Recording
    // starts here; the file is written when the run ends (run()).
    nn::trace_modules(*model_);
    trace::start(rank());
  }
  model_->to(device_);
  // Chapter 09: a sharded model is wrapped by make_optimizer(), not by DDP.
  const bool sharded_wrapper = options_.shard == "zero2" || options_.shard == "fsdp";
  if (group_ && !sharded_wrapper) {
    DDPOptions ddp{.broadcast_buffers = options_.broadcast_buffers,
                   .gradient_sync = options_.grad_sync == "per-parameter"
                                        ? GradientSync::PerParameter
                                    : options_.grad_sync == "flat" ? GradientSync::Flat
                                                                   : GradientSync::Bucketed};
    ddp.reducer.bucket_cap_bytes = mebibytes(options_.bucket_cap_mb);
    ddp.reducer.first_bucket_bytes = mebibytes(options_.first_bucket_mb);
    ddp.reducer.find_unused_parameters = options_.find_unused_parameters;
    // Chapter 06's averages have no unused parameters to find: refused, not ignored.
    DDP_CHECK(!options_.find_unused_parameters || ddp.gradient_sync == GradientSync::Bucketed,
              "--find-unused-parameters needs --grad-sync bucketed (it is the Reducer's "
              "option), got --grad-sync ", options_.grad_sync);
    ddp_ = std::make_unique<DistributedDataParallel>(model_, *group_, ddp);
    if (options_.comm_hook == "bf16") {
      DDP_CHECK(ddp.gradient_sync == GradientSync::Bucketed, "--comm-hook bf16 needs "
                "--grad-sync bucketed (the hook is the Reducer's), got --grad-sync ",
                options_.grad_sync);
      ddp_->reducer().set_comm_hook(bf16_compress_hook());
    }
    if (options_.print_buckets && rank() == 0 && ddp.gradient_sync == GradientSync::Bucketed) {
      std::printf("%s", ddp_->reducer().describe_buckets().c_str());
      // Note [bf16 through all_gather] in dist/parallel/comm_hooks.cpp.
      if (options_.comm_hook == "bf16") {
        std::printf("comm hook bf16: per bucket of S bytes each rank receives (W-1)*S/2 "
                    "(all_gather) against 2(W-1)/W*S (ring all-reduce): x%.2f at W = %d\n",
                    world_size() / 4.0, world_size());
      }
      std::fflush(stdout);
    }
  }
  make_optimizer();
  loader_ = std::make_unique<DataLoader>(train_set_, sampler_, batch_size_,
                                         /*drop_last=*/false, device_);
  // The schedule counts optimizer steps: the same number on every rank (equal shards).
  const std::int64_t steps_per_epoch = loader_->num_batches();
  const std::int64_t total = options_.epochs * steps_per_epoch;
  const std::int64_t warmup = std::min(options_.warmup_epochs * steps_per_epoch, total - 1);
  if (options_.schedule == "constant") {
    schedule_ = nn::constant_lr(options_.lr);
  } else if (warmup <= 0) {
    schedule_ = nn::cosine_annealing(options_.lr, total);
  } else {
    schedule_ = nn::linear_warmup(warmup, 0.1, nn::cosine_annealing(options_.lr, total - warmup));
  }
  if (!options_.resume.empty()) {
    const std::string path = resume_path();
    if (!path.empty()) {
      together("reading the --resume checkpoint", [&] { load_checkpoint(path); });
      resumed_from_ = path;
    }
  }
  together("opening the --metrics file", [&] { open_metrics(); });
}

EpochResult Trainer::run() {
  const EpochResult result = run_epochs();
  if (!options_.trace.empty()) {
    trace::stop();
    together("writing the --trace file",
             [&] { trace::write(trace_file_for_rank(options_.trace, rank(), world_size())); });
  }
  // Everyone leaves together (Note [An orderly end], dist/process_group.hpp): after the
  // last barrier, destroy() closes the ring in order and rank 0, which serves the store,
  // waits until every rank has left it.
  if (group_) {
    const ledger::Label label("end of the run");
    group_->barrier()->wait();
    group_->destroy();
  }
  return result;
}

EpochResult Trainer::run_epochs() {
  EpochResult result;
  if (epoch_ >= options_.epochs || steps_used_up()) {
    // Resumed from a run that had already finished (a job resubmitted after it ended):
    // nothing to train, but the `final:` line still reports the model it would leave.
    if (rank() == 0) {
      std::printf(
          "nothing left to train: the checkpoint has finished %lld of %lld epochs, "
          "%lld steps (--max-steps %lld)\n",
          static_cast<long long>(epoch_), static_cast<long long>(options_.epochs),
          static_cast<long long>(global_step_), static_cast<long long>(options_.max_steps));
    }
    result.epoch = epoch_ + (step_in_epoch_ > 0 ? 1 : 0);
    evaluate_into(result);
    if (!options_.save.empty()) save_checkpoint(options_.save);  // --save still gets one
    return result;
  }
  for (; epoch_ < options_.epochs; ++epoch_) {
    // --max-steps used up exactly at the end of the previous epoch: stop here rather than
    // print (and evaluate) an epoch without a single step.
    if (steps_used_up()) break;
    result = EpochResult{};
    result.epoch = epoch_ + 1;
    const EpochEnd end = train_epoch(result);
    if (end == EpochEnd::StopRequested) {
      // Every rank is here after the same step (Note [Agreeing to stop]).
      if (!options_.save.empty()) save_checkpoint(options_.save);
      result.stopped_by = stop_signal_;
      result.stopped_at_step = global_step_;
      return result;
    }
    const bool finished = end == EpochEnd::Finished;
    evaluate_into(result);
    if (rank() == 0) {
      std::printf(
          "epoch %lld/%lld: train loss %.4f, test loss %.4f, test accuracy %.2f%%, "
          "%.0f img/s, %.2f s\n",
          static_cast<long long>(result.epoch), static_cast<long long>(options_.epochs),
          result.train_loss, result.test_loss, result.test_accuracy, result.images_per_second,
          result.train_seconds);
      std::fflush(stdout);
    }
    print_timeline(result);
    if (options_.print_memory) print_memory();
    if (finished) together("writing the --metrics file", [&] { write_metrics(result); });
    if (!finished) {  // --max-steps reached inside this epoch: keep the place for --resume
      if (!options_.save.empty()) save_checkpoint(options_.save);
      break;
    }
    step_in_epoch_ = 0;
    loss_sum_ = 0.0;
    images_seen_ = 0;
    if (!options_.save.empty()) {
      ++epoch_;  // the checkpoint says "epoch done": resume starts the next one
      save_checkpoint(options_.save);
      --epoch_;
    }
  }
  return result;
}

Trainer::EpochEnd Trainer::train_epoch(EpochResult& result) {
  model_->train();
  sampler_.set_epoch(epoch_);
  const std::int64_t steps = loader_->num_batches();
  std::optional<Progress> progress;  // rank 0 reports for the job
  if (rank() == 0) {
    progress.emplace(epoch_ + 1, options_.epochs, steps, progress_style(options_.progress),
                     step_in_epoch_, images_seen_);
  }
  const auto start = std::chrono::steady_clock::now();
  const trace::Mark epoch_start = trace::mark();
  std::int64_t step = 0, images_this_run = 0;
  EpochEnd end = EpochEnd::Finished;
  for (Batch& batch : *loader_) {
    if (step++ < step_in_epoch_) continue;  // resumed: these batches were trained already
    if (options_.max_steps > 0 && global_step_ >= options_.max_steps) {
      end = EpochEnd::StepBudget;
      break;
    }
    // Every collective of the step is recorded as "step N, ..." in the ledger (chapter 08):
    // the watchdog's diagnosis says which step a rank hung in.
    const ledger::Label label(detail::concat("step ", global_step_ + 1));
    train_step(batch);
    images_this_run += batch.labels.numel();
    if (progress)
      progress->update(step, images_seen_, loss_sum_ / static_cast<double>(images_seen_));
    if (stop_agreed()) {
      end = EpochEnd::StopRequested;
      break;
    }
  }
  if (progress) progress->finish();
  if (end == EpochEnd::StopRequested) return end;  // no summary: the point is to stop soon
  result.train_seconds = seconds_since(start);
  if (trace::enabled()) result.timeline = trace::summarize_since(epoch_start);
  // The epoch's loss over all ranks' images; images/s for the whole job.
  std::vector<double> loss{loss_sum_};
  std::vector<std::int64_t> images{images_seen_, images_this_run};
  sum_over_ranks(loss, images);
  result.images_per_second = static_cast<double>(images[1]) / result.train_seconds;
  result.train_loss = images[0] > 0 ? loss[0] / static_cast<double>(images[0]) : 0.0;
  return end;
}

// One optimizer step on this rank's batch; with DDP, the gradients are averaged over the
// ranks between backward and the step, so every rank applies the same update. With
// --grad-accum K the batch goes through in K micro-batches: each backward adds its
// share of the gradient (its loss x its rows / the batch's rows: the mean over the batch),
// and only the last one communicates.
void Trainer::train_step(const Batch& batch) {
  optimizer().set_lr(schedule_(global_step_));
  zero_grad();
  const std::int64_t n = batch.labels.numel();
  const std::int64_t k = std::min(options_.grad_accum, n);  // a short last batch: fewer
  double loss_sum = 0.0;
  for (std::int64_t m = 0; m < k; ++m) {
    const std::int64_t first = m * n / k, rows = (m + 1) * n / k - first;
    const std::unique_ptr<NoSyncGuard> quiet = m + 1 < k ? hold_back() : nullptr;
    // The top-level compute spans of the timeline; each module records its own inside.
    Variable loss;
    {
      trace::Span span("forward", "forward + loss");
      const Variable images(k == 1 ? batch.images : batch.images.narrow(0, first, rows));
      loss = cross_entropy(forward(images),
                           k == 1 ? batch.labels : batch.labels.narrow(0, first, rows));
    }
    {
      trace::Span span("backward", "backward");
      (k == 1 ? loss : mul(loss, static_cast<double>(rows) / static_cast<double>(n))).backward();
    }
    loss_sum += static_cast<double>(loss.data().item<float>()) * static_cast<double>(rows);
  }
  clip_and_step();

  loss_sum_ += loss_sum;
  images_seen_ += n;
  ++step_in_epoch_;
  ++global_step_;
  if (group_ && options_.check_sync > 0 && global_step_ % options_.check_sync == 0) {
    if (ddp_) {
      ddp_->check_in_sync(global_step_);
    } else {
      std::optional<FullyShardedDataParallel::SummonFullParameters> all;
      if (fsdp_) all.emplace(*fsdp_);
      check_parameters_in_sync(*model_, *group_, global_step_);
    }
  }
}

bool Trainer::steps_used_up() const {
  return options_.max_steps > 0 && global_step_ >= options_.max_steps;
}

// "epoch 3: compute 812 ms, communication 95 ms, exposed 12 ms, overlap 87%": rank 0's
// own timeline (base/trace.hpp, Note [Overlap summary]); the other ranks' are in their
// files.
void Trainer::print_timeline(const EpochResult& r) const {
  if (options_.trace.empty() || rank() != 0) return;
  const trace::Summary& t = r.timeline;
  const std::string overlap = t.communication_ms > 0.0
                                  ? detail::concat(std::lround(t.overlap_percent()), "%")
                                  : std::string("n/a (no communication)");
  std::printf("epoch %lld: compute %.0f ms, communication %.0f ms, exposed %.0f ms, overlap %s\n",
              static_cast<long long>(r.epoch), t.compute_ms, t.communication_ms, t.exposed_ms,
              overlap.c_str());
  std::fflush(stdout);
}

std::string Trainer::describe_recipe() const {
  const std::string schedule =
      options_.schedule == "constant"
          ? "constant"
          : detail::concat(options_.warmup_epochs, " warm-up epoch",
                           options_.warmup_epochs == 1 ? "" : "s", " from lr/10, then cosine to 0");
  std::string ranks = "1 process";
  if (group_) {
    // assign_buckets closes a bucket once it holds at least its cap, so the caps are
    // ">=": a bucket can pass its cap by its last parameter, and can end below it.
    const std::string caps =
        options_.first_bucket_mb == options_.bucket_cap_mb
            ? detail::concat("a bucket closes at >= ", options_.bucket_cap_mb, " MiB")
            : detail::concat("a bucket closes at >= ", options_.bucket_cap_mb,
                             " MiB, the first at >= ", options_.first_bucket_mb, " MiB");
    std::string sync =
        !ddp_ ? std::string()
        : options_.grad_sync == "bucketed"
            ? detail::concat("bucketed, ", ddp_->reducer().bucket_assignment().size(), " bucket",
                             ddp_->reducer().bucket_assignment().size() == 1 ? "" : "s",
                             " (", caps, ")",
                             options_.comm_hook == "bf16" ? ", bf16 comm hook" : "",
                             // read back from the Reducer: what it was given, not the flag
                             ddp_->reducer().options().find_unused_parameters
                                 ? ", find_unused_parameters"
                                 : "")
            : options_.grad_sync;
    // Chapter 09: what is sharded over the ranks.
    if (options_.shard == "zero1") sync += ", optimizer state sharded (zero1)";
    if (zero2_) {
      const std::size_t n = zero2_->buckets().size();
      sync = detail::concat("reduce-scattered in ", n, n == 1 ? " bucket" : " buckets",
                            ", with the optimizer state sharded (zero2)");
    }
    if (fsdp_) {
      sync = detail::concat("reduce-scattered, parameters and optimizer state sharded in ",
                            fsdp_->num_units(), " units (fsdp)");
    }
    // "tcp (emulated link 1 Gbit/s, 50 us)" when DDP_TCP_LINK slows the tcp group down;
    // then how it was chosen: "auto: every rank has a GPU of its own", or "--backend tcp".
    const auto* tcp = dynamic_cast<const ProcessGroupTcp*>(&group_->inner());
    const std::string chosen = options_.backend == "auto"
                                   ? "auto: " + backend_choice_.reason
                                   : "--backend " + options_.backend;
    ranks = detail::concat(world_size(), " ranks (", tcp ? tcp->description() : backend(), ", ",
                           chosen, "; gradients ", sync, options_.sync_bn ? ", SyncBatchNorm" : "",
                           options_.broadcast_buffers ? "" : ", buffers not broadcast", ")");
  }
  const std::string threads = device_.is_cuda()
                                  ? std::string()
                                  : detail::concat(", ", get_num_threads(),
                                                   get_num_threads() == 1 ? " thread" : " threads");
  return detail::concat("device ", device_.str(), threads, ", ", ranks, ", batch ", batch_size_,
                        group_
                            ? detail::concat(" per rank = ", batch_size_ * world_size(), " global")
                            : std::string(),
                        options_.grad_accum > 1
                            ? detail::concat(" in ", options_.grad_accum, " micro-batches")
                            : std::string(),
                        options_.optimizer == "adamw" ? ", AdamW lr " : ", lr ", options_.lr,
                        " (", schedule, ")",
                        options_.optimizer == "sgd"
                            ? detail::concat(", momentum ", options_.momentum)
                            : std::string(", betas 0.9, 0.999"),
                        ", weight decay ", options_.weight_decay,
                        options_.optimizer == "adamw" ? " (decoupled)" : "",
                        options_.clip_grad_norm > 0.0
                            ? detail::concat(", gradients clipped to norm ", options_.clip_grad_norm)
                            : std::string(),
                        ", seed ", options_.seed);
}

}  // namespace ddp::train
