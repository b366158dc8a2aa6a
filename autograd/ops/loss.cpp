// Classification losses on Variables: log_softmax, nll_loss and cross_entropy, forward
// and backward side by side. Chapter 03.
//
// logits (B, K) are scores for K classes; labels are int64 (B) class indices. Labels
// are checked on the host (one small copy from the GPU) so that a bad label stops with
// its value and position instead of reading outside the row. Not here: class weights,
// ignore_index, label smoothing, reductions other than the batch mean.
#include <limits>

#include "autograd/function.hpp"
#include "autograd/functions.hpp"
#include "tensor/ops.hpp"

namespace ddp {

namespace {

// ---- Checks and one-hot labels -------------------------------------------------------

void check_logits(const char* op, const Tensor& logits) {
  DDP_CHECK(logits.dim() == 2 && logits.size(0) > 0 && logits.size(1) > 0, op,
            ": expected (B, K) scores with B, K >= 1, got ", logits.describe());
}

void check_labels(const char* op, const Tensor& labels, const Tensor& logits) {
  const std::int64_t batch = logits.size(0), classes = logits.size(1);
  DDP_CHECK(labels.defined() && labels.dtype() == DType::Int64 && labels.dim() == 1 &&
                labels.size(0) == batch,
            op, ": labels must be int64 ", shape_str({batch}), " to match scores ",
            logits.describe(), ", got ", labels.describe());
  DDP_CHECK(labels.device() == logits.device(), op, ": labels ", labels.describe(),
            " and scores ", logits.describe(), " are on different devices");
  const std::vector<std::int64_t> values = labels.to_vector<std::int64_t>();
  for (std::size_t b = 0; b < values.size(); ++b) {
    DDP_CHECK(values[b] >= 0 && values[b] < classes, op, ": label ", values[b],
              " at position ", b, " is outside [0, ", classes, ") for scores ",
              logits.describe(), "\nhint: labels are class indices 0..K-1");
  }
}

// labels: int64 (B) -> float32 (B, K) with a 1 at (b, labels[b]). Built by comparing the
// labels as a column with 0..K-1 as a row: broadcasting does the rest.
Tensor one_hot(const Tensor& labels, std::int64_t classes) {
  const Tensor ids = arange(classes, {DType::Int64, labels.device()});
  return ddp::eq(labels.unsqueeze(1), ids.unsqueeze(0));
}

// logits: (B, K) -> (B, K). log softmax(z)_k = z_k - log sum_j exp(z_j); subtracting the
// row's maximum first changes nothing mathematically but keeps exp() from overflowing.
Tensor log_softmax_rows(const Tensor& logits) {
  const Tensor shifted = ddp::sub(logits, ddp::max(logits, 1, true));
  return ddp::sub(shifted, ddp::log(ddp::sum(ddp::exp(shifted), 1, true)));
}

// -mean over the batch of log_probs[b, label_b]: (B, K), (B, K) -> (). The entries not
// picked are multiplied by 0, and -inf * 0 is NaN: a masked-out logit (-inf, common for
// padding) or an overflowing one would make the loss NaN. So -inf is first raised to the
// lowest float. (Only a picked class of probability exactly 0 notices: its loss is
// FLT_MAX / B, where PyTorch says inf.)
Tensor mean_picked(const Tensor& log_probs, const Tensor& onehot) {
  const double batch = static_cast<double>(onehot.size(0));
  const Tensor finite = ddp::maximum(log_probs, std::numeric_limits<float>::lowest());
  return ddp::mul(ddp::sum(ddp::mul(finite, onehot)), -1.0 / batch);
}

// ---- log_softmax: dx = g - softmax * sum_k g_k (per row) -----------------------------
struct LogSoftmaxBackward final : Node {
  Tensor out;  // the log probabilities: exp(out) is the softmax
  std::vector<Tensor> backward(const Tensor& g) override {
    return {ddp::sub(g, ddp::mul(ddp::exp(out), ddp::sum(g, 1, true)))};
  }
  const char* name() const override { return "LogSoftmaxBackward"; }
  void release_saved() override { out = Tensor(); }
};

// ---- nll_loss: the loss picks one entry per row, so only that entry gets -g / B ---------
struct NllLossBackward final : Node {
  Tensor onehot;  // (B, K)
  std::vector<Tensor> backward(const Tensor& g) override {  // g: ()
    const double scale = -1.0 / static_cast<double>(onehot.size(0));
    return {ddp::mul(ddp::mul(onehot, g), scale)};
  }
  const char* name() const override { return "NllLossBackward"; }
  void release_saved() override { onehot = Tensor(); }
};

// ---- cross_entropy: both backward passes above, fused --------------------------------
// Chaining them gives g * (softmax - onehot) / B: the row sum of nll's gradient is -g/B
// exactly (one entry per row), so log_softmax's correction term becomes + softmax g / B.
// One (B, K) expression instead of two backward nodes, and no (B, K) gradient that is
// almost all zeros in between.
struct CrossEntropyBackward final : Node {
  Tensor log_probs, onehot;  // (B, K) each
  std::vector<Tensor> backward(const Tensor& g) override {  // g: ()
    const double inv_batch = 1.0 / static_cast<double>(onehot.size(0));
    Tensor grad = ddp::sub(ddp::exp(log_probs), onehot);
    grad.mul_(ddp::mul(g, inv_batch));
    return {grad};
  }
  const char* name() const override { return "CrossEntropyBackward"; }
  void release_saved() override { log_probs = onehot = Tensor(); }
};

}  // namespace

// logits: (B, K) -> (B, K).
Variable log_softmax(const Variable& logits) {
  check_logits("log_softmax", logits.data());
  Tensor out = log_softmax_rows(logits.data());
  return make_result(out, {logits}, [&] {
    auto node = std::make_shared<LogSoftmaxBackward>();
    node->out = out;
    return node;
  });
}

// log_probs: (B, K), labels: int64 (B) -> ().
Variable nll_loss(const Variable& log_probs, const Tensor& labels) {
  check_logits("nll_loss", log_probs.data());
  check_labels("nll_loss", labels, log_probs.data());
  Tensor onehot = one_hot(labels, log_probs.size(1));
  return make_result(mean_picked(log_probs.data(), onehot), {log_probs}, [&] {
    auto node = std::make_shared<NllLossBackward>();
    node->onehot = onehot;
    return node;
  });
}

// logits: (B, K), labels: int64 (B) -> ().
Variable cross_entropy(const Variable& logits, const Tensor& labels) {
  check_logits("cross_entropy", logits.data());
  check_labels("cross_entropy", labels, logits.data());
  Tensor onehot = one_hot(labels, logits.size(1));
  Tensor log_probs = log_softmax_rows(logits.data());
  return make_result(mean_picked(log_probs, onehot), {logits}, [&] {
    auto node = std::make_shared<CrossEntropyBackward>();
    node->log_probs = log_probs;
    node->onehot = onehot;
    return node;
  });
}

}  // namespace ddp
