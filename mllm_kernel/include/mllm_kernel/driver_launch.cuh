// Kernel launches through the CUDA driver API, the fast path of `LaunchKernel` (launch.cuh).
//
// cudaLaunchKernelEx resolves the kernel's function on every call; cuLaunchKernelEx with the
// kernel's CUfunction, looked up once per device, takes less host time (H100, a 1-token launch
// from Python: 3.15 against 3.39 us). The driver's entry point comes through the runtime
// (cudaGetDriverEntryPointByVersion), so nothing links libcuda. Whenever the fast path cannot
// launch (no current context on a fresh thread, a full table, any error), the caller falls back
// to the runtime launch, which also reports the error.
#pragma once

#include <mllm_kernel/once_table.hpp>

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace mllm_kernel::host::detail {

/// The driver's function `name` (its CUDA 12.0 version), or nullptr when the driver (or a
/// device for it) is not there.
inline void* driver_entry_point(const char* name) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &address, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return address;
}

using LaunchKernelExFn = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);

/// cuLaunchKernelEx, or nullptr when the driver does not provide it.
inline LaunchKernelExFn driver_launch_kernel_ex() {
  static const auto function = reinterpret_cast<LaunchKernelExFn>(driver_entry_point("cuLaunchKernelEx"));
  return function;
}

/// The virtual architecture the code of `kernel` on the current device was compiled from (90
/// for compute_90; cudaFuncGetAttributes' ptxVersion), 0 when unknown: a module built only for
/// older targets runs their code on a newer GPU, where PDL waits and clusters are compiled out.
inline int compiled_virtual_arch(const void* kernel) {
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, kernel) == cudaSuccess) return attributes.ptxVersion;
  (void)cudaGetLastError();
  return 0;
}

/// The CUfunction of `kernel` (a __global__ function's host address) on device `device_id`,
/// which must be the current device; nullptr when it cannot be had. With `virtual_arch`, also
/// compiled_virtual_arch(kernel). Looked up once per (kernel, device).
inline CUfunction kernel_function(const void* kernel, int device_id, int* virtual_arch = nullptr) {
  struct Key {
    const void* kernel;
    int device;
    bool operator==(const Key&) const = default;
  };
  struct Value {
    CUfunction function;
    int virtual_arch;
  };
  static OnceTable<Key, Value, 1024> table;
  const std::size_t hash = (reinterpret_cast<std::uintptr_t>(kernel) >> 4) ^
                           (static_cast<std::size_t>(device_id) * 0x9e3779b97f4a7c15ULL);
  Value value{};
  const bool found = table.get(Key{kernel, device_id}, hash, value, [kernel](Value& computed) {
    cudaFunction_t function = nullptr;
    if (cudaGetFuncBySymbol(&function, kernel) != cudaSuccess || function == nullptr) {
      (void)cudaGetLastError();
      return false;
    }
    computed = Value{reinterpret_cast<CUfunction>(function), compiled_virtual_arch(kernel)};
    return true;
  });
  if (!found) return nullptr;
  if (virtual_arch != nullptr) *virtual_arch = value.virtual_arch;
  return value.function;
}

/// compiled_virtual_arch of `kernel` on the current device `device_id`, from kernel_function's
/// table when it has the kernel.
inline int kernel_virtual_arch(const void* kernel, int device_id) {
  int arch = 0;
  if (kernel_function(kernel, device_id, &arch) != nullptr) return arch;
  return compiled_virtual_arch(kernel);
}

/// Most launch attributes LaunchKernel sets at once (PDL, cooperative, cluster).
inline constexpr unsigned kMaxLaunchAttributes = 3;

/// Fills `attrs` (driver CUlaunchAttribute or runtime cudaLaunchAttribute: the same value
/// fields under another member name, `value`, and other ids) for the requested launch
/// properties and returns how many it wrote.
template <typename Attribute, typename Value, typename Id>
unsigned fill_launch_attributes(Attribute (&attrs)[kMaxLaunchAttributes], Value Attribute::*value, Id pdl_id,
                                Id cooperative_id, Id cluster_id, bool pdl, bool cooperative, unsigned cluster) {
  unsigned count = 0;
  if (pdl) {
    attrs[count].id = pdl_id;
    (attrs[count++].*value).programmaticStreamSerializationAllowed = 1;
  }
  if (cooperative) {
    attrs[count].id = cooperative_id;
    (attrs[count++].*value).cooperative = 1;
  }
  if (cluster > 1) {
    attrs[count].id = cluster_id;
    auto& dim = (attrs[count++].*value).clusterDim;
    dim.x = cluster;
    dim.y = 1;
    dim.z = 1;
  }
  return count;
}

/// Launches `kernel(args...)` (arguments converted to the kernel's parameter types, as
/// cudaLaunchKernelEx does) through the driver, `function` being kernel_function's for the
/// current device. Returns false, having launched nothing, when the driver path is unavailable
/// or refuses the launch.
template <typename... KernelArgs, typename... Args>
bool driver_launch(void (*)(KernelArgs...), CUfunction function, dim3 grid, dim3 block, std::size_t smem,
                   cudaStream_t stream, bool pdl, bool cooperative, unsigned cluster, Args&&... args) {
  const LaunchKernelExFn launch = driver_launch_kernel_ex();
  if (launch == nullptr || function == nullptr) return false;
  CUlaunchConfig config{};
  config.gridDimX = grid.x;
  config.gridDimY = grid.y;
  config.gridDimZ = grid.z;
  config.blockDimX = block.x;
  config.blockDimY = block.y;
  config.blockDimZ = block.z;
  config.sharedMemBytes = static_cast<unsigned>(smem);
  config.hStream = stream;
  CUlaunchAttribute attribute[kMaxLaunchAttributes];
  const unsigned count = fill_launch_attributes(attribute, &CUlaunchAttribute::value,
                                                CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
                                                CU_LAUNCH_ATTRIBUTE_COOPERATIVE, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, pdl,
                                                cooperative, cluster);
  config.attrs = count > 0 ? attribute : nullptr;
  config.numAttrs = count;
  return [&](KernelArgs... converted) {
    void* params[sizeof...(KernelArgs) + 1] = {static_cast<void*>(&converted)...};
    return launch(&config, function, params, nullptr) == CUDA_SUCCESS;
  }(std::forward<Args>(args)...);
}

}  // namespace mllm_kernel::host::detail
