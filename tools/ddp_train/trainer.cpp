// Trainer (see trainer.hpp). Chapter 04; made data-parallel in chapter 06.
#include "tools/ddp_train/trainer.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "autograd/functions.hpp"
#include "autograd/grad_mode.hpp"
#include "dist/init.hpp"
#include "dist/launch_env.hpp"
#include "dist/parallel/comm_hooks.hpp"
#include "dist/parallel/ledger.hpp"
#include "dist/parallel/sync_batch_norm.hpp"
#include "dist/process_group_tcp.hpp"
#include "nn/state_dict.hpp"
#include "tensor/cuda/device_info.hpp"
#include "tensor/ops.hpp"
#include "tensor/threads.hpp"
#include "tools/ddp_train/progress.hpp"
#include "tools/ddp_train/stop_request.hpp"
#include "base/units.hpp"
#include "base/who.hpp"  // name_ranks

namespace ddp::train {

namespace {

constexpr std::int64_t kEvalBatch = 500;

// --bucket-cap-mb 0.25 -> 262,144 bytes (at least one).
std::int64_t mebibytes(double mib) {
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(mib * kMiB));
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string data_folder(const TrainOptions& o) {
  return o.data.empty() ? default_mnist_folder() : o.data;
}

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
      {"width", "--width", o.width, false, 1}};
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

// A resumed run appends to its metrics file, but first drops the rows of epochs that the
// checkpoint has not finished: a run that died after writing an epoch's row and before
// saving its checkpoint trains that epoch again, and must not leave two rows for it. The
// file is rewritten beside itself and renamed over, so a crash here loses nothing.
void keep_finished_rows(const std::string& path, std::int64_t finished_epochs) {
  std::ifstream in(path);
  std::string line, kept;
  bool dropped = false;
  if (std::getline(in, line)) kept = line + '\n';  // the header
  while (std::getline(in, line)) {
    const std::int64_t epoch = std::atoll(line.c_str());
    if (epoch >= 1 && epoch <= finished_epochs) {
      kept += line + '\n';
    } else {
      dropped = true;
    }
  }
  if (!dropped) return;
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::trunc);
  out << kept;
  out.close();
  std::error_code ec;
  if (!out) std::filesystem::remove(tmp, ec);  // a full disk: keep the old file whole
  DDP_CHECK(out.good(), "cannot rewrite --metrics file ", path, " (writing ", tmp, " failed)");
  std::filesystem::rename(tmp, path, ec);
  DDP_CHECK(!ec, "cannot rewrite --metrics file ", path, ": ", ec.message());
}

}  // namespace

Device resolve_device(const std::string& name, int local_rank) {
  const int gpus = cuda::device_count();
  if (name == "auto" || name == "cuda") {
    const int gpu = gpu_for_local_rank(local_rank, gpus);
    if (gpu >= 0) return Device::cuda(gpu);
    // More ranks on this node than GPUs: they share them, in turn. (Every rank of a node
    // sees the same GPUs, so either all of them get one or none does.)
    if (gpus > 0) return Device::cuda(local_rank % gpus);
    DDP_CHECK(name == "auto", "--device cuda: no usable GPU on this node",
              cuda::is_built() ? "" : " (this build has no CUDA: configure with -DDDP_CUDA=ON)");
    return Device::cpu();
  }
  const Device device = Device::parse(name);
  if (device.is_cuda()) {
    DDP_CHECK(device.index < cuda::device_count(), "--device ", name, ": no such GPU (",
              cuda::device_count(), " usable)",
              cuda::is_built() ? "" : "; this build has no CUDA (configure with -DDDP_CUDA=ON)");
  }
  return device;
}

LaunchEnv discover_for_training() {
  const Environment env = current_environment();
  try {
    return discover_launch_env(env);
  } catch (const Error& e) {
    if (!in_slurm_batch_shell(env)) throw;
    std::fprintf(stderr,
                 "ddp-train: no srun started this process in a job of several tasks: "
                 "training as one process (srun ddp-train ... starts one rank per task)\n");
    return LaunchEnv{};
  }
}

std::unique_ptr<WatchedGroup> join_process_group(const TrainOptions& options, const LaunchEnv& env,
                                                 Device device) {
  if (env.world_size == 1) {  // alone: no group, no averaging
    defer_stop_signals();
    return nullptr;
  }
  InitOptions init;
  init.backend = options.backend;
  init.timeout = std::chrono::seconds(options.timeout_s);
  if (init.backend == "auto") {
    // NCCL wants a GPU of its own per rank; ranks that share one (more ranks on a node
    // than GPUs) stage their CUDA tensors through the tcp group instead. Decided per node:
    // on a cluster whose nodes differ, name the backend (--backend).
    const bool own_gpu = device.is_cuda() && cuda::device_count() >= env.local_world_size;
    init.backend = own_gpu ? "nccl" : "tcp";
  }
  WatchOptions watched;
  watched.timeout = init.timeout;  // the group's own deadline, and the watchdog's
  std::unique_ptr<WatchedGroup> group = watch(init_process_group(init), watched);
  // The ranks have met: a stop signal now waits for a step's end (stop_request.hpp).
  defer_stop_signals();
  return group;
}

int threads_per_rank(const TrainOptions& options, const LaunchEnv& launch) {
  if (options.threads > 0) return options.threads;
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return get_num_threads();  // the user's choice
  // Ranks that share a node share its cores: 2 ranks on 2 cores with 2 threads each would
  // fight over them (torchrun sets OMP_NUM_THREADS=1 for the same reason).
  const int ranks_here = std::max(1, launch.local_world_size);
  return std::max(1, get_num_threads() / ranks_here);
}

template <typename Action>
void Trainer::together(const char* what, Action&& action) {
  std::exception_ptr error;
  try {
    action();
  } catch (...) {
    error = std::current_exception();
  }
  if (!group_) {
    if (error) std::rethrow_exception(error);
    return;
  }
  const std::vector<std::int64_t> failed = gather_over_ranks({error ? 1 : 0});
  if (error) std::rethrow_exception(error);  // this rank's own message
  std::vector<int> ranks;
  for (int r = 0; r < world_size(); ++r) {
    if (failed[static_cast<std::size_t>(r)] != 0) ranks.push_back(r);
  }
  DDP_CHECK(ranks.empty(), "stopping: ", name_ranks(ranks), " failed ", what,
            " (its own message says why)");
}

Trainer::Trainer(TrainOptions options)
    : options_(std::move(options)),
      launch_(discover_for_training()),
      device_(resolve_device(options_.device, launch_.local_rank)),
      group_(join_process_group(options_, launch_, device_)),
      batch_size_(per_rank_batch(options_, world_size())),
      train_set_(MnistSplit::Train, data_folder(options_)),
      test_set_(MnistSplit::Test, data_folder(options_)),
      sampler_(train_set_.size(), world_size(), rank(), /*shuffle=*/true, options_.seed,
               /*drop_last=*/false),
      init_generator_(options_.seed) {
  set_num_threads(threads_per_rank(options_, launch_));
  check_same_data();
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
  if (group_) {
    DDPOptions ddp{.broadcast_buffers = options_.broadcast_buffers,
                   .gradient_sync = options_.grad_sync == "per-parameter"
                                        ? GradientSync::PerParameter
                                    : options_.grad_sync == "flat" ? GradientSync::Flat
                                                                   : GradientSync::Bucketed};
    ddp.reducer.bucket_cap_bytes = mebibytes(options_.bucket_cap_mb);
    ddp.reducer.first_bucket_bytes = mebibytes(options_.first_bucket_mb);
    ddp.reducer.find_unused_parameters = options_.find_unused_parameters;
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
  optimizer_ = std::make_unique<nn::SGD>(
      model_->parameters(),
      nn::SGDOptions{
          .lr = options_.lr, .momentum = options_.momentum, .weight_decay = options_.weight_decay});
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

// Rank 0 writes the job's metrics; the other ranks have nothing to open.
void Trainer::open_metrics() {
  if (!options_.metrics.empty() && rank() == 0) {
    // A resumed run appends; an empty file (a run killed before its first row) starts over.
    std::error_code ec;
    const bool fresh = resumed_from_.empty() || !std::filesystem::exists(options_.metrics) ||
                       std::filesystem::file_size(options_.metrics, ec) == 0;
    if (!fresh) keep_finished_rows(options_.metrics, epoch_);
    metrics_.open(options_.metrics, fresh ? std::ios::trunc : std::ios::app);
    DDP_CHECK(metrics_.good(), "cannot open --metrics file ", options_.metrics);
    if (fresh) {
      metrics_ << "epoch,train_loss,test_loss,test_accuracy,images_per_second,train_seconds\n";
      metrics_.flush();  // on disk now: a run killed in epoch 1 leaves a file with a header
      DDP_CHECK(metrics_.good(), "cannot write --metrics file ", options_.metrics);
    }
  }
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

// Note [Agreeing to stop]
// A signal reaches the ranks at different times: ddprun forwards it to one after the
// other, SLURM signals each task, a user may `kill` one rank. A rank that stopped alone
// would leave the others waiting in the next step's all-reduce until --timeout. So after
// every step each rank contributes the signal it has seen (0: none) to a one-element
// all-reduce with Max, and all of them act on the result: they stop after the same step,
// with the same model, and rank 0 saves it. The cost is one 8-byte all-reduce per step,
// a round trip (tens of microseconds over loopback tcp, a few over NCCL) against a step's
// milliseconds (on a GPU it adds no wait: train_step already reads the loss back every
// step); checking every K steps would divide it by K and delay the stop by up to K
// steps, and riding on the gradients' all-reduce would tie this file to the Reducer.
// The signal handler itself only records the number: stop_request.cpp.
bool Trainer::stop_agreed() {
  std::int64_t sig = stop_signal();
  if (group_) {
    Tensor flag = from_data(std::span<const std::int64_t>(&sig, 1), {1}).to(device_);
    group_->all_reduce(flag, ReduceOp::Max)->wait();
    sig = flag.to_vector<std::int64_t>()[0];
  }
  stop_signal_ = static_cast<int>(sig);
  return sig != 0;
}

// One optimizer step on this rank's batch; with DDP, the gradients are averaged over the
// ranks between backward and the step, so every rank applies the same update.
void Trainer::train_step(const Batch& batch) {
  optimizer_->set_lr(schedule_(global_step_));
  optimizer_->zero_grad();
  const Variable images(batch.images);
  // The top-level compute spans of the timeline; each module records its own inside.
  Variable loss;
  {
    trace::Span span("forward", "forward + loss");
    Variable logits = ddp_ ? (*ddp_)(images) : (*model_)(images);
    loss = cross_entropy(logits, batch.labels);
  }
  {
    trace::Span span("backward", "backward");
    loss.backward();
  }
  if (ddp_) ddp_->average_gradients();
  {
    trace::Span span("optimizer", "SGD step");
    optimizer_->step();
  }

  const std::int64_t b = batch.labels.numel();
  loss_sum_ += static_cast<double>(loss.data().item<float>()) * static_cast<double>(b);
  images_seen_ += b;
  ++step_in_epoch_;
  ++global_step_;
  if (ddp_ && options_.check_sync > 0 && global_step_ % options_.check_sync == 0) {
    ddp_->check_in_sync(global_step_);
  }
}

void Trainer::sum_over_ranks(std::vector<double>& values, std::vector<std::int64_t>& counts) {
  if (!group_) return;
  // float32 on the wire (what every backend reduces); the counts exactly, as int64.
  std::vector<float> narrowed(values.begin(), values.end());
  Tensor v =
      from_data(std::span<const float>(narrowed), {static_cast<std::int64_t>(narrowed.size())})
          .to(device_);
  Tensor c =
      from_data(std::span<const std::int64_t>(counts), {static_cast<std::int64_t>(counts.size())})
          .to(device_);
  if (!values.empty()) group_->all_reduce(v)->wait();
  if (!counts.empty()) group_->all_reduce(c)->wait();
  const std::vector<float> summed = v.to_vector<float>();
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = summed[i];
  counts = c.to_vector<std::int64_t>();
}

std::vector<std::int64_t> Trainer::gather_over_ranks(const std::vector<std::int64_t>& mine) {
  if (!group_) return mine;
  const auto n = static_cast<std::int64_t>(mine.size());
  Tensor input = from_data(std::span<const std::int64_t>(mine), {n}).to(device_);
  Tensor all = empty({n * world_size()}, TensorOptions{.dtype = DType::Int64, .device = device_});
  group_->all_gather(all, input)->wait();
  return all.to_vector<std::int64_t>();
}

// Ranks that read different data, or compute on different kinds of device, would train
// different models without a word: both are compared before anything else.
void Trainer::check_same_data() {
  if (!group_) return;
  const std::vector<std::int64_t> all =
      gather_over_ranks({train_set_.size(), test_set_.size(), device_.is_cuda() ? 1 : 0});
  std::string data, devices;
  for (int r = 1; r < world_size(); ++r) {
    const auto i = static_cast<std::size_t>(3 * r);
    if (all[i] != all[0] || all[i + 1] != all[1]) {
      data += detail::concat(data.empty() ? "" : "; ", "rank ", r, " has ", all[i],
                             " training and ", all[i + 1], " test images");
    }
    if (all[i + 2] != all[2]) devices += detail::concat(devices.empty() ? "" : ", ", r);
  }
  DDP_CHECK(data.empty(), "the ranks read different data (rank ", rank(), " reads ",
            data_folder(options_), "): rank 0 has ", all[0], " training and ", all[1],
            " test images; ", data,
            "\nhint: give every rank the same --data folder (or the same $MNIST_DIR)");
  // CPU and GPU kernels round differently: the replicas would drift apart bit by bit.
  DDP_CHECK(devices.empty(), "rank 0 trains on ", all[2] ? "a GPU" : "the CPU", " but rank",
            devices.find(',') == std::string::npos ? " " : "s ", devices, " on ",
            all[2] ? "the CPU" : "a GPU", "\nhint: give every rank the same --device");
}

Evaluation Trainer::evaluate() {
  trace::Span span("evaluation", "evaluation");  // not compute: outside the summary
  const ledger::Label label(detail::concat("evaluation after epoch ", epoch_ + 1));
  // The last training forward updated every rank's running statistics from its own
  // shard: rank 0's go to all first, so that the ranks evaluate one model, the one rank 0
  // saves (with --no-broadcast-buffers each rank keeps its own, as asked).
  if (ddp_ && options_.broadcast_buffers) ddp_->sync_buffers();
  model_->eval();
  NoGradGuard no_grad;
  Evaluation e;
  // Each rank evaluates every world_size-th image, no padding (ShardSampler): sums over the
  // ranks are sums over the test set, each image counted once.
  ShardSampler order(test_set_.size(), world_size(), rank());
  DataLoader loader(test_set_, order, kEvalBatch, /*drop_last=*/false, device_);
  double loss_sum = 0.0;
  std::int64_t correct = 0, total = 0;
  for (Batch& batch : loader) {
    Variable logits = (*model_)(Variable(batch.images));
    const std::int64_t b = batch.labels.numel();
    loss_sum += static_cast<double>(cross_entropy(logits, batch.labels).data().item<float>()) *
                static_cast<double>(b);
    correct +=
        static_cast<std::int64_t>(sum(eq(argmax(logits.data(), 1), batch.labels)).item<float>());
    total += b;
  }
  std::vector<double> losses{loss_sum};
  std::vector<std::int64_t> counts{correct, total};
  sum_over_ranks(losses, counts);
  e.correct = counts[0];
  e.total = counts[1];
  e.loss = losses[0] / static_cast<double>(e.total);
  model_->train();
  return e;
}

bool Trainer::steps_used_up() const {
  return options_.max_steps > 0 && global_step_ >= options_.max_steps;
}

void Trainer::evaluate_into(EpochResult& result) {
  const Evaluation e = evaluate();
  result.test_loss = e.loss;
  result.test_correct = e.correct;
  result.test_total = e.total;
  result.test_accuracy = 100.0 * static_cast<double>(e.correct) / static_cast<double>(e.total);
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

std::string Trainer::describe_recipe() const {
  const std::string schedule =
      options_.schedule == "constant"
          ? "constant"
          : detail::concat(options_.warmup_epochs, " warm-up epoch",
                           options_.warmup_epochs == 1 ? "" : "s", " from lr/10, then cosine to 0");
  std::string ranks = "1 process";
  if (group_) {
    const std::string sync =
        options_.grad_sync == "bucketed"
            ? detail::concat("bucketed, ", ddp_->reducer().bucket_assignment().size(), " bucket",
                             ddp_->reducer().bucket_assignment().size() == 1 ? "" : "s",
                             " of <= ", options_.bucket_cap_mb, " MiB",
                             options_.comm_hook == "bf16" ? ", bf16 comm hook" : "")
            : options_.grad_sync;
    // "tcp (emulated link 1 Gbit/s, 50 us)" when DDP_TCP_LINK slows the tcp group down.
    const auto* tcp = dynamic_cast<const ProcessGroupTcp*>(&group_->inner());
    ranks = detail::concat(world_size(), " ranks (", tcp ? tcp->description() : backend(),
                           ", gradients ", sync, options_.sync_bn ? ", SyncBatchNorm" : "",
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
                        ", lr ", options_.lr, " (", schedule, "), momentum ", options_.momentum,
                        ", weight decay ", options_.weight_decay, ", seed ", options_.seed);
}

void Trainer::write_metrics(const EpochResult& r) {
  if (!metrics_.is_open()) return;
  metrics_ << r.epoch << ',' << r.train_loss << ',' << r.test_loss << ',' << r.test_accuracy << ','
           << r.images_per_second << ',' << r.train_seconds << '\n';
  metrics_.flush();
  DDP_CHECK(metrics_.good(), "writing epoch ", r.epoch, "'s row to --metrics file ",
            options_.metrics, " failed (disk full?)");
}

// ---- Checkpoints --------------------------------------------------------------------
// One DDPSTATE file (nn/state_dict.hpp): "model.<name>", "optimizer.<name>" and
// "progress.<counter>" entries. The epoch's loss sum is a double; it is stored as its
// 64 bits in an int64 so that a resumed run prints the very same epoch loss. Each rank
// has its own running sums (its images, its losses), so the checkpoint keeps one per rank
// ((world size) tensors): every rank calls save_checkpoint, the sums are all-gathered,
// and rank 0 writes the file (atomically: save_state_dict writes a temporary file, then
// renames it). On --resume every rank reads the file and takes back its own sums.
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

void Trainer::save_checkpoint(const std::string& path) {
  const ledger::Label label("checkpoint");
  const std::vector<std::int64_t> all = gather_over_ranks(
      {std::bit_cast<std::int64_t>(loss_sum_), images_seen_});  // (loss bits, images) per rank
  together("writing the checkpoint", [&] { write_checkpoint(path, all); });
}

void Trainer::write_checkpoint(const std::string& path, const std::vector<std::int64_t>& all) {
  if (rank() != 0) return;
  std::vector<std::int64_t> loss_bits, images;
  for (std::size_t r = 0; r < all.size(); r += 2) {
    loss_bits.push_back(all[r]);
    images.push_back(all[r + 1]);
  }
  auto per_rank = [](const std::vector<std::int64_t>& v) {
    return from_data(std::span<const std::int64_t>(v), {static_cast<std::int64_t>(v.size())});
  };
  nn::StateDict state;
  for (auto& [name, t] : model_->state_dict()) state.emplace_back("model." + name, t);
  for (auto& [name, t] : optimizer_->state_dict()) state.emplace_back("optimizer." + name, t);
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
  nn::save_state_dict(state, path);
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
      static_cast<void>(nn::read_state_dict(path));  // the whole file, every CRC
      usable = 1;
    } catch (const Error& e) {
      const std::string message = e.what();
      why = "not usable: " + message.substr(0, message.find('\n'));
    }
  }
  const std::vector<std::int64_t> all = gather_over_ranks({usable});
  std::string disagree;
  for (int r = 0; r < world_size(); ++r) {
    if (all[static_cast<std::size_t>(r)] != all[0]) disagree += detail::concat(" ", r);
  }
  DDP_CHECK(disagree.empty(), "--resume auto: rank 0 ", all[0] ? "can" : "cannot",
            " read a checkpoint at ", path, ", but rank(s)", disagree, " ",
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
  const nn::StateDict state = nn::read_state_dict(path);
  nn::StateDict model_state, optimizer_state;
  auto has = [&](const std::string& name) {
    return std::any_of(state.begin(), state.end(), [&](const auto& e) { return e.first == name; });
  };
  auto entry = [&](const std::string& name) -> const Tensor& {
    for (const auto& [key, t] : state) {
      if (key == name) return t;
    }
    DDP_FAIL("checkpoint ", path, " has no entry '", name,
             "'\nhint: was it written by ddp-train --save?");
  };
  auto find = [&](const std::string& name) { return entry(name).item<std::int64_t>(); };
  for (const auto& [key, t] : state) {
    if (key.starts_with("model.")) model_state.emplace_back(key.substr(6), t);
    if (key.starts_with("optimizer.")) optimizer_state.emplace_back(key.substr(10), t);
  }
  const std::int64_t saved_world = find("config.world_size");
  std::string differences;
  for (const RecordedSetting& s : recorded_settings(options_, train_set_.size(), global_batch())) {
    const std::string key = std::string("config.") + s.key;
    std::int64_t saved = 0;
    if (has(key)) {
      saved = find(key);
    } else if (key == "config.global_batch_size") {  // written before chapter 08
      saved = find("config.batch_size") * saved_world;
    } else {
      saved = s.if_absent ? *s.if_absent : find(key);  // find() names the missing entry
    }
    if (saved == s.stored) continue;
    differences += std::string(differences.empty() ? "" : ", ") + s.flag + " " +
                   setting_text(s, saved) + " (this run: " + setting_text(s, s.stored) + ")";
  }
  DDP_CHECK(differences.empty(), "checkpoint ", path, " was written by a run with ", differences,
            "\nhint: resume with the flags of the run that saved it");
  // This rank's share of a per-rank entry: old rank o's values for every o with
  // o mod (this world) = this rank (Note [Resuming on another world size]); on the same
  // world, exactly one, its own.
  auto shares = [&](const std::string& name) {
    const std::vector<std::int64_t> all = entry(name).to_vector<std::int64_t>();
    DDP_CHECK(static_cast<std::int64_t>(all.size()) == saved_world, "checkpoint ", path,
              ": entry '", name, "' has ", all.size(), " values, expected one per rank of the ",
              saved_world, " that saved it (config.world_size)");
    std::vector<std::int64_t> mine;
    for (std::size_t o = static_cast<std::size_t>(rank()); o < all.size();
         o += static_cast<std::size_t>(world_size())) {
      mine.push_back(all[o]);
    }
    return mine;
  };
  model_->load_state_dict(model_state, path);
  optimizer_->load_state_dict(optimizer_state, path);
  epoch_ = find("progress.epoch");
  step_in_epoch_ = find("progress.step_in_epoch");
  global_step_ = find("progress.global_step");
  images_seen_ = 0;
  for (std::int64_t images : shares("progress.images_seen")) images_seen_ += images;
  // Doubles stored as their bits. The first share is taken as it is, not added to 0.0:
  // on the same world the sum is the saved one, bit for bit.
  const std::vector<std::int64_t> losses = shares("progress.loss_sum_bits");
  loss_sum_ = 0.0;
  for (std::size_t i = 0; i < losses.size(); ++i) {
    const double loss = std::bit_cast<double>(losses[i]);
    loss_sum_ = i == 0 ? loss : loss_sum_ + loss;
  }
  if (rank() == 0) {
    std::printf("resumed from %s: epoch %lld, step %lld of it (%lld steps in all)\n", path.c_str(),
                static_cast<long long>(epoch_ + 1), static_cast<long long>(step_in_epoch_),
                static_cast<long long>(global_step_));
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
