// What the CUTLASS scaled GEMM modules share: CUTLASS's names of the element types, the
// workspace check and the launch (the operand checks, which every W8A8 module takes, are in
// scaled_mm_operands.cuh).
#pragma once

#include "scaled_mm_operands.cuh"
#include <mllm_kernel/launch.cuh>
#include <mllm_kernel/op_args.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/tensor_view.hpp>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.hpp>

#include <cutlass/cutlass.h>
#include <cutlass/numeric_types.h>

#include <cstdint>

namespace mllm_kernel::device::scaled_mm {

template <typename T>
struct CutlassType;
template <>
struct CutlassType<std::int8_t> {
  using type = std::int8_t;
};
template <>
struct CutlassType<fp8_e4m3_t> {
  using type = cutlass::float_e4m3_t;
};
template <>
struct CutlassType<fp16_t> {
  using type = cutlass::half_t;
};
template <>
struct CutlassType<bf16_t> {
  using type = cutlass::bfloat16_t;
};
template <typename T>
using cutlass_t = typename CutlassType<T>::type;

/// Checks the byte workspace CUTLASS's kernels may use (uint8, 1-D, on `device`); returns its size.
inline std::int64_t check_workspace(TensorView workspace, host::SymbolicDevice& device) {
  using namespace host;
  SymbolicSize bytes{"workspace bytes"};
  (void)TensorMatcher({bytes}).with_dtype<std::uint8_t>().with_device(device).verify(workspace, "workspace");
  return bytes.unwrap();
}

/// Runs a CUTLASS device-level GEMM (GemmUniversalAdapter) on `device`'s current stream; a
/// ValueError when CUTLASS cannot run the problem, needs more than the `workspace_bytes` given,
/// or fails to launch.
template <class Adapter>
void run_cutlass(const typename Adapter::Arguments& args, void* workspace, std::int64_t workspace_bytes,
                 DLDevice device) {
  using namespace host;
  // CUTLASS launches on the current device: make it the tensors'.
  host::detail::DeviceGuard guard(device.device_id);
  const cudaStream_t stream = host::LaunchKernel::resolve_device(device);
  Adapter gemm;
  const cutlass::Status can = gemm.can_implement(args);
  RuntimeCheck(can == cutlass::Status::kSuccess, "CUTLASS cannot run this problem: ", cutlassGetStatusString(can));
  const std::size_t needed = Adapter::get_workspace_size(args);
  RuntimeCheck(needed <= static_cast<std::size_t>(workspace_bytes), "workspace holds ", workspace_bytes,
               " bytes, the kernel needs ", needed);
  const cutlass::Status status = gemm(args, workspace, stream);
  RuntimeCheck(status == cutlass::Status::kSuccess, "CUTLASS GEMM launch failed: ", cutlassGetStatusString(status));
}

}  // namespace mllm_kernel::device::scaled_mm
