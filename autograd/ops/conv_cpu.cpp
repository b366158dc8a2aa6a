// conv2d on the CPU, one image at a time, the images shared out among the threads.
// Chapter 03. The same convolution as conv.cpp (Note [im2col with views]), rearranged
// so that its working set stays in the caches; conv2d() picks it for float32 tensors in
// host memory (Note [Fused CPU paths], conv.cpp). 3x3 stride-1 padding-1 layers go to
// Winograd's F(2x2, 3x3) instead (conv_winograd_cpu.cpp). Not here: GPU tensors, other
// dtypes.
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>

#include "autograd/function.hpp"
#include "autograd/fused_cpu.hpp"
#include "autograd/ops/conv_shape.hpp"
#include "autograd/ops/conv_winograd_cpu.hpp"
#include "tensor/ops.hpp"
#include "tensor/threads.hpp"

namespace ddp {

namespace {

using detail::ConvShape;
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Mat = Eigen::Map<RowMajor>;
using ConstMat = Eigen::Map<const RowMajor>;

// Note [Convolution one image at a time]
// conv.cpp builds the patch matrix of the whole batch, cols (C*kh*kw, B*Ho*Wo): 57 MB
// for a 16 -> 16 channel 3x3 convolution of 128 MNIST images. It is written once, read
// by the GEMM, kept for the backward, all far outside the caches; and the GEMM's result
// (O, B, Ho, Wo) needs one more pass to become (B, O, Ho, Wo). The same algebra holds
// for each image b alone, with L = Ho*Wo columns instead of B*L:
//     y[b]    (O, L)  = W (O, K) @ cols_b (K, L)          -- already y's layout
//     dW      (O, K) += dy[b] (O, L) @ cols_b^T (L, K)
//     dcols_b (K, L)  = W^T (K, O) @ dy[b] (O, L),  then col2im -> dx[b]
// Each thread takes a share of the images and calls Eigen's GEMM, which sees it is
// inside a parallel region and stays single-threaded. A thread's cols_b buffer is cut
// to a band of output rows small enough for L2 (kBandFloats below), so im2col writes it
// and the GEMM reads it without a trip to L3. The backward rebuilds cols_b from the
// saved input instead of keeping B of them alive. Each image's dW goes into one of a
// fixed number of (O, K) buffers, summed in a fixed order (Note [Work shared out on
// demand]). im2col and col2im are plain loops that skip the padding border instead of
// copying the input into a padded buffer.
// Fewer multiplications win more than a faster GEMM here (one core of the dev box runs
// Eigen's at the ~55-60 GFLOP/s it sustains in cache): the 3x3 stride-1 padding-1 layers
// with 8 or more channels in and out and 100 or more pixels go to Winograd's F(2x2, 3x3),
// forward and backward (conv_winograd_cpu.cpp, forward_winograd and backward_winograd
// below). The stem, the stride-2 layers, the 1x1 shortcuts and block3.conv2 (7x7 images)
// stay here. What each step bought, and what was tried and dropped: bench/README.md,
// "Chapter 03: the fused CPU paths".

// Output columns wo in [lo, hi) read input column wo*s + offset inside [0, n_in).
struct Span {
  std::int64_t lo = 0, hi = 0;
};

Span inside(std::int64_t n_out, std::int64_t n_in, std::int64_t offset, std::int64_t s) {
  Span span;
  span.lo = offset >= 0 ? 0 : (-offset + s - 1) / s;                  // ceil(-offset / s)
  span.hi = n_in - 1 - offset < 0 ? 0 : (n_in - 1 - offset) / s + 1;  // floor(...) + 1
  span.hi = std::min(span.hi, n_out);
  span.lo = std::min(span.lo, span.hi);
  return span;
}

// A band of output rows [ho0, ho1) of one image. Its patch matrix has n = (ho1 - ho0)*Wo
// columns; bands keep that matrix within kBandFloats, about half of a core's L2 cache
// (512 KB here), so that im2col writes it and the GEMM reads it without going to L3.
// Of ResNet-MNIST's layers that still take this path (the stem, the stride-2 and 1x1
// layers, block3.conv2) each image fits in one band; bands serve larger images.
constexpr std::int64_t kBandFloats = 1 << 16;

struct Band {
  std::int64_t ho0 = 0, ho1 = 0;
};

std::int64_t rows_per_band(const ConvShape& s) {
  return std::clamp<std::int64_t>(kBandFloats / (s.K() * s.Wo), 1, s.Ho);
}

// Note [Patch rows as one shifted copy]
// With stride 1 and Wo == W (a 3x3 kernel with padding 1: "same" convolution), the band's
// output rows of one patch row (c, i, j) read consecutive rows of the plane x[c], all
// shifted by j - p columns. So ONE long copy of the plane, shifted, fills them all --
// except the columns where the window hangs over the left or right border (wo < lo or
// wo >= hi), which that copy fills from the neighbouring row and which are then set to
// zero. col2im does the reverse: zero those entries of dcols (they read padding), then
// one long shifted add. The copy starts at column lo of the first row and ends before
// column hi of the last, so it never reads outside the plane. This replaces Ho copies of
// 28, 14 or 7 floats by one of a few hundred, which is what makes im2col cheap here.
//
// Note [Strided convolution on phase planes]
// A stride-s convolution reads x[c, ho*s - p + i, wo*s - p + j]. Split each plane x[c]
// into s*s phase planes by the remainders of row and column: phase (a, b) holds
// x[c, h*s + a, w*s + b], of Hq x Wq = ceil(H/s) x ceil(W/s) (zeros past the image).
// Writing i - p = di*s + a and j - p = dj*s + b (floor division), tap (i, j) reads
// phase (a, b) at [ho + di, wo + dj]: a stride-1 tap. So one pass that sorts x into its
// phase planes turns the strided gather -- one float at a time, the slowest part of the
// stride-2 layers -- into the shifted copies above, and col2im into shifted adds plus
// one pass back. It needs Wo == Wq (true for ResNet's 3x3/pad 1 layers with stride 2 on
// even sizes); stride 1 is the case s = 1, where the phase plane is x[c] itself. Other
// shapes take the plain loops (what it bought: bench/README.md, "Chapter 03: the fused CPU
// paths").

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// Also kh, kw >= s: a 1x1 stride-2 kernel reads one phase in four, and sorting all four
// costs more than the plain loops it saves.
bool on_phase_planes(const ConvShape& s) {
  return s.Wo == ceil_div(s.W, s.stride) && s.kh >= s.stride && s.kw >= s.stride;
}

// Floats of one image in phase planes (C, s, s, Hq, Wq).
std::int64_t phase_floats(const ConvShape& s) {
  return s.C * s.stride * s.stride * ceil_div(s.H, s.stride) * ceil_div(s.W, s.stride);
}

// x: one image (C, H, W) -> planes (C, s, s, Hq, Wq).
void to_phase_planes(const float* x, const ConvShape& s, float* planes) {
  const std::int64_t st = s.stride, Hq = ceil_div(s.H, st), Wq = ceil_div(s.W, st);
  for (std::int64_t c = 0; c < s.C; ++c) {
    for (std::int64_t a = 0; a < st; ++a) {
      for (std::int64_t b = 0; b < st; ++b) {
        float* out = planes + ((c * st + a) * st + b) * Hq * Wq;
        for (std::int64_t h = 0; h < Hq; ++h) {
          const std::int64_t row = h * st + a;
          const std::int64_t w_end = row < s.H ? (s.W - b + st - 1) / st : 0;  // columns inside
          const float* in = x + (c * s.H + row) * s.W + b;
          for (std::int64_t w = 0; w < w_end; ++w) out[h * Wq + w] = in[w * st];
          std::fill(out + h * Wq + w_end, out + (h + 1) * Wq, 0.0f);
        }
      }
    }
  }
}

// planes (C, s, s, Hq, Wq) -> dx: one image (C, H, W), every pixel overwritten.
void from_phase_planes(const float* planes, const ConvShape& s, float* dx) {
  const std::int64_t st = s.stride, Hq = ceil_div(s.H, st), Wq = ceil_div(s.W, st);
  for (std::int64_t c = 0; c < s.C; ++c) {
    for (std::int64_t a = 0; a < st; ++a) {
      for (std::int64_t b = 0; b < st; ++b) {
        const float* in = planes + ((c * st + a) * st + b) * Hq * Wq;
        for (std::int64_t h = 0; h * st + a < s.H; ++h) {
          float* out = dx + (c * s.H + h * st + a) * s.W + b;
          for (std::int64_t w = 0; w * st + b < s.W; ++w) out[w * st] = in[h * Wq + w];
        }
      }
    }
  }
}

// Kernel row i (or column j) as a tap on the phase planes: it reads phase row a at plane
// row ho + d (i - p = d*s + a, floor division).
struct Phase {
  std::int64_t a = 0, d = 0;
};

Phase phase_of(const ConvShape& s, std::int64_t i) {
  const std::int64_t d = floor_div(i - s.padding, s.stride);
  return {i - s.padding - d * s.stride, d};
}

// The band's output rows that read a row of the plane (Hq rows) at shift d.
Band rows_on_plane(const ConvShape& s, Band band, std::int64_t d) {
  const Span rows = inside(s.Ho, ceil_div(s.H, s.stride), d, 1);
  Band in{std::clamp(rows.lo, band.ho0, band.ho1), std::clamp(rows.hi, band.ho0, band.ho1)};
  in.ho1 = std::max(in.ho0, in.ho1);
  return in;
}

// The band's output rows whose input row h = ho*s - p + i lies inside the image; the
// others read only padding.
Band rows_inside(const ConvShape& s, Band band, std::int64_t i) {
  const Span rows = inside(s.Ho, s.H, i - s.padding, s.stride);
  Band in{std::clamp(rows.lo, band.ho0, band.ho1), std::clamp(rows.hi, band.ho0, band.ho1)};
  in.ho1 = std::max(in.ho0, in.ho1);
  return in;
}

// rows: `count` floats seen as rows of `width`; zeroes the columns outside [lo, hi). The
// loops run down the columns: a loop along a row would become a memset call per row.
void zero_border_columns(float* rows, std::int64_t count, std::int64_t width, Span span) {
  for (std::int64_t wo = 0; wo < span.lo; ++wo) {
    for (std::int64_t r = wo; r < count; r += width) rows[r] = 0.0f;
  }
  for (std::int64_t wo = span.hi; wo < width; ++wo) {
    for (std::int64_t r = wo; r < count; r += width) rows[r] = 0.0f;
  }
}

// planes: one image in phase planes (the image itself for stride 1) -> cols: (C*kh*kw, n)
// for the band's n output pixels. Note [Strided convolution on phase planes].
void im2col_band_planes(const float* planes, const ConvShape& s, Band band, float* cols) {
  const std::int64_t n = (band.ho1 - band.ho0) * s.Wo, st = s.stride;
  const std::int64_t plane_floats = ceil_div(s.H, st) * s.Wo;
  for (std::int64_t c = 0; c < s.C; ++c) {
    for (std::int64_t i = 0; i < s.kh; ++i) {
      const Phase row = phase_of(s, i);
      const Band in = rows_on_plane(s, band, row.d);
      const std::int64_t count = (in.ho1 - in.ho0) * s.Wo;
      for (std::int64_t j = 0; j < s.kw; ++j) {
        const Phase col = phase_of(s, j);
        float* out_rows = cols + ((c * s.kh + i) * s.kw + j) * n;
        float* out = out_rows + (in.ho0 - band.ho0) * s.Wo;
        std::fill(out_rows, out, 0.0f);              // rows above the plane
        std::fill(out + count, out_rows + n, 0.0f);  // rows below it
        if (count == 0) continue;
        // Note [Patch rows as one shifted copy]
        const Span span = inside(s.Wo, s.Wo, col.d, 1);
        if (span.lo >= span.hi) {  // the tap shifts every column into the padding
          std::fill(out, out + count, 0.0f);  // (a shifted copy would read past the plane)
          continue;
        }
        const float* src = planes + ((c * st + row.a) * st + col.a) * plane_floats +
                           (in.ho0 + row.d) * s.Wo + col.d;
        for (std::int64_t t = span.lo; t < count - (s.Wo - span.hi); ++t) out[t] = src[t];
        zero_border_columns(out, count, s.Wo, span);
      }
    }
  }
}

// dcols: (C*kh*kw, n) for the band -> dplanes: ADDS what each patch entry read back onto
// it (im2col_band_planes run backwards). Overwrites the entries of dcols that read
// padding with zeros.
void col2im_band_planes(float* dcols, const ConvShape& s, Band band, float* dplanes) {
  const std::int64_t n = (band.ho1 - band.ho0) * s.Wo, st = s.stride;
  const std::int64_t plane_floats = ceil_div(s.H, st) * s.Wo;
  for (std::int64_t c = 0; c < s.C; ++c) {
    for (std::int64_t i = 0; i < s.kh; ++i) {
      const Phase row = phase_of(s, i);
      const Band in = rows_on_plane(s, band, row.d);
      const std::int64_t count = (in.ho1 - in.ho0) * s.Wo;
      if (count == 0) continue;
      for (std::int64_t j = 0; j < s.kw; ++j) {
        const Phase col = phase_of(s, j);
        const Span span = inside(s.Wo, s.Wo, col.d, 1);
        float* grad = dcols + ((c * s.kh + i) * s.kw + j) * n + (in.ho0 - band.ho0) * s.Wo;
        float* dst = dplanes + ((c * st + row.a) * st + col.a) * plane_floats +
                     (in.ho0 + row.d) * s.Wo + col.d;
        zero_border_columns(grad, count, s.Wo, span);
        // A tap that shifts every column into the padding adds nothing (and a shifted add
        // would write past the plane, into another image's or thread's floats).
        if (span.lo >= span.hi) continue;
        for (std::int64_t t = span.lo; t < count - (s.Wo - span.hi); ++t) dst[t] += grad[t];
      }
    }
  }
}

// x: one image (C, H, W), contiguous -> cols: (C*kh*kw, n) for the band's n output
// pixels, zeros where a patch hangs over the padding. Row (c, i, j), column
// (ho - ho0, wo) is x[c, ho*s - p + i, wo*s - p + j]. For the shapes that do not fit
// on phase planes: one loop per output row.
void im2col_band(const float* x, const ConvShape& s, Band band, float* cols) {
  const std::int64_t n = (band.ho1 - band.ho0) * s.Wo;
  for (std::int64_t c = 0; c < s.C; ++c) {
    for (std::int64_t i = 0; i < s.kh; ++i) {
      const Band in = rows_inside(s, band, i);
      const std::int64_t count = (in.ho1 - in.ho0) * s.Wo;
      // Input row of output row in.ho0, shifted so that [wo * stride] reads column wo.
      const float* src = x + (c * s.H + in.ho0 * s.stride - s.padding + i) * s.W - s.padding;
      for (std::int64_t j = 0; j < s.kw; ++j, ++src) {
        float* row = cols + ((c * s.kh + i) * s.kw + j) * n;
        float* out = row + (in.ho0 - band.ho0) * s.Wo;
        std::fill(row, out, 0.0f);              // rows above the image
        std::fill(out + count, row + n, 0.0f);  // rows below it
        const Span span = inside(s.Wo, s.W, j - s.padding, s.stride);
        for (std::int64_t r = 0; r < in.ho1 - in.ho0; ++r) {
          const float* in_row = src + r * s.stride * s.W;
          float* out_row = out + r * s.Wo;
          std::fill(out_row, out_row + span.lo, 0.0f);
          for (std::int64_t wo = span.lo; wo < span.hi; ++wo) out_row[wo] = in_row[wo * s.stride];
          std::fill(out_row + span.hi, out_row + s.Wo, 0.0f);
        }
      }
    }
  }
}

// dcols: (C*kh*kw, n) for the band -> dx: one image (C, H, W): every input pixel gets
// the patch entries that read it ADDED (im2col_band's loops, run backwards).
void col2im_band(const float* dcols, const ConvShape& s, Band band, float* dx) {
  const std::int64_t n = (band.ho1 - band.ho0) * s.Wo;
  for (std::int64_t c = 0; c < s.C; ++c) {
    for (std::int64_t i = 0; i < s.kh; ++i) {
      const Band in = rows_inside(s, band, i);
      if (in.ho1 == in.ho0) continue;
      float* dst = dx + (c * s.H + in.ho0 * s.stride - s.padding + i) * s.W - s.padding;
      for (std::int64_t j = 0; j < s.kw; ++j, ++dst) {
        const float* grad = dcols + ((c * s.kh + i) * s.kw + j) * n + (in.ho0 - band.ho0) * s.Wo;
        const Span span = inside(s.Wo, s.W, j - s.padding, s.stride);
        for (std::int64_t r = 0; r < in.ho1 - in.ho0; ++r) {
          float* dst_row = dst + r * s.stride * s.W;
          const float* grad_row = grad + r * s.Wo;
          for (std::int64_t wo = span.lo; wo < span.hi; ++wo) {
            dst_row[wo * s.stride] += grad_row[wo];
          }
        }
      }
    }
  }
}

// One image's input as im2col reads it: its phase planes when the shape allows (written
// to `scratch` for stride > 1; x itself for stride 1), else x.
const float* planes_of(const float* x, const ConvShape& s, float* scratch) {
  if (s.stride == 1 || !on_phase_planes(s)) return x;
  to_phase_planes(x, s, scratch);
  return scratch;
}

// planes: planes_of(x) -> cols (C*kh*kw, n) for the band, by the path the shape allows.
void im2col_any(const float* planes, const ConvShape& s, Band band, float* cols) {
  if (on_phase_planes(s)) {
    im2col_band_planes(planes, s, band, cols);
  } else {
    im2col_band(planes, s, band, cols);
  }
}

// dcols (C*kh*kw, n) -> ADDED onto dplanes: the phase planes (stride > 1), dx (otherwise).
void col2im_any(float* dcols, const ConvShape& s, Band band, float* dplanes) {
  if (on_phase_planes(s)) {
    col2im_band_planes(dcols, s, band, dplanes);
  } else {
    col2im_band(dcols, s, band, dplanes);
  }
}

// Note [Work shared out on demand]
// The loops over images hand out work as threads ask for it (schedule(dynamic)), not
// in fixed halves: on a shared machine one thread may lose its core for a while, and
// the other then takes over its images instead of waiting for it at the end. The
// weight gradient is a sum over images; were each thread to sum its own images, the
// rounding would depend on which thread got which image. So the images are cut into
// kDwChunks fixed chunks, each chunk's dW summed into its own buffer, and the buffers
// added in chunk order: dW is the same bit for bit, whatever the timing and the number
// of threads. The chunk count also caps the backward's threads: 32 lets a cluster
// node's cores work on one rank's batch, for ~1 % more time on the 2-core dev box (32
// buffers of every layer's dW to zero and add up: ~10 MB a step instead of ~2.5).
constexpr std::int64_t kDwChunks = 32;

// dw_chunks: (chunks, O*C*kh*kw), one dW per chunk -> their sum (O, C, kh, kw), added in
// chunk order (Note [Work shared out on demand]).
Tensor sum_dw_chunks(const Tensor& dw_chunks, const ConvShape& s) {
  const std::int64_t rows = s.O, cols = s.C * s.kh * s.kw;
  Tensor gw = zeros({s.O, s.C, s.kh, s.kw});
  Mat sum(gw.data<float>(), rows, cols);
  for (std::int64_t chunk = 0; chunk < dw_chunks.size(0); ++chunk) {
    sum += ConstMat(dw_chunks.data<float>() + chunk * rows * cols, rows, cols);
  }
  return gw;
}

// The columns of a band in a row-major (rows, L) matrix of one image (y[b] or dy[b]).
using BandMat = Eigen::Map<RowMajor, 0, Eigen::OuterStride<>>;
using ConstBandMat = Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>>;

// ==== Backward =========================================================================

// g: (B, O, Ho, Wo), x: (B, C, H, W), weight: (O, C, kh, kw), all contiguous (x read only
// when want_w, weight only when want_x) -> gx (B, C, H, W) when want_x, gw (O, C, kh, kw)
// when want_w: band by band, patch matrix and GEMMs (Note [Convolution one image at a
// time]).
void backward_patches(const ConvShape& s, const Tensor& g, const Tensor& x, const Tensor& weight,
                      bool want_x, bool want_w, Tensor& gx, Tensor& gw) {
  const std::int64_t K = s.K(), L = s.L(), O = s.O, image = s.C * s.H * s.W;
  const std::int64_t rows = rows_per_band(s), n_max = rows * s.Wo;
  // Note [Strided convolution on phase planes]: x's and dx's planes, per image.
  const bool strided_planes = s.stride > 1 && on_phase_planes(s);
  const std::int64_t phases = strided_planes ? phase_floats(s) : 0;
  const std::int64_t per_thread = 2 * K * n_max + 2 * phases;
  const std::int64_t chunks = std::min(kDwChunks, s.B);
  const int threads = threads_for(chunks);
  if (want_x) gx = empty({s.B, s.C, s.H, s.W});
  // Per thread: cols (K, n) for dW, dcols (K, n) for dx and the two images' phase
  // planes. Per chunk: dW (O, K).
  Tensor work = empty({threads, per_thread});
  Tensor dw_chunks = zeros({chunks, O * K});
  float* pw = work.data<float>();
  float* pdw = dw_chunks.data<float>();
  const float* pg = g.data<float>();
  const float* px = want_w ? x.data<float>() : nullptr;
  const float* pweight = want_x ? weight.data<float>() : nullptr;
  float* pgx = want_x ? gx.data<float>() : nullptr;
  const SerialEigen serial;  // Note [Eigen inside our loops]
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    float* cols = pw + omp_get_thread_num() * per_thread;
    float* dcols = cols + K * n_max;
    float* x_planes = dcols + K * n_max;
    float* dx_planes = x_planes + phases;
    Mat dw(pdw + chunk * O * K, O, K);
    for (std::int64_t b = chunk * s.B / chunks; b < (chunk + 1) * s.B / chunks; ++b) {
      const float* planes = want_w ? planes_of(px + b * image, s, x_planes) : nullptr;
      float* dplanes = !want_x ? nullptr : strided_planes ? dx_planes : pgx + b * image;
      if (want_x) std::fill(dplanes, dplanes + (strided_planes ? phases : image), 0.0f);
      for (Band band{0, 0}; band.ho1 < s.Ho; band.ho0 = band.ho1) {
        band.ho1 = std::min(band.ho0 + rows, s.Ho);
        const std::int64_t n = (band.ho1 - band.ho0) * s.Wo;
        const ConstBandMat dy(pg + b * O * L + band.ho0 * s.Wo, O, n, Eigen::OuterStride<>(L));
        if (want_w) {
          im2col_any(planes, s, band, cols);
          dw.noalias() += dy * ConstMat(cols, K, n).transpose();
        }
        if (want_x) {
          Mat(dcols, K, n).noalias() = ConstMat(pweight, O, K).transpose() * dy;
          col2im_any(dcols, s, band, dplanes);
        }
      }
      if (want_x && strided_planes) from_phase_planes(dx_planes, s, pgx + b * image);
    }
  }
  if (want_w) gw = sum_dw_chunks(dw_chunks, s);
}

// The same for a 3x3 "same" layer, by Winograd (conv_winograd_cpu.cpp): dx is the
// convolution of dy with the flipped filters, O -> C channels; dW is summed over the
// images in the transformed space, one (16, O, C) sum per thread for its current chunk,
// and transformed back to (O, C, 3, 3) when the chunk ends.
void backward_winograd(const ConvShape& s, const Tensor& g, const Tensor& x, const Tensor& weight,
                       bool want_x, bool want_w, Tensor& gx, Tensor& gw) {
  const std::int64_t O = s.O, C = s.C, image = C * s.H * s.W, dw_floats = O * C * 9;
  const detail::WinogradShape forward{C, O, s.H, s.W}, flipped{O, C, s.H, s.W};
  const std::int64_t scratch = forward.scratch_floats();  // the same for flipped
  const std::int64_t per_thread = scratch + 16 * O * C;   // + the chunk's transformed dW
  const std::int64_t chunks = std::min(kDwChunks, s.B);
  const int threads = threads_for(chunks);
  Tensor u;  // the flipped filters, transformed
  if (want_x) {
    gx = empty({s.B, C, s.H, s.W});
    u = empty({16, C, O});
    detail::winograd_weight(weight.data<float>(), O, C, /*flipped=*/true, u.data<float>());
  }
  Tensor work = empty({threads, per_thread});
  // chunks <= B: every chunk has an image, so each writes all of its own dW.
  Tensor dw_chunks = empty({chunks, dw_floats});
  const float* pg = g.data<float>();
  const SerialEigen serial;  // Note [Eigen inside our loops]
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    float* sc = work.data<float>() + omp_get_thread_num() * per_thread;
    float* dw_hat = sc + scratch;
    const std::int64_t first = chunk * s.B / chunks, end = (chunk + 1) * s.B / chunks;
    for (std::int64_t b = first; b < end; ++b) {
      const float* dy = pg + b * O * s.L();
      if (want_x) {
        detail::winograd_conv_image(dy, u.data<float>(), nullptr, flipped, sc,
                                    gx.data<float>() + b * image);
      }
      if (want_w) {
        detail::winograd_weight_grad_image(x.data<float>() + b * image, dy, forward,
                                           /*accumulate=*/b > first, sc, dw_hat);
      }
    }
    if (want_w) {
      detail::winograd_weight_grad_finish(dw_hat, O, C,
                                          dw_chunks.data<float>() + chunk * dw_floats);
    }
  }
  if (want_w) gw = sum_dw_chunks(dw_chunks, s);
}

struct Conv2dCpuBackward final : Node {
  ConvShape s;
  Tensor x;       // (B, C, H, W) contiguous, saved when the weight needs a gradient
  Tensor weight;  // (O, C, kh, kw) contiguous, saved when x needs a gradient
  std::vector<Tensor> backward(const Tensor& g_in) override {  // g: (B, O, Ho, Wo)
    const bool want_x = needs_input_grad(0), want_w = needs_input_grad(1);
    const Tensor g = g_in.contiguous();
    Tensor gx, gw, gb;
    if (want_x || want_w) {
      if (detail::winograd_applies(s)) {
        backward_winograd(s, g, x, weight, want_x, want_w, gx, gw);
      } else {
        backward_patches(s, g, x, weight, want_x, want_w, gx, gw);
      }
    }
    if (needs_input_grad(2)) gb = ddp::sum(ddp::sum(g.view({s.B, s.O, s.L()}), 2), 0);
    return {gx, gw, gb};
  }
  const char* name() const override { return "Conv2dCpuBackward"; }
  void release_saved() override { x = weight = Tensor(); }
};

}  // namespace

// ==== Forward ==========================================================================

namespace {

// x: (B, C, H, W) and w: (O, C, kh, kw), contiguous; bias: (O) or nullptr -> y (B, O, Ho,
// Wo): band by band, patch matrix and GEMM (Note [Convolution one image at a time]).
void forward_patches(const Tensor& x, const Tensor& w, const float* bias, const ConvShape& s,
                     Tensor& y) {
  const std::int64_t K = s.K(), L = s.L(), O = s.O, image = s.C * s.H * s.W;
  const std::int64_t rows = rows_per_band(s), n_max = rows * s.Wo;
  const int threads = threads_for(s.B);
  const std::int64_t phases = s.stride > 1 && on_phase_planes(s) ? phase_floats(s) : 0;
  const std::int64_t per_thread = K * n_max + phases;  // one band's cols, x's phase planes
  Tensor work = empty({threads, per_thread});
  float* pw = work.data<float>();
  const float* px = x.data<float>();
  float* py = y.data<float>();
  const ConstMat wm(w.data<float>(), O, K);
  const SerialEigen serial;  // Note [Eigen inside our loops]
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)  // Note [Work shared ...]
  for (std::int64_t b = 0; b < s.B; ++b) {
    float* cols = pw + omp_get_thread_num() * per_thread;
    const float* planes = planes_of(px + b * image, s, cols + K * n_max);
    for (Band band{0, 0}; band.ho1 < s.Ho; band.ho0 = band.ho1) {
      band.ho1 = std::min(band.ho0 + rows, s.Ho);
      const std::int64_t n = (band.ho1 - band.ho0) * s.Wo;
      im2col_any(planes, s, band, cols);
      BandMat yb(py + b * O * L + band.ho0 * s.Wo, O, n, Eigen::OuterStride<>(L));
      yb.noalias() = wm * ConstMat(cols, K, n);
      if (bias != nullptr) yb.colwise() += Eigen::Map<const Eigen::VectorXf>(bias, O);
    }
  }
}

// The same for a 3x3 "same" convolution, by Winograd (conv_winograd_cpu.cpp).
void forward_winograd(const Tensor& x, const Tensor& w, const float* bias, const ConvShape& s,
                      Tensor& y) {
  const detail::WinogradShape shape{s.C, s.O, s.H, s.W};
  Tensor u = empty({16, s.O, s.C});
  detail::winograd_weight(w.data<float>(), s.O, s.C, /*flipped=*/false, u.data<float>());
  const int threads = threads_for(s.B);
  Tensor work = empty({threads, shape.scratch_floats()});
  const SerialEigen serial;  // Note [Eigen inside our loops]
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)  // Note [Work shared ...]
  for (std::int64_t b = 0; b < s.B; ++b) {
    float* scratch = work.data<float>() + omp_get_thread_num() * shape.scratch_floats();
    detail::winograd_conv_image(x.data<float>() + b * s.C * s.H * s.W, u.data<float>(), bias, shape,
                                scratch, y.data<float>() + b * s.O * s.L());
  }
}

}  // namespace

// x: (B, C, H, W), weight: (O, C, kh, kw), bias: (O) or undefined -> (B, O, Ho, Wo).
Variable conv2d_cpu(const Variable& x, const Variable& weight, const Variable& bias,
                    std::int64_t stride, std::int64_t padding) {
  const ConvShape s = detail::conv_shape(x, weight, bias, stride, padding);
  DDP_CHECK(fused_cpu_applies(x.data()), "conv2d_cpu: x is ", x.data().describe(),
            ", expected float32 on the cpu\nhint: call conv2d(), which picks the version");
  const Tensor xc = x.data().contiguous();
  const Tensor w = weight.data().contiguous();
  const Tensor bias_c = bias.defined() ? bias.data().contiguous() : Tensor();
  const float* pb = bias.defined() ? bias_c.data<float>() : nullptr;
  Tensor y = empty({s.B, s.O, s.Ho, s.Wo});
  if (detail::winograd_applies(s)) {
    forward_winograd(xc, w, pb, s, y);
  } else {
    forward_patches(xc, w, pb, s, y);
  }
  return make_result(std::move(y), {x, weight, bias}, [&] {
    auto node = std::make_shared<Conv2dCpuBackward>();
    node->s = s;
    if (weight.requires_grad()) node->x = xc;
    if (x.requires_grad()) node->weight = w;
    return node;
  });
}

}  // namespace ddp
