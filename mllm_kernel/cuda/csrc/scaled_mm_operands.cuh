// The operand checks of every W8A8 scaled GEMM module (the CUTLASS kernels and the GEMV):
// mat_a [M, K] row-major, mat_b [K, N] column-major, out [M, N] row-major, 16-byte aligned rows,
// scales of one value or one per row / column. No CUTLASS here, so a module without it compiles
// without its headers.
#pragma once

#include <mllm_kernel/op_args.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/tensor_view.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.hpp>

#include <cstdint>

namespace mllm_kernel::device::scaled_mm {

/// The sizes and row strides (in elements) of checked operands.
struct MmShape {
  std::int64_t m, n, k, lda, ldb, ldo;
};

inline bool aligned16(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; }

/// Checks mat_a [M, K] (row-major, AB, on a CUDA device that becomes `device`), mat_b [K, N]
/// (column-major, AB) and out [M, N] (row-major, Out): K a multiple of 16 and N of 8, rows and
/// starts 16-byte aligned (what TMA and CUTLASS's 128-bit accesses need).
template <typename AB, typename Out>
MmShape check_mm_operands(TensorView out, TensorView mat_a, TensorView mat_b, host::SymbolicDevice& device) {
  using namespace host;
  SymbolicSize M{"M"}, N{"N"}, K{"K"}, lda{"mat_a row stride"}, ldb{"mat_b column stride"}, ldo{"out row stride"};
  (void)TensorMatcher({M, K}).with_strides({lda, 1}).template with_dtype<AB>().template with_device<kDLCUDA>(device).verify(
      mat_a, "mat_a");
  (void)TensorMatcher({K, N}).with_strides({1, ldb}).template with_dtype<AB>().with_device(device).verify(mat_b, "mat_b");
  (void)TensorMatcher({M, N}).with_strides({ldo, 1}).template with_dtype<Out>().with_device(device).verify(out, "out");
  const MmShape s{M.unwrap(), N.unwrap(), K.unwrap(), lda.unwrap(), ldb.unwrap(), ldo.unwrap()};
  RuntimeCheck(s.k % 16 == 0, "K must be a multiple of 16 (16-byte rows of 8-bit values), got ", s.k);
  RuntimeCheck(s.n % 8 == 0, "N must be a multiple of 8 (16-byte output rows), got ", s.n);
  RuntimeCheck(s.lda % 16 == 0 && s.ldb % 16 == 0 && s.ldo % 8 == 0,
               "row strides must keep rows 16-byte aligned: mat_a ", s.lda, ", mat_b ", s.ldb, ", out ", s.ldo);
  RuntimeCheck(aligned16(mat_a.data_ptr()) && aligned16(mat_b.data_ptr()) && aligned16(out.data_ptr()),
               "mat_a, mat_b and out must start at 16-byte aligned addresses");
  return s;
}

/// Checks the scales of `len` rows (size "M", of mat_a) or columns ("N", of mat_b) as the CPU
/// kernel does (host::verify_scale_vector); returns whether they are a vector rather than one
/// shared value.
inline bool scales_are_vector(TensorView scales, host::SymbolicDevice& device, std::int64_t len, const char* size,
                              const char* of, const char* name) {
  host::SymbolicSize bound{size};
  bound.bind(len, of);
  return host::verify_scale_vector(scales, bound, device, name) == 1 && len != 1;
}

}  // namespace mllm_kernel::device::scaled_mm
