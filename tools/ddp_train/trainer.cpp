// Trainer (see trainer.hpp). Chapter 04.
#include "tools/ddp_train/trainer.hpp"

#include <bit>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "autograd/functions.hpp"
#include "autograd/grad_mode.hpp"
#include "nn/state_dict.hpp"
#include "tensor/cuda/device_info.hpp"
#include "tensor/ops.hpp"
#include "tensor/threads.hpp"
#include "tools/ddp_train/progress.hpp"

namespace ddp::train {

namespace {

constexpr std::int64_t kEvalBatch = 500;

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
// --epochs, --max-steps, --device and --threads may change: a longer run, another
// machine. Floating-point flags are stored as their 64 bits.
struct RecordedSetting {
  const char* key;   // "config.<key>" in the checkpoint
  const char* flag;  // what the user types
  std::int64_t stored;
  bool is_double;
};

std::vector<RecordedSetting> recorded_settings(const TrainOptions& o, std::int64_t train_images) {
  auto bits = [](double v) { return std::bit_cast<std::int64_t>(v); };
  return {{"seed", "--seed", static_cast<std::int64_t>(o.seed), false},
          {"batch_size", "--batch-size", o.batch_size, false},
          {"lr", "--lr", bits(o.lr), true},
          {"momentum", "--momentum", bits(o.momentum), true},
          {"weight_decay", "--weight-decay", bits(o.weight_decay), true},
          {"train_images", "--data (training images)", train_images, false}};
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

Device resolve_device(const std::string& name) {
  if (name == "auto") return cuda::device_count() > 0 ? Device::cuda(0) : Device::cpu();
  const Device device = Device::parse(name);
  if (device.is_cuda()) {
    DDP_CHECK(device.index < cuda::device_count(), "--device ", name, ": no such GPU (",
              cuda::device_count(), " usable)",
              cuda::is_built() ? "" : "; this build has no CUDA (configure with -DDDP_CUDA=ON)");
  }
  return device;
}

Trainer::Trainer(TrainOptions options)
    : options_(std::move(options)),
      device_(resolve_device(options_.device)),
      train_set_(MnistSplit::Train, data_folder(options_)),
      test_set_(MnistSplit::Test, data_folder(options_)),
      sampler_(train_set_.size(), options_.seed),
      init_generator_(options_.seed) {
  if (options_.threads > 0) set_num_threads(options_.threads);
  model_ = std::make_shared<nn::ResNetMnist>(init_generator_);
  model_->to(device_);
  optimizer_ = std::make_unique<nn::SGD>(
      model_->parameters(),
      nn::SGDOptions{.lr = options_.lr, .momentum = options_.momentum,
                     .weight_decay = options_.weight_decay});
  loader_ = std::make_unique<DataLoader>(train_set_, sampler_, options_.batch_size,
                                         /*drop_last=*/false, device_);
  if (!options_.resume.empty()) load_checkpoint(options_.resume);
  if (!options_.metrics.empty()) {
    // A resumed run appends; an empty file (a run killed before its first row) starts over.
    std::error_code ec;
    const bool fresh = options_.resume.empty() || !std::filesystem::exists(options_.metrics) ||
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

bool Trainer::train_epoch(EpochResult& result) {
  model_->train();
  sampler_.set_epoch(epoch_);
  const std::int64_t steps = loader_->num_batches();
  Progress progress(epoch_ + 1, options_.epochs, steps, stdout_is_terminal(), step_in_epoch_,
                    images_seen_);
  const auto start = std::chrono::steady_clock::now();
  std::int64_t step = 0, images_this_run = 0;
  bool stopped_early = false;
  for (Batch& batch : *loader_) {
    if (step++ < step_in_epoch_) continue;  // resumed: these batches were trained already
    if (options_.max_steps > 0 && global_step_ >= options_.max_steps) {
      stopped_early = true;
      break;
    }
    optimizer_->zero_grad();
    Variable logits = (*model_)(Variable(batch.images));
    Variable loss = cross_entropy(logits, batch.labels);
    loss.backward();
    optimizer_->step();

    const std::int64_t b = batch.labels.numel();
    loss_sum_ += static_cast<double>(loss.data().item<float>()) * static_cast<double>(b);
    images_seen_ += b;
    images_this_run += b;
    ++step_in_epoch_;
    ++global_step_;
    progress.update(step, images_seen_, loss_sum_ / static_cast<double>(images_seen_));
  }
  progress.finish();
  result.train_seconds = seconds_since(start);
  result.images_per_second = static_cast<double>(images_this_run) / result.train_seconds;
  result.train_loss = images_seen_ > 0 ? loss_sum_ / static_cast<double>(images_seen_) : 0.0;
  return !stopped_early;
}

Evaluation Trainer::evaluate() {
  model_->eval();
  NoGradGuard no_grad;
  Evaluation e;
  SequentialSampler order(test_set_.size());
  DataLoader loader(test_set_, order, kEvalBatch, /*drop_last=*/false, device_);
  for (Batch& batch : loader) {
    Variable logits = (*model_)(Variable(batch.images));
    const std::int64_t b = batch.labels.numel();
    e.loss += static_cast<double>(cross_entropy(logits, batch.labels).data().item<float>()) *
              static_cast<double>(b);
    e.correct += sum(eq(argmax(logits.data(), 1), batch.labels)).item<float>();
    e.total += b;
  }
  e.loss /= static_cast<double>(e.total);
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
  EpochResult result;
  if (epoch_ >= options_.epochs || steps_used_up()) {
    // Resumed from a run that had already finished (a job resubmitted after it ended):
    // nothing to train, but the `final:` line still reports the model it would leave.
    std::printf("nothing left to train: the checkpoint has finished %lld of %lld epochs, "
                "%lld steps (--max-steps %lld)\n",
                static_cast<long long>(epoch_), static_cast<long long>(options_.epochs),
                static_cast<long long>(global_step_), static_cast<long long>(options_.max_steps));
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
    const bool finished = train_epoch(result);
    evaluate_into(result);
    std::printf("epoch %lld/%lld: train loss %.4f, test loss %.4f, test accuracy %.2f%%, "
                "%.0f img/s, %.2f s\n",
                static_cast<long long>(result.epoch), static_cast<long long>(options_.epochs),
                result.train_loss, result.test_loss, result.test_accuracy,
                result.images_per_second, result.train_seconds);
    std::fflush(stdout);
    if (finished) write_metrics(result);
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

void Trainer::write_metrics(const EpochResult& r) {
  if (!metrics_.is_open()) return;
  metrics_ << r.epoch << ',' << r.train_loss << ',' << r.test_loss << ',' << r.test_accuracy
           << ',' << r.images_per_second << ',' << r.train_seconds << '\n';
  metrics_.flush();
  DDP_CHECK(metrics_.good(), "writing epoch ", r.epoch, "'s row to --metrics file ",
            options_.metrics, " failed (disk full?)");
}

// ---- Checkpoints --------------------------------------------------------------------
// One DDPSTATE file (nn/state_dict.hpp): "model.<name>", "optimizer.<name>" and
// "progress.<counter>" entries. The epoch's loss sum is a double; it is stored as its
// 64 bits in an int64 so that a resumed run prints the very same epoch loss.

void Trainer::save_checkpoint(const std::string& path) const {
  nn::StateDict state;
  for (auto& [name, t] : model_->state_dict()) state.emplace_back("model." + name, t);
  for (auto& [name, t] : optimizer_->state_dict()) state.emplace_back("optimizer." + name, t);
  state.emplace_back("progress.epoch", counter(epoch_));
  state.emplace_back("progress.step_in_epoch", counter(step_in_epoch_));
  state.emplace_back("progress.global_step", counter(global_step_));
  state.emplace_back("progress.images_seen", counter(images_seen_));
  state.emplace_back("progress.loss_sum_bits", counter(std::bit_cast<std::int64_t>(loss_sum_)));
  for (const RecordedSetting& s : recorded_settings(options_, train_set_.size())) {
    state.emplace_back(std::string("config.") + s.key, counter(s.stored));
  }
  nn::save_state_dict(state, path);
}

void Trainer::load_checkpoint(const std::string& path) {
  const nn::StateDict state = nn::read_state_dict(path);
  nn::StateDict model_state, optimizer_state;
  auto find = [&](const std::string& name) -> std::int64_t {
    for (const auto& [key, t] : state) {
      if (key == name) return t.item<std::int64_t>();
    }
    DDP_FAIL("checkpoint ", path, " has no entry '", name,
             "'\nhint: was it written by ddp-train --save?");
  };
  for (const auto& [key, t] : state) {
    if (key.starts_with("model.")) model_state.emplace_back(key.substr(6), t);
    if (key.starts_with("optimizer.")) optimizer_state.emplace_back(key.substr(10), t);
  }
  std::string differences;
  for (const RecordedSetting& s : recorded_settings(options_, train_set_.size())) {
    const std::int64_t saved = find(std::string("config.") + s.key);
    if (saved == s.stored) continue;
    differences += std::string(differences.empty() ? "" : ", ") + s.flag + " " +
                   setting_text(s, saved) + " (this run: " + setting_text(s, s.stored) + ")";
  }
  DDP_CHECK(differences.empty(), "checkpoint ", path, " was written by a run with ",
            differences, "\nhint: resume with the flags of the run that saved it");
  model_->load_state_dict(model_state, path);
  optimizer_->load_state_dict(optimizer_state, path);
  epoch_ = find("progress.epoch");
  step_in_epoch_ = find("progress.step_in_epoch");
  global_step_ = find("progress.global_step");
  images_seen_ = find("progress.images_seen");
  loss_sum_ = std::bit_cast<double>(find("progress.loss_sum_bits"));
  std::printf("resumed from %s: epoch %lld, step %lld of it (%lld steps in all)\n", path.c_str(),
              static_cast<long long>(epoch_ + 1), static_cast<long long>(step_in_epoch_),
              static_cast<long long>(global_step_));
}

}  // namespace ddp::train
