// TMA tensor maps (Hopper's bulk tensor copies) for a kernel's operands, made on the host.
//
//   CUtensorMap map = row_tile_tensor_map<T>(data, rows, cols, row_stride, box_rows, box_cols);
//
// A row-major [rows, cols] matrix of T read in boxes of box_rows x box_cols, each box written to
// shared memory in the 128-byte swizzle (rows of 128 bytes, 8-row groups of 1024 bytes, 16-byte
// chunk c of row r at c ^ (r % 8)): the K-major layout wgmma reads. Rows and columns past the
// matrix read as zeros. cuTensorMapEncodeTiled comes through the runtime's driver entry point
// (driver_launch.cuh), so nothing links libcuda.
#pragma once

#include <mllm_kernel/driver_launch.cuh>
#include <mllm_kernel/errors.hpp>
#include <mllm_kernel/source_location.hpp>
#include <mllm_kernel/type.cuh>

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace mllm_kernel::host {

namespace detail {

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/// cuTensorMapEncodeTiled, or nullptr when the driver does not provide it.
inline EncodeTiledFn driver_encode_tiled() {
  static const auto function = reinterpret_cast<EncodeTiledFn>(driver_entry_point("cuTensorMapEncodeTiled"));
  return function;
}

}  // namespace detail

/// The tensor map of a row-major [rows, cols] matrix of T (fp16_t or bf16_t) at `data`, rows
/// `row_stride` elements apart, read in boxes of box_rows x box_cols with the 128-byte swizzle
/// (box_cols * sizeof(T) must be 128). TMA needs `data` 16-byte aligned and the row stride a
/// multiple of 16 bytes: callers check both first. RuntimeError where there is no driver to
/// make it or the driver refuses.
template <typename T>
CUtensorMap row_tile_tensor_map(const void* data, std::int64_t rows, std::int64_t cols, std::int64_t row_stride,
                                std::uint32_t box_rows, std::uint32_t box_cols,
                                source_location loc = source_location::current()) {
  static_assert(std::is_same_v<T, fp16_t> || std::is_same_v<T, bf16_t>, "tensor maps of fp16_t or bf16_t");
  const auto encode = detail::driver_encode_tiled();
  if (encode == nullptr) {
    detail::throw_panic("RuntimeError", "cuTensorMapEncodeTiled is not available (no CUDA driver or device)", loc);
  }
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_stride) * sizeof(T)};
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult result =
      encode(&map, std::is_same_v<T, bf16_t> ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
             const_cast<void*>(data), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    detail::throw_panic("RuntimeError",
                        detail::concat("cuTensorMapEncodeTiled failed (error ", static_cast<int>(result), ") for a [",
                                       rows, ", ", cols, "] matrix with row stride ", row_stride),
                        loc);
  }
  return map;
}

}  // namespace mllm_kernel::host
