// Command-line parsing for ddp-train (see options.hpp).
#include "tools/ddp_train/options.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "tensor/device.hpp"
#include "tensor/error.hpp"

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
  --batch-size N        images per step (default 128)
  --lr X                SGD learning rate (default 0.1)
  --momentum X          SGD momentum (default 0.9)
  --weight-decay X      L2 penalty added to the gradient (default 5e-4)
  --seed N              initial weights and shuffling (default 0)
  --device D            cpu, cuda, cuda:N or auto (default auto: a GPU when present)
  --threads N           CPU threads (default: OpenMP's, i.e. OMP_NUM_THREADS or all cores)
  --metrics FILE.csv    write one row of metrics per epoch
  --save PATH           write a checkpoint (model + optimizer + progress) after every epoch
  --resume PATH         continue from a checkpoint written by --save
  --help                this text
)";
}

TrainOptions parse_options(int argc, const char* const* argv) {
  TrainOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      o.help = true;
      continue;
    }
    DDP_CHECK(flag.starts_with("--"), "unexpected argument '", flag, "' (see --help)");
    DDP_CHECK(i + 1 < argc, flag, " needs a value (see --help)");
    const std::string_view value = argv[++i];
    if (flag == "--data") {
      o.data = value;
    } else if (flag == "--epochs") {
      o.epochs = parse_number<std::int64_t>(flag, value, 1);
    } else if (flag == "--max-steps") {
      o.max_steps = parse_number<std::int64_t>(flag, value, 0);
    } else if (flag == "--batch-size") {
      o.batch_size = parse_number<std::int64_t>(flag, value, 1);
    } else if (flag == "--lr") {
      o.lr = parse_double(flag, value, 0.0);
    } else if (flag == "--momentum") {
      o.momentum = parse_double(flag, value, 0.0);
    } else if (flag == "--weight-decay") {
      o.weight_decay = parse_double(flag, value, 0.0);
    } else if (flag == "--seed") {
      o.seed = parse_number<std::uint64_t>(flag, value, 0);
    } else if (flag == "--device") {
      // Parsed here, so that a typo is a flag error (exit 2), not a failure at start-up.
      // Whether cuda:N exists is known only later (resolve_device).
      try {
        if (value != "auto") static_cast<void>(Device::parse(value));
      } catch (const Error&) {
        DDP_FAIL(flag, " expects cpu, cuda, cuda:N or auto, got '", value, "'");
      }
      o.device = value;
    } else if (flag == "--threads") {
      o.threads = parse_number<int>(flag, value, 1);
    } else if (flag == "--metrics") {
      o.metrics = value;
    } else if (flag == "--save") {
      o.save = value;
    } else if (flag == "--resume") {
      o.resume = value;
    } else {
      DDP_FAIL("unknown flag '", flag, "' (see --help)");
    }
  }
  return o;
}

}  // namespace ddp::train
