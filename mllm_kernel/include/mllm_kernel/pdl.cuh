// Programmatic dependent launch (PDL, sm_90+): a kernel launched with
// `LaunchKernel(...).enable_pdl(true)` may start while the previous kernel in the stream
// finishes, so it must wait before reading what that kernel writes. Each helper is a no-op below
// sm_90 or when kUsePDL is false. docs/pdl.md says when a kernel may read before waiting.
#pragma once

#include <mllm_kernel/host_device.hpp>

namespace mllm_kernel::device {

/// PDL: wait until the previous kernel in the stream has finished writing its results.
/// A no-op below sm_90 or when kUsePDL is false.
template <bool kUsePDL = true>
MLLM_DEVICE void pdl_wait_primary() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (kUsePDL) asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// PDL: let the next kernel in the stream start its prologue while this one finishes.
/// A no-op below sm_90 or when kUsePDL is false.
template <bool kUsePDL = true>
MLLM_DEVICE void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (kUsePDL) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// PDL at the top of a kernel that reads nothing before the previous kernel is done: wait for
/// it, then let the next kernel be scheduled at once. Releasing this early is safe whatever this
/// kernel still does, since the next kernel's own wait covers this whole grid finishing and its
/// writes being visible; it only lets the next grid's blocks launch and reach that wait during
/// this grid's tail, so the launch latency of back-to-back kernels overlaps work.
template <bool kUsePDL = true>
MLLM_DEVICE void pdl_wait_and_release() {
  pdl_wait_primary<kUsePDL>();
  pdl_launch_dependents<kUsePDL>();
}

}  // namespace mllm_kernel::device
