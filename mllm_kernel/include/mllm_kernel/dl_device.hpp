// DLPack devices on the host: PyTorch-style names for messages, and equality.
#pragma once

#include <dlpack/dlpack.h>

#include <string>

namespace mllm_kernel::host {

/// The PyTorch-style name of a device type: "cpu", "cuda", "cuda_host", ...
inline std::string device_type_name(int device_type) {
  switch (device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda";
    case kDLCUDAHost: return "cuda_host";
    case kDLCUDAManaged: return "cuda_managed";
    case kDLROCM: return "rocm";
    case kDLROCMHost: return "rocm_host";
    case kDLOpenCL: return "opencl";
    case kDLVulkan: return "vulkan";
    case kDLMetal: return "metal";
    case kDLOneAPI: return "oneapi";
    default: return "device_type(" + std::to_string(device_type) + ")";
  }
}

/// "cpu" for the host, "cuda:1" for an accelerator.
inline std::string device_name(DLDevice device) {
  if (device.device_type == kDLCPU) return "cpu";
  return device_type_name(device.device_type) + ":" + std::to_string(device.device_id);
}

/// Whether two DLPack devices are the same.
constexpr bool same_device(DLDevice a, DLDevice b) {
  return a.device_type == b.device_type && a.device_id == b.device_id;
}

}  // namespace mllm_kernel::host
