// DLPack devices on the host: PyTorch-style names for messages, and equality.
#pragma once

#include <mllm_kernel/host_runtime.hpp>
#include <mllm_kernel/text.hpp>

#include <dlpack/dlpack.h>

namespace mllm_kernel::host {

/// The PyTorch-style name of a device type: "cpu", "cuda", "cuda_host", ...
MLLM_KERNEL_HOST_API Text device_type_name(int device_type);

/// "cpu" for the host, "cuda:1" for an accelerator.
MLLM_KERNEL_HOST_API Text device_name(DLDevice device);

/// Whether two DLPack devices are the same.
constexpr bool same_device(DLDevice a, DLDevice b) {
  return a.device_type == b.device_type && a.device_id == b.device_id;
}

}  // namespace mllm_kernel::host
