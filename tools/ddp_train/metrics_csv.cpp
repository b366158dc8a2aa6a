// The --metrics file: one CSV row per finished epoch, written by rank 0 (epoch,
// train_loss, test_loss, test_accuracy, images_per_second, train_seconds). Chapter 04.
// A resumed run appends to it, after dropping the rows that its checkpoint has not
// finished (keep_finished_rows). Nothing here computes the numbers (trainer.cpp,
// evaluate.cpp).
#include "tools/ddp_train/trainer.hpp"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace ddp::train {

namespace {

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

void Trainer::write_metrics(const EpochResult& r) {
  if (!metrics_.is_open()) return;
  metrics_ << r.epoch << ',' << r.train_loss << ',' << r.test_loss << ',' << r.test_accuracy << ','
           << r.images_per_second << ',' << r.train_seconds << '\n';
  metrics_.flush();
  DDP_CHECK(metrics_.good(), "writing epoch ", r.epoch, "'s row to --metrics file ",
            options_.metrics, " failed (disk full?)");
}

}  // namespace ddp::train
