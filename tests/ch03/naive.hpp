// What the chapter 03 tests share: random inputs with the properties a finite-difference
// check needs (away from kinks, distinct maxima), a tolerant comparison, and naive
// reference loops in double for the forward passes of conv2d, batch_norm, the pools and
// log_softmax. The references read host copies of the values (to_vector) and use no
// library op, so an error in the im2col views or in a backward cannot hide in them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tensor/tensor.hpp"

namespace ddp::test {

// ---- Random inputs -------------------------------------------------------------------

// Uniform in [low, high); with min_abs > 0, values closer to 0 than min_abs are pushed
// out to +-min_abs (relu's kink, div's pole, log's domain stay away).
inline Tensor random_tensor(std::mt19937& rng, const Shape& shape, float low, float high,
                            float min_abs = 0.0f) {
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> v(static_cast<std::size_t>(numel(shape)));
  for (float& x : v) {
    x = dist(rng);
    if (std::abs(x) < min_abs) x = x < 0 ? -min_abs : min_abs;
  }
  return from_data(v, shape);
}

// Distinct values spaced `gap` apart, in random order, centred on 0: every pooling
// window has one clear maximum, farther than a finite-difference step from the next.
inline Tensor distinct_tensor(std::mt19937& rng, const Shape& shape, float gap = 0.02f) {
  const auto n = static_cast<std::size_t>(numel(shape));
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  std::shuffle(v.begin(), v.end(), rng);
  for (float& x : v) x = (x - static_cast<float>(n) / 2.0f) * gap;
  return from_data(v, shape);
}

inline Tensor labels_tensor(const std::vector<std::int64_t>& labels) {
  return from_data(labels, {static_cast<std::int64_t>(labels.size())});
}

inline std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  for (float v : t.to_vector<float>()) out.push_back(v);
  return out;
}

// ---- Comparison ----------------------------------------------------------------------

// "" when `got` has `shape` and |got - want| <= tol * (1 + |want|) everywhere; else the
// first bad element and how many there are. Use as CHECK(close(...) == "").
inline std::string close(const Tensor& got, const std::vector<double>& want, const Shape& shape,
                         double tol) {
  std::ostringstream os;
  if (got.shape() != shape) {
    os << "got shape " << shape_str(got.shape()) << ", want " << shape_str(shape);
    return os.str();
  }
  const std::vector<double> g = values(got);
  if (g.size() != want.size()) return "reference has the wrong number of elements";
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (!(std::abs(g[i] - want[i]) <= tol * (1.0 + std::abs(want[i])))) {
      if (bad++ == 0) first = i;
    }
  }
  if (bad == 0) return "";
  os << bad << " of " << g.size() << " elements differ; first at flat index " << first
     << ": got " << g[first] << ", want " << want[first];
  return os.str();
}

inline std::string close(const Tensor& got, const Tensor& want, double tol) {
  return close(got, values(want), want.shape(), tol);
}

// ---- Naive references, in double -----------------------------------------------------

// x: (B, C, H, W), w: (O, C, kh, kw), b: (O) or undefined -> (B, O, Ho, Wo), the
// textbook seven loops with the zero padding as a bounds test.
inline std::vector<double> conv2d(const Tensor& x, const Tensor& w, const Tensor& b,
                                  std::int64_t s, std::int64_t p) {
  const std::int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const std::int64_t O = w.size(0), kh = w.size(2), kw = w.size(3);
  const std::int64_t Ho = (H + 2 * p - kh) / s + 1, Wo = (W + 2 * p - kw) / s + 1;
  const std::vector<double> xv = values(x), wv = values(w);
  const std::vector<double> bv = b.defined() ? values(b) : std::vector<double>(O, 0.0);
  std::vector<double> out(static_cast<std::size_t>(B * O * Ho * Wo));
  for (std::int64_t n = 0; n < B; ++n)
    for (std::int64_t o = 0; o < O; ++o)
      for (std::int64_t ho = 0; ho < Ho; ++ho)
        for (std::int64_t wo = 0; wo < Wo; ++wo) {
          double acc = bv[o];
          for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t i = 0; i < kh; ++i)
              for (std::int64_t j = 0; j < kw; ++j) {
                const std::int64_t h = ho * s + i - p, ww = wo * s + j - p;
                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                acc += xv[((n * C + c) * H + h) * W + ww] * wv[((o * C + c) * kh + i) * kw + j];
              }
          out[((n * O + o) * Ho + ho) * Wo + wo] = acc;
        }
  return out;
}

// Per-channel mean and biased variance of x: (B, C, H, W).
struct ChannelStats {
  std::vector<double> mean, var;
};
inline ChannelStats channel_stats(const Tensor& x) {
  const std::int64_t B = x.size(0), C = x.size(1), L = x.size(2) * x.size(3);
  const std::vector<double> xv = values(x);
  ChannelStats st{std::vector<double>(C, 0.0), std::vector<double>(C, 0.0)};
  for (std::int64_t c = 0; c < C; ++c) {
    for (std::int64_t n = 0; n < B; ++n)
      for (std::int64_t l = 0; l < L; ++l) st.mean[c] += xv[(n * C + c) * L + l];
    st.mean[c] /= static_cast<double>(B * L);
    for (std::int64_t n = 0; n < B; ++n)
      for (std::int64_t l = 0; l < L; ++l) {
        const double d = xv[(n * C + c) * L + l] - st.mean[c];
        st.var[c] += d * d;
      }
    st.var[c] /= static_cast<double>(B * L);
  }
  return st;
}

// y = (x - mean[c]) / sqrt(var[c] + eps) * w[c] + b[c].
inline std::vector<double> batch_norm(const Tensor& x, const std::vector<double>& mean,
                                      const std::vector<double>& var, const Tensor& w,
                                      const Tensor& b, double eps) {
  const std::int64_t B = x.size(0), C = x.size(1), L = x.size(2) * x.size(3);
  const std::vector<double> xv = values(x);
  const std::vector<double> wv = w.defined() ? values(w) : std::vector<double>(C, 1.0);
  const std::vector<double> bv = b.defined() ? values(b) : std::vector<double>(C, 0.0);
  std::vector<double> out(xv.size());
  for (std::int64_t n = 0; n < B; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t l = 0; l < L; ++l) {
        const std::size_t k = static_cast<std::size_t>((n * C + c) * L + l);
        out[k] = (xv[k] - mean[c]) / std::sqrt(var[c] + eps) * wv[c] + bv[c];
      }
  return out;
}

// x: (B, C, H, W) -> (B, C, Ho, Wo), the maximum of each k x k window.
inline std::vector<double> max_pool2d(const Tensor& x, std::int64_t k, std::int64_t s) {
  const std::int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const std::int64_t Ho = (H - k) / s + 1, Wo = (W - k) / s + 1;
  const std::vector<double> xv = values(x);
  std::vector<double> out;
  for (std::int64_t n = 0; n < B * C; ++n)
    for (std::int64_t ho = 0; ho < Ho; ++ho)
      for (std::int64_t wo = 0; wo < Wo; ++wo) {
        double best = -INFINITY;
        for (std::int64_t i = 0; i < k; ++i)
          for (std::int64_t j = 0; j < k; ++j)
            best = std::max(best, xv[(n * H + ho * s + i) * W + wo * s + j]);
        out.push_back(best);
      }
  return out;
}

// x: (B, C, H, W) -> (B, C), the mean of each channel's image.
inline std::vector<double> global_avg_pool2d(const Tensor& x) {
  const std::int64_t BC = x.size(0) * x.size(1), L = x.size(2) * x.size(3);
  const std::vector<double> xv = values(x);
  std::vector<double> out(static_cast<std::size_t>(BC), 0.0);
  for (std::int64_t n = 0; n < BC; ++n) {
    for (std::int64_t l = 0; l < L; ++l) out[n] += xv[n * L + l];
    out[n] /= static_cast<double>(L);
  }
  return out;
}

// logits: (B, K) -> (B, K), z - log(sum(exp(z))) with the row maximum taken out first.
inline std::vector<double> log_softmax(const Tensor& logits) {
  const std::int64_t B = logits.size(0), K = logits.size(1);
  const std::vector<double> z = values(logits);
  std::vector<double> out(z.size());
  for (std::int64_t b = 0; b < B; ++b) {
    const double m = *std::max_element(z.begin() + b * K, z.begin() + (b + 1) * K);
    double total = 0.0;
    for (std::int64_t k = 0; k < K; ++k) total += std::exp(z[b * K + k] - m);
    for (std::int64_t k = 0; k < K; ++k) out[b * K + k] = z[b * K + k] - m - std::log(total);
  }
  return out;
}

// The mean over the batch of -log_softmax(logits)[b, labels[b]].
inline double cross_entropy(const Tensor& logits, const std::vector<std::int64_t>& labels) {
  const std::int64_t K = logits.size(1);
  const std::vector<double> lp = log_softmax(logits);
  double total = 0.0;
  for (std::size_t b = 0; b < labels.size(); ++b) total -= lp[b * K + labels[b]];
  return total / static_cast<double>(labels.size());
}

}  // namespace ddp::test
