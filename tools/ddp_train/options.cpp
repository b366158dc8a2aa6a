// Command-line parsing for ddp-train (see options.hpp).
#include "tools/ddp_train/options.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "data/mnist.hpp"  // default_mnist_folder
#include "tensor/device.hpp"
#include "base/error.hpp"

namespace ddp::train {

namespace {

template <typename T>
T parse_number(std::string_view flag, std::string_view text, T min) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  DDP_CHECK(ec == std::errc() && ptr == end && value >= min, flag, " expects a number >= ", min,
            ", got '", text, "'");
  return value;
}

double parse_double(std::string_view flag, std::string_view text, double min) {
  const std::string copy(text);
  char* end = nullptr;
  const double value = std::strtod(copy.c_str(), &end);
  // isfinite: strtod also reads "inf", "nan" and overflows such as "1e999".
  DDP_CHECK(!copy.empty() && end == copy.c_str() + copy.size() && std::isfinite(value) &&
                value >= min,
            flag, " expects a finite number >= ", min, ", got '", text, "'");
  return value;
}

}  // namespace

std::string usage() {
  return R"(usage: ddp-train [flags]

Trains the ResNet-style network of chapter 04 on MNIST and reports test accuracy.

  --data DIR            MNIST IDX files (.gz or raw); default: $MNIST_DIR, else the
                        bundled 8,000/2,000 digits in data/mnist-10k
  --epochs N            passes over the training set (default 5)
  --max-steps N         stop after N optimizer steps in all (default 0: no limit)
  --batch-size N        images per backward on each rank (default: 128 / ranks / K); a
                        step is K of them under --grad-accum K
  --global-batch-size N images per step over all ranks (default 128)
  --eval-batch-size N   test images per forward of the evaluation, per rank (default 500)
  --lr X                learning rate (SGD's or AdamW's), peak of the schedule
                        (default 0.1 for SGD, 1e-3 for AdamW)
  --schedule S          cosine: a linear warm-up from lr/10, then cosine decay to 0,
                        per step; constant: lr throughout (default cosine)
  --warmup-epochs N     epochs of warm-up before the cosine (default 1)
  --momentum X          SGD momentum (default 0.9)
  --weight-decay X      SGD: L2 penalty added to the gradient; AdamW: decoupled
                        (default 5e-4 for SGD, 1e-2 for AdamW)
  --seed N              initial weights and shuffling (default 0)
  --device D            cpu, cuda, cuda:N or auto (default auto: a GPU when present,
                        cuda:<local rank> on several ranks)
  --threads N           CPU threads per rank (default: OMP_NUM_THREADS, else the
                        cores divided among the ranks on this node)
  --metrics FILE.csv    write one row of metrics per epoch
  --save PATH           write a checkpoint (model + optimizer + progress) after every epoch,
                        and when stopped by a signal after the ranks have met
  --resume PATH         continue from a checkpoint written by --save (either
                        --save-format), also on another number of ranks with the same
                        global batch
  --resume auto         continue from --save's PATH when it holds a usable checkpoint,
                        else start fresh (for jobs that restart: ddprun --max-restarts)
  --progress P          within an epoch, rank 0 shows: bar (one line redrawn with
                        carriage returns), lines (a plain line every ~20% of the
                        epoch, for logs) or none; auto (the default): bar on a
                        terminal, lines when stdout is a file or a pipe and under
                        mpirun/mpiexec (it gives ranks a pseudo-terminal whose output
                        ends up in a log)
  --timeout SECONDS     how long a rank waits for the others in the rendezvous and in
                        every collective before it fails (default )" +
         std::to_string(TrainOptions::kDefaultTimeoutSeconds) + R"(; PyTorch: 1800,
                        600 for NCCL)

Data parallel (chapter 06): started by ddprun, srun, mpirun or torchrun, every rank
trains on its shard and gradients are averaged; alone, it is one process.
  --backend B           tcp, mpi, nccl or auto (default auto: nccl when every rank has
                        a GPU of its own, told apart by UUID; else tcp)
  --sync-bn             SyncBatchNorm: batch statistics over the global batch
  --grad-sync S         bucketed (chapter 07's Reducer: buckets all-reduced during
                        backward), flat (one all-reduce of all gradients after it) or
                        per-parameter (default bucketed)
  --bucket-cap-mb X     bucket size cap in MiB (default 25, as PyTorch)
  --first-bucket-mb X   the first bucket's cap in MiB (default 1)
  --find-unused-parameters  a parameter without a gradient in a step is not an error
  --print-buckets       print the bucket assignment (rank 0) before training
  --comm-hook H         what each bucket goes through: all-reduce (default) or bf16
                        (rounded to bfloat16, all-gathered, summed in rank order:
                        half the bytes at 2 ranks, as many at 4, more beyond)
  --no-broadcast-buffers  keep each rank's BatchNorm running statistics
  --check-sync N        every N steps, check that all ranks hold the same weights

Seeing the overlap (chapter 07):
  --trace FILE.json     record a timeline (open it in ui.perfetto.dev) and print a
                        compute/communication summary per epoch; with several ranks,
                        rank R writes FILE.rankR.json (merge them: ddp-trace-merge;
                        offline, ddp-trace-merge --svg draws them for any browser)
  --width K             every layer's channels x K (default 1: 77,754 parameters;
                        2: 308,074; 4: 1,226,442)

Sharded training (chapter 09):
  --optimizer O         sgd (--momentum; --weight-decay added to the gradient) or adamw
                        (--weight-decay decoupled; betas 0.9, 0.999) (default sgd)
  --clip-grad-norm X    scale the gradients so that their global L2 norm is at most X
                        (default 0: off)
  --grad-accum K        K micro-batches of --batch-size per step, the first K-1 backwards
                        without communication: global batch = batch x K x ranks (default 1)
  --shard S             none (DDP), zero1 (optimizer state sharded over the ranks), zero2
                        (gradients too) or fsdp (parameters too) (default none)
  --save-format F       full (default: one file, the state consolidated, rank 0 writes
                        it) or sharded (under --shard zero1, zero2 or fsdp: each rank
                        writes its slices to PATH.g<N>.rank<R>-of-<W>, then rank 0 writes
                        the manifest PATH, last; resumable on any number of ranks)
  --print-memory        each rank prints its tensor memory by category after each epoch,
                        beside the page's prediction; DDP_MEMORY_LIMIT_MB=N makes an
                        allocation past N MiB per rank fail, naming what it was for
  --help                this text

Stopping (chapter 08): SIGTERM, SIGINT (Ctrl-C) or SIGUSR1 (SLURM's --signal=B:USR1@T)
make every rank finish its step; the ranks agree to stop after the same step, rank 0
writes the --save checkpoint, and all exit with 75. A second Ctrl-C ends it at once.
While the ranks are still meeting, a stop signal ends ddp-train at once, also with 75.

Exit codes (base/exit_codes.hpp):
  0    the run finished ("final:" line)
  1    an error; the message names the rank
  2    bad flags; nothing was started
  4    the watchdog gave up: a collective passed --timeout, or the ranks called different
       collectives; rank 0 prints the diagnosis ("rank 2 is behind ...")
  75   stopped on request; the last line says how to resume (or that nothing was saved)
)";
}

namespace {

// Each flag and what its value sets. A table, so that a name is known to be a flag (or
// not) before its value is looked for: `--bogus` at the end is an unknown flag, not one
// that "needs a value".
using Setter = void (*)(TrainOptions&, std::string_view flag, std::string_view value);
struct Flag {
  std::string_view name;
  Setter set;
};

constexpr Flag kFlags[] = {
    {"--data", [](TrainOptions& o, std::string_view, std::string_view v) { o.data = v; }},
    {"--epochs",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       o.epochs = parse_number<std::int64_t>(f, v, 1);
     }},
    {"--max-steps",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       o.max_steps = parse_number<std::int64_t>(f, v, 0);
     }},
    {"--batch-size",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       o.batch_size = parse_number<std::int64_t>(f, v, 1);
     }},
    {"--global-batch-size",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       o.global_batch_size = parse_number<std::int64_t>(f, v, 1);
     }},
    {"--eval-batch-size",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       o.eval_batch_size = parse_number<std::int64_t>(f, v, 1);
     }},
    {"--schedule",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       DDP_CHECK(v == "cosine" || v == "constant", f, " expects cosine or constant, got '", v,
                 "'");
       o.schedule = v;
     }},
    {"--warmup-epochs",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       o.warmup_epochs = parse_number<std::int64_t>(f, v, 0);
     }},
    {"--backend",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       DDP_CHECK(v == "tcp" || v == "mpi" || v == "nccl" || v == "auto", f,
                 " expects tcp, mpi, nccl or auto, got '", v, "'");
       o.backend = v;
     }},
    {"--grad-sync",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       DDP_CHECK(v == "bucketed" || v == "flat" || v == "per-parameter", f,
                 " expects bucketed, flat or per-parameter, got '", v, "'");
       o.grad_sync = v;
     }},
    {"--comm-hook",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       DDP_CHECK(v == "all-reduce" || v == "bf16", f, " expects all-reduce or bf16, got '", v,
                 "'");
       o.comm_hook = v;
     }},
    {"--bucket-cap-mb",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       o.bucket_cap_mb = parse_double(f, v, 1e-6);
     }},
    {"--first-bucket-mb",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       o.first_bucket_mb = parse_double(f, v, 1e-6);
     }},
    {"--check-sync",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       o.check_sync = parse_number<std::int64_t>(f, v, 0);
     }},
    {"--lr", [](TrainOptions& o, std::string_view f, std::string_view v) {
       o.lr_given = parse_double(f, v, 0.0);
     }},
    {"--momentum",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       o.momentum = parse_double(f, v, 0.0);
     }},
    {"--weight-decay",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       o.weight_decay_given = parse_double(f, v, 0.0);
     }},
    {"--seed",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       o.seed = parse_number<std::uint64_t>(f, v, 0);
     }},
    {"--device",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       // Parsed here, so that a typo is a flag error (exit 2), not a failure at start-up.
       // Whether cuda:N exists is known only later (resolve_device).
       try {
         if (v != "auto") static_cast<void>(Device::parse(v));
       } catch (const Error&) {
         DDP_FAIL(f, " expects cpu, cuda, cuda:N or auto, got '", v, "'");
       }
       o.device = v;
     }},
    {"--threads",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       o.threads = parse_number<int>(f, v, 1);
     }},
    {"--metrics", [](TrainOptions& o, std::string_view, std::string_view v) { o.metrics = v; }},
    {"--save", [](TrainOptions& o, std::string_view, std::string_view v) { o.save = v; }},
    {"--trace", [](TrainOptions& o, std::string_view, std::string_view v) { o.trace = v; }},
    {"--width",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       o.width = parse_number<std::int64_t>(f, v, 1);
     }},
    {"--resume", [](TrainOptions& o, std::string_view, std::string_view v) { o.resume = v; }},
    {"--progress",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       DDP_CHECK(v == "auto" || v == "bar" || v == "lines" || v == "none", f,
                 " expects auto, bar, lines or none, got '", v, "'");
       o.progress = v;
     }},
    {"--timeout",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       o.timeout_s = parse_number<int>(f, v, 1);
     }},
    {"--optimizer",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       DDP_CHECK(v == "sgd" || v == "adamw", f, " expects sgd or adamw, got '", v, "'");
       o.optimizer = v;
     }},
    {"--clip-grad-norm",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       o.clip_grad_norm = parse_double(f, v, 0.0);
     }},
    {"--grad-accum",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       o.grad_accum = parse_number<std::int64_t>(f, v, 1);
     }},
    {"--save-format",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       DDP_CHECK(v == "full" || v == "sharded", f, " expects full or sharded, got '", v, "'");
       o.save_format = v;
     }},
    {"--shard",
     [](TrainOptions& o, std::string_view f, std::string_view v) {
       DDP_CHECK(v == "none" || v == "zero1" || v == "zero2" || v == "fsdp", f,
                 " expects none, zero1, zero2 or fsdp, got '", v, "'");
       o.shard = v;
     }},
};

}  // namespace

// `--flag value` or `--flag=value`, as argparse (and so every PyTorch script) takes them.
TrainOptions parse_options(int argc, const char* const* argv) {
  TrainOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      continue;
    }
    // Switches: no value.
    if (arg == "--sync-bn" || arg == "--find-unused-parameters" || arg == "--print-buckets" ||
        arg == "--print-memory") {
      (arg == "--sync-bn"         ? o.sync_bn
       : arg == "--print-buckets" ? o.print_buckets
       : arg == "--print-memory"  ? o.print_memory
                                  : o.find_unused_parameters) = true;
      continue;
    }
    if (arg == "--no-broadcast-buffers") {
      o.broadcast_buffers = false;
      continue;
    }
    DDP_CHECK(arg.starts_with("--"), "unexpected argument '", arg, "' (see --help)");
    const std::size_t equals = arg.find('=');
    const std::string_view name = arg.substr(0, equals);
    const Flag* flag = nullptr;
    for (const Flag& f : kFlags) {
      if (f.name == name) flag = &f;
    }
    DDP_CHECK(flag != nullptr, "unknown flag '", name, "' (see --help)");
    std::string_view value;
    if (equals != std::string_view::npos) {
      value = arg.substr(equals + 1);
    } else {
      DDP_CHECK(i + 1 < argc, name, " needs a value (see --help)");
      value = argv[++i];
    }
    flag->set(o, name, value);
  }
  const bool adamw = o.optimizer == "adamw";
  o.lr = o.lr_given.value_or(adamw ? 1e-3 : 0.1);
  o.weight_decay = o.weight_decay_given.value_or(adamw ? 1e-2 : 5e-4);
  // Checked here, so that a restarted job does not find out at its first checkpoint.
  DDP_CHECK(o.resume != "auto" || !o.save.empty() || o.help,
            "--resume auto needs --save PATH (the checkpoint it resumes from when it exists)");
  // Refused rather than quietly written in the full format: the user asked for shards.
  if (o.save_format == "sharded" && !o.help) {
    DDP_CHECK(!o.save.empty(), "--save-format sharded: there is no --save PATH to write");
    DDP_CHECK(o.shard != "none", "--save-format sharded needs --shard zero1, zero2 or fsdp: "
              "under --shard none every rank holds the whole state, there are no shards to "
              "write (use --save-format full, the default)");
  }
  // The sharded wrappers have neither the Reducer's options nor its unused parameters.
  if (o.shard == "zero2" || o.shard == "fsdp") {
    DDP_CHECK(o.grad_sync == "bucketed" && o.comm_hook == "all-reduce" &&
                  !o.find_unused_parameters,
              "--shard ", o.shard, " reduce-scatters its own buckets: --grad-sync, --comm-hook "
              "and --find-unused-parameters are DDP's (--shard none or zero1)");
  }
  return o;
}

std::int64_t per_rank_batch(const TrainOptions& o, int world_size) {
  const std::int64_t w = world_size, k = o.grad_accum;
  // --batch-size is a micro-batch: a rank's step takes K of them (PyTorch's convention,
  // where the loader's batch is what one backward sees).
  if (o.batch_size > 0) {
    DDP_CHECK(o.global_batch_size == 0 || o.global_batch_size == o.batch_size * k * w,
              "--batch-size ", o.batch_size, " (per rank)",
              k > 1 ? detail::concat(" x ", k, " micro-batches") : std::string(), " x ", w,
              " ranks = ", o.batch_size * k * w, ", but --global-batch-size is ",
              o.global_batch_size, "\nhint: give one of the two");
    return o.batch_size * k;
  }
  const std::int64_t global =
      o.global_batch_size > 0 ? o.global_batch_size : TrainOptions::kDefaultGlobalBatch;
  DDP_CHECK(global % (w * k) == 0, "a global batch of ", global,
            " images does not split evenly over ", w, " ranks",
            k > 1 ? detail::concat(" x ", k, " micro-batches") : std::string(),
            o.global_batch_size > 0 ? " (--global-batch-size)" : " (the default)",
            "\nhint: give --batch-size (images per rank and micro-batch) or a "
            "--global-batch-size divisible by ", w * k);
  return global / w;
}

std::string data_folder(const TrainOptions& o) {
  return o.data.empty() ? default_mnist_folder() : o.data;
}

std::string trace_file_for_rank(const std::string& path, int rank, int world_size) {
  if (world_size <= 1) return path;
  // The extension is what follows the last '.' of the file name (not of a folder's name).
  const std::size_t slash = path.find_last_of('/');
  const std::size_t dot = path.find_last_of('.');
  const bool has_extension =
      dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  const std::string stem = has_extension ? path.substr(0, dot) : path;
  const std::string extension = has_extension ? path.substr(dot) : "";
  return detail::concat(stem, ".rank", rank, extension);
}

}  // namespace ddp::train
