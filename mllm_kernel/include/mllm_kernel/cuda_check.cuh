// CUDA errors as library errors: `RuntimeDeviceCheck` turns a failed CUDA call into a
// RuntimeError that carries the CUDA error's name and the caller's file:line (errors.hpp).
//
//   RuntimeDeviceCheck(cudaMemsetAsync(ptr, 0, bytes, stream));
//   RuntimeDeviceCheck();                    // the thread's last error, e.g. after a launch
#pragma once

#include <mllm_kernel/errors.hpp>
#include <mllm_kernel/source_location.hpp>

#include <cuda_runtime.h>

namespace mllm_kernel::host {

/// Throws a RuntimeError naming the CUDA error when `status` is not cudaSuccess.
struct RuntimeDeviceCheck {
  /// Checks (and clears) the last error of the calling thread, e.g. after a launch.
  explicit RuntimeDeviceCheck(source_location loc = source_location::current())
      : RuntimeDeviceCheck(cudaGetLastError(), loc) {}
  explicit RuntimeDeviceCheck(cudaError_t status, source_location loc = source_location::current()) {
    if (status != cudaSuccess) [[unlikely]] {
      detail::throw_panic("RuntimeError",
                          detail::concat("CUDA error ", cudaGetErrorName(status), ": ", cudaGetErrorString(status)),
                          loc);
    }
  }
};

}  // namespace mllm_kernel::host
