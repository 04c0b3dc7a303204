// CUDA RMSNorm family, one module per element type T (fp32_t, fp16_t, bf16_t):
//   rmsnorm<T>(out, input, weight, eps, enable_pdl)              out = rmsnorm(input) * weight
//   rms_norm_gated<T>(out, input, z, weight, eps, enable_pdl)    out = rmsnorm(input) * weight * silu(z)
//   fused_add_rmsnorm<T>(input, residual, weight, eps, enable_pdl)
//       residual = input + residual (fp32 sum, stored in T); input = rmsnorm(residual) * weight
//   qknorm<T>(q, k, q_weight, k_weight, eps, enable_pdl)          per-head norm over head_dim, in place
//   qknorm_across_heads<T>(q, k, q_weight, k_weight, eps, enable_pdl)
//       per-token norm over all heads * head_dim, in place
//
// Every op is "normalise a set of rows": a row is addressed as base + (r / heads) * s0 +
// (r % heads) * s1, so row-strided inputs (slices of a fused QKV projection) need no copy, and
// q and k run in one launch as two row sets. Rows of at most 128 vectors go to the lane-group
// path (8/16/32 lanes per row, several rows per block), longer rows to the CTA path (one row
// per block of up to 512 threads, compiled per block-size bound 128/256/512 so the launch
// bounds and the cross-warp reduction fit the block). The 16-byte vector kernels run when every
// pointer, stride and the row length allow it, the scalar kernels otherwise.
#pragma once

#include <mllm_kernel/op_args.hpp>
#include <mllm_kernel/impl/norm.cuh>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>
#include <mllm_kernel/vec.cuh>

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <cmath>
#include <cstdint>

namespace {

using mllm_kernel::bf16_t;
using mllm_kernel::fp16_t;
using mllm_kernel::fp32_t;
using mllm_kernel::device::norm::Fuse;

/// Largest row (elements) any norm here accepts: one block of 512 threads holds it in registers.
constexpr std::int64_t kMaxHidden = 16384;

// ---------------------------------------------------------------------------------------------
// Launch plan: which path and block shape a row length takes. launch_width's switch launches
// exactly the kernels a plan can name.

/// Vectors each lane holds on the group path with full-warp groups.
constexpr int kGroupItems = 4;
/// Threads per block on the group path.
constexpr int kGroupBlockThreads = 128;
/// Most threads per block on the CTA path.
constexpr int kCtaMaxThreads = 512;
/// Vectors per thread on the CTA path when that is enough (rows up to kCtaMaxThreads *
/// kCtaItemsSmall vectors); longer rows use a larger count chosen by the caller per vector
/// width (`large_items`). 2 puts a 4096-wide bf16 row on 256 threads with ~50 registers: all of
/// the row's and the weight's loads are in flight at once. Measured on an H100 under CUDA
/// graphs, 1 token: 1.85 us vs 2.05 us with 4 items x 128 threads (83 registers) and 2.50 us
/// with 4 items capped at 64 registers (the cap serialised the loads).
constexpr int kCtaItemsSmall = 2;
/// Register budget per thread on the CTA path with kCtaItemsSmall items (launch bounds): 64
/// keeps 2048 threads of an SM resident.
constexpr int kCtaSmallRegisters = 64;

/// How to run a row length: group path with `group_width` lanes per row (8, 16 or 32), or the
/// CTA path (`group_width == 0`) with `cta_threads` threads per row, each holding `cta_items`
/// vectors, compiled for blocks of at most `cta_max_threads` (128, 256 or 512).
struct Plan {
  int group_width = 0;
  int cta_threads = 0;
  int cta_items = 0;
  int cta_max_threads = 0;
  /// Rows handled by one block.
  int rows_per_block() const { return group_width ? kGroupBlockThreads / group_width : 1; }
  /// Threads per block.
  int block_threads() const { return group_width ? kGroupBlockThreads : cta_threads; }
};

/// The plan for rows of `num_vecs` vectors; rows of more than kCtaMaxThreads * large_items
/// vectors do not fit (a ValueError). With `every_shape` false, only two shapes: 32-lane groups
/// and large-item CTAs (see launch_width).
Plan make_plan(std::int64_t num_vecs, int large_items, bool every_shape) {
  Plan p;
  if (every_shape && num_vecs <= 8) {
    p.group_width = 8;
  } else if (every_shape && num_vecs <= 16) {
    p.group_width = 16;
  } else if (num_vecs <= kGroupItems * 32) {
    p.group_width = 32;
  } else {
    const bool small_items = every_shape && num_vecs <= kCtaMaxThreads * kCtaItemsSmall;
    p.cta_items = small_items ? kCtaItemsSmall : large_items;
    const std::int64_t threads = mllm_kernel::host::div_ceil(mllm_kernel::host::div_ceil(num_vecs, p.cta_items), 32) * 32;
    mllm_kernel::host::RuntimeCheck(threads <= kCtaMaxThreads, "row of ", num_vecs, " vectors does not fit one block");
    p.cta_threads = static_cast<int>(threads);
    // Large-item rows always take the 512 bound (they need many threads anyway).
    p.cta_max_threads = p.cta_items != kCtaItemsSmall ? kCtaMaxThreads : threads <= 128 ? 128 : threads <= 256 ? 256 : 512;
  }
  return p;
}

/// A set of rows sharing one weight: row r lives at base + (r / heads) * s0 + (r % heads) * s1.
template <typename T>
struct RowSet {
  T* out;
  const T* in;
  T* residual;
  const T* weight;
  std::int64_t rows;
  std::int64_t heads;
  std::int64_t in_s0, in_s1;
  std::int64_t out_s0, out_s1;
  std::int64_t res_s0;
  int hidden;
  const T* gate = nullptr;  // rms_norm_gated's z, one-set rows only
  std::int64_t gate_s0 = 0;
};

/// Up to two row sets (q and k) normalised by one launch; rows of set 1 follow those of set 0.
/// The fields every thread reads come first, so a one-set launch touches only the first
/// ~120 bytes of the parameter block.
template <typename T>
struct NormParams {
  float eps;
  bool pdl;  // launched with programmatic dependent launch: run the PDL instructions
  std::int64_t total_rows;
  RowSet<T> set0;
  RowSet<T> set1;
};

/// The pointers of global row `r`; a row past the end gets hidden = 0 (no memory touched), so
/// lanes that share shuffles with valid rows stay in step. kOneSet: set 0 only, one head per row
/// (rmsnorm, fused_add_rmsnorm): no set choice and no division by heads, which at a few tokens
/// is a visible share of the kernel (H100, [1..64, 4096] bf16: 0.2 µs of 1.8-2.8 µs).
template <bool kOneSet, typename T>
__device__ __forceinline__ mllm_kernel::device::norm::Row<T> locate_row(const NormParams<T>& p, std::int64_t r) {
  mllm_kernel::device::norm::Row<T> row{};
  if (r >= p.total_rows) return row;
  if constexpr (kOneSet) {
    const RowSet<T>& s = p.set0;
    row.in = s.in + r * s.in_s0;
    row.out = s.out + r * s.out_s0;
    row.residual = s.residual + r * s.res_s0;
    row.gate = s.gate + r * s.gate_s0;
    row.weight = s.weight;
    row.hidden = s.hidden;
    return row;
  }
  const bool first = r < p.set0.rows;
  const RowSet<T>& s = first ? p.set0 : p.set1;
  if (!first) r -= p.set0.rows;
  const std::int64_t outer = s.heads == 1 ? r : r / s.heads;
  const std::int64_t inner = s.heads == 1 ? 0 : r - outer * s.heads;
  row.in = s.in + outer * s.in_s0 + inner * s.in_s1;
  row.out = s.out + outer * s.out_s0 + inner * s.out_s1;
  row.residual = s.residual + outer * s.res_s0;
  row.gate = s.gate + outer * s.gate_s0;
  row.weight = s.weight;
  row.hidden = s.hidden;
  return row;
}

/// Lane-group path: kWidth lanes per row, 128 / kWidth rows per block.
template <typename T, int kVec, int kWidth, int kItems, Fuse kFuse>
__global__ void __launch_bounds__(kGroupBlockThreads)
    rmsnorm_group_kernel(const __grid_constant__ NormParams<T> p) {
  using namespace mllm_kernel::device;
  if (p.pdl) pdl_wait_and_release();
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / kWidth) + threadIdx.x / kWidth;
  norm::rms_group_row<T, kVec, kWidth, kItems, kFuse>(locate_row<false>(p, r), p.eps);
}

/// Blocks per SM the CTA kernel is compiled to fit: small-item rows get
/// kCtaSmallRegisters registers per thread (a full SM resident), large-item rows up to 128.
template <int kItems, int kMaxThreads>
constexpr int cta_min_blocks() {
  constexpr int kRegisters = kItems == kCtaItemsSmall ? kCtaSmallRegisters : 128;
  return 65536 / (kRegisters * kMaxThreads);
}

/// CTA path: one row per block of blockDim.x (a multiple of 32, at most kMaxThreads) threads.
template <typename T, int kVec, int kItems, int kMaxThreads, Fuse kFuse, bool kOneSet>
__global__ void __launch_bounds__(kMaxThreads, (cta_min_blocks<kItems, kMaxThreads>()))
    rmsnorm_cta_kernel(const __grid_constant__ NormParams<T> p) {
  using namespace mllm_kernel::device;
  __shared__ float scratch[kMaxThreads / kWarpThreads];
  if (p.pdl) pdl_wait_and_release();
  norm::rms_cta_row_bounded<T, kVec, kItems, kMaxThreads, kFuse>(locate_row<kOneSet>(p, blockIdx.x), p.eps,
                                                                      scratch);
}

/// Launches the CTA path with kCtaItemsSmall items, picking the compiled block-size bound.
template <typename T, int kVec, int kItems, Fuse kFuse, bool kOneSet>
void launch_cta(const NormParams<T>& p, const Plan& plan, dim3 grid, dim3 block,
                DLDevice device, bool enable_pdl) {
  using mllm_kernel::host::LaunchKernel;
  switch (plan.cta_max_threads) {
    case 128:
      LaunchKernel(grid, block, device)
          .enable_pdl(enable_pdl)(rmsnorm_cta_kernel<T, kVec, kItems, 128, kFuse, kOneSet>, p);
      break;
    case 256:
      LaunchKernel(grid, block, device)
          .enable_pdl(enable_pdl)(rmsnorm_cta_kernel<T, kVec, kItems, 256, kFuse, kOneSet>, p);
      break;
    default:
      LaunchKernel(grid, block, device)
          .enable_pdl(enable_pdl)(rmsnorm_cta_kernel<T, kVec, kItems, 512, kFuse, kOneSet>, p);
  }
}

/// Picks the path and launches for one vector width. The scalar width (rows that are misaligned
/// or not a multiple of 16 bytes) plans only two shapes, so that a module compiles two scalar
/// kernels rather than seven: a module's first build is mostly spent compiling its kernels, and
/// such rows are rare in serving.
template <typename T, int kVec, Fuse kFuse, bool kOneSet>
void launch_width(const NormParams<T>& p, std::int64_t max_hidden, DLDevice device, bool enable_pdl) {
  using mllm_kernel::host::LaunchKernel;
  // Vectors per thread that fit the longest row in one block of kCtaMaxThreads.
  constexpr int kLargeItems = static_cast<int>(kMaxHidden / kCtaMaxThreads / kVec);
  static_assert(kLargeItems >= kCtaItemsSmall);
  constexpr bool kEveryShape = kVec > 1;
  const Plan plan = make_plan(max_hidden / kVec, kLargeItems, kEveryShape);
  const std::int64_t blocks = mllm_kernel::host::div_ceil(p.total_rows, plan.rows_per_block());
  mllm_kernel::host::RuntimeCheck(blocks <= 0x7fffffff, "too many rows: ", p.total_rows);
  const dim3 grid(static_cast<unsigned>(blocks));
  const dim3 block(static_cast<unsigned>(plan.block_threads()));
  switch (plan.group_width) {
    case 8:  // not planned without every_shape, nor are 16 and the small-item CTAs
      if constexpr (kEveryShape) {
        LaunchKernel(grid, block, device).enable_pdl(enable_pdl)(rmsnorm_group_kernel<T, kVec, 8, 1, kFuse>, p);
      }
      break;
    case 16:
      if constexpr (kEveryShape) {
        LaunchKernel(grid, block, device).enable_pdl(enable_pdl)(rmsnorm_group_kernel<T, kVec, 16, 1, kFuse>, p);
      }
      break;
    case 32:
      LaunchKernel(grid, block, device)
          .enable_pdl(enable_pdl)(rmsnorm_group_kernel<T, kVec, 32, kGroupItems, kFuse>, p);
      break;
    default:
      if (plan.cta_items == kCtaItemsSmall) {
        if constexpr (kEveryShape) {
          launch_cta<T, kVec, kCtaItemsSmall, kFuse, kOneSet>(p, plan, grid, block, device, enable_pdl);
        }
      } else {
        LaunchKernel(grid, block, device)
            .enable_pdl(enable_pdl)(rmsnorm_cta_kernel<T, kVec, kLargeItems, kCtaMaxThreads, kFuse, kOneSet>, p);
      }
  }
}

/// Whether the 16-byte kernels can serve every row of `s`.
template <typename T>
void check_set(mllm_kernel::host::VectorizeCheck& check, const RowSet<T>& s, Fuse fuse) {
  const std::int64_t outer = s.heads == 0 ? 0 : s.rows / s.heads;
  check.pointer(s.in).pointer(s.out).pointer(s.weight).length(s.hidden);
  check.stride(s.in_s0, outer).stride(s.in_s1, s.heads).stride(s.out_s0, outer).stride(s.out_s1, s.heads);
  if (fuse == Fuse::kResidualAdd) check.pointer(s.residual).stride(s.res_s0, outer);
  if (fuse == Fuse::kSiluGate) check.pointer(s.gate).stride(s.gate_s0, outer);
}

/// Launches the 16-byte kernels when possible, the scalar ones otherwise. kOneSet: `p` holds
/// one set of single-head rows (rmsnorm, fused_add_rmsnorm, rms_norm_gated), fixed per op so
/// that a module compiles only the CTA kernels its op can launch.
template <typename T, Fuse kFuse, bool kOneSet>
void launch(NormParams<T> p, DLDevice device, bool enable_pdl) {
  p.pdl = enable_pdl;
  constexpr int kVec = mllm_kernel::device::kVecElems<T>;
  mllm_kernel::host::VectorizeCheck check(kVec, sizeof(T));
  check_set(check, p.set0, kFuse);
  std::int64_t max_hidden = p.set0.hidden;
  if (p.set1.rows > 0) {
    check_set(check, p.set1, kFuse);
    max_hidden = mllm_kernel::host::max_of<std::int64_t>(max_hidden, p.set1.hidden);
  }
  if (check.ok()) {
    launch_width<T, kVec, kFuse, kOneSet>(p, max_hidden, device, enable_pdl);
  } else {
    launch_width<T, 1, kFuse, kOneSet>(p, max_hidden, device, enable_pdl);
  }
}

void check_eps(double eps) {
  mllm_kernel::host::RuntimeCheck(std::isfinite(eps) && eps >= 0.0, "eps must be finite and >= 0, got ", eps);
}

void check_hidden(std::int64_t hidden, const char* what) {
  mllm_kernel::host::RuntimeCheck(hidden <= kMaxHidden, what, " must be at most ", kMaxHidden, ", got ", hidden);
}

/// One set of `tokens` plain rows of `hidden` elements: input rows in_stride apart, out rows
/// out_stride apart, one weight (rmsnorm and rms_norm_gated).
template <typename T>
RowSet<T> plain_rows(mllm_kernel::TensorView out, std::int64_t out_stride, mllm_kernel::TensorView input,
                     std::int64_t in_stride, mllm_kernel::TensorView weight, std::int64_t tokens, std::int64_t hidden) {
  return RowSet<T>{static_cast<T*>(out.data_ptr()),
                   static_cast<const T*>(input.data_ptr()),
                   nullptr,
                   static_cast<const T*>(weight.data_ptr()),
                   tokens,
                   1,
                   in_stride,
                   0,
                   out_stride,
                   0,
                   0,
                   static_cast<int>(hidden)};
}

/// Launches the norm of one row set.
template <typename T, Fuse kFuse>
void launch_set(const RowSet<T>& rows, double eps, DLDevice device, bool enable_pdl) {
  NormParams<T> p{};
  p.set0 = rows;
  p.total_rows = rows.rows;
  p.eps = static_cast<float>(eps);
  launch<T, kFuse, /*kOneSet=*/true>(p, device, enable_pdl);
}

/// out[N, D] = rmsnorm(input[N, D]) * weight[D] (input and out [..., D] seen as rows). input and out may have any row stride
/// (unit stride within a row).
template <typename T>
void rmsnorm(mllm_kernel::TensorView out, mllm_kernel::TensorView input, mllm_kernel::TensorView weight, double eps,
             bool enable_pdl) {
  using namespace mllm_kernel::host;
  NormRowsArgs a("out_row_stride");
  a.verify<kDLCUDA, T>(input, out, "out", weight);
  check_hidden(a.hidden.unwrap(), "hidden");
  check_eps(eps);
  launch_set<T, Fuse::kNone>(plain_rows<T>(out, a.second_stride.unwrap(), input, a.in_stride.unwrap(), weight,
                                           a.tokens.unwrap(), a.hidden.unwrap()),
                             eps, a.device.unwrap(), enable_pdl);
}

/// out[N, D] = rmsnorm(input[N, D]) * weight[D] * silu(z[N, D]) (gated DeltaNet's output norm);
/// input, z and out [..., D] seen as rows, each with its own row stride (unit stride in a row).
template <typename T>
void rms_norm_gated(mllm_kernel::TensorView out, mllm_kernel::TensorView input, mllm_kernel::TensorView z,
                    mllm_kernel::TensorView weight, double eps, bool enable_pdl) {
  using namespace mllm_kernel::host;
  GatedNormArgs a;
  a.verify<kDLCUDA, T>(out, input, z, weight);
  check_hidden(a.hidden.unwrap(), "hidden");
  check_eps(eps);
  RowSet<T> rows = plain_rows<T>(out, a.out_stride.unwrap(), input, a.in_stride.unwrap(), weight, a.tokens.unwrap(),
                                 a.hidden.unwrap());
  rows.gate = static_cast<const T*>(z.data_ptr());
  rows.gate_s0 = a.second_stride.unwrap();
  launch_set<T, Fuse::kSiluGate>(rows, eps, a.device.unwrap(), enable_pdl);
}

/// residual = input + residual; input = rmsnorm(residual) * weight, both [N, D], in place.
template <typename T>
void fused_add_rmsnorm(mllm_kernel::TensorView input, mllm_kernel::TensorView residual, mllm_kernel::TensorView weight,
                       double eps, bool enable_pdl) {
  using namespace mllm_kernel::host;
  NormRowsArgs a("residual_row_stride");
  a.verify<kDLCUDA, T>(input, residual, "residual", weight);
  check_hidden(a.hidden.unwrap(), "hidden");
  check_eps(eps);
  const std::int64_t tokens = a.tokens.unwrap(), in_stride = a.in_stride.unwrap();
  RuntimeCheck(tokens == 1 || in_stride != 0, "input: row stride must not be 0 (written in place)");
  RuntimeCheck(tokens == 1 || a.second_stride.unwrap() != 0, "residual: row stride must not be 0 (written in place)");
  T* in_ptr = static_cast<T*>(input.data_ptr());
  NormParams<T> p{};
  p.set0 = RowSet<T>{in_ptr,
                     in_ptr,
                     static_cast<T*>(residual.data_ptr()),
                     static_cast<const T*>(weight.data_ptr()),
                     tokens,
                     1,
                     in_stride,
                     0,
                     in_stride,
                     0,
                     a.second_stride.unwrap(),
                     static_cast<int>(a.hidden.unwrap())};
  p.total_rows = tokens;
  p.eps = static_cast<float>(eps);
  launch<T, Fuse::kResidualAdd, /*kOneSet=*/true>(p, a.device.unwrap(), enable_pdl);
}

/// An in-place row set over a [T, H, D] tensor view.
template <typename T>
RowSet<T> head_rows(mllm_kernel::TensorView x, mllm_kernel::TensorView weight, std::int64_t tokens, std::int64_t heads,
                    std::int64_t s0, std::int64_t s1, std::int64_t hidden) {
  T* ptr = static_cast<T*>(x.data_ptr());
  return RowSet<T>{ptr, ptr, nullptr, static_cast<const T*>(weight.data_ptr()), tokens * heads, heads, s0, s1, s0, s1,
                   0, static_cast<int>(hidden)};
}

/// Per-head RMSNorm over head_dim of q[T, Hq, D] and k[T, Hk, D], in place, one launch.
template <typename T>
void qknorm(mllm_kernel::TensorView q, mllm_kernel::TensorView k, mllm_kernel::TensorView q_weight,
            mllm_kernel::TensorView k_weight, double eps, bool enable_pdl) {
  using namespace mllm_kernel::host;
  QKArgs a;
  a.verify<kDLCUDA, T>(q, k);
  a.verify_weights(q_weight, k_weight, /*across_heads=*/false);
  const std::int64_t tokens = a.tokens.unwrap(), head_dim = a.head_dim.unwrap();
  check_hidden(head_dim, "head_dim");
  check_eps(eps);
  NormParams<T> p{};
  p.set0 = head_rows<T>(q, q_weight, tokens, a.q_heads.unwrap(), a.q_s0.unwrap(), a.q_s1.unwrap(), head_dim);
  p.set1 = head_rows<T>(k, k_weight, tokens, a.k_heads.unwrap(), a.k_s0.unwrap(), a.k_s1.unwrap(), head_dim);
  p.total_rows = p.set0.rows + p.set1.rows;
  p.eps = static_cast<float>(eps);
  launch<T, Fuse::kNone, /*kOneSet=*/false>(p, a.device.unwrap(), enable_pdl);
}

/// Per-token RMSNorm over all heads of q[T, Hq, D] (weight [Hq * D]) and of k[T, Hk, D]
/// (weight [Hk * D]), in place, one launch. Heads must be packed within a token (head stride
/// == head_dim); the token stride is free.
template <typename T>
void qknorm_across_heads(mllm_kernel::TensorView q, mllm_kernel::TensorView k, mllm_kernel::TensorView q_weight,
                         mllm_kernel::TensorView k_weight, double eps, bool enable_pdl) {
  using namespace mllm_kernel::host;
  QKArgs a;
  a.verify<kDLCUDA, T>(q, k, /*heads_packed=*/true);
  a.verify_weights(q_weight, k_weight, /*across_heads=*/true);
  check_hidden(a.q_hidden.unwrap(), "num_q_heads * head_dim");
  check_hidden(a.k_hidden.unwrap(), "num_k_heads * head_dim");
  check_eps(eps);
  const std::int64_t tokens = a.tokens.unwrap();
  NormParams<T> p{};
  p.set0 = head_rows<T>(q, q_weight, tokens, 1, a.q_s0.unwrap(), 0, a.q_hidden.unwrap());
  p.set1 = head_rows<T>(k, k_weight, tokens, 1, a.k_s0.unwrap(), 0, a.k_hidden.unwrap());
  p.total_rows = p.set0.rows + p.set1.rows;
  p.eps = static_cast<float>(eps);
  launch<T, Fuse::kNone, /*kOneSet=*/false>(p, a.device.unwrap(), enable_pdl);
}

}  // namespace
