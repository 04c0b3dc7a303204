// CUDA runtime queries used to size launches, each cached per device for the process.
#pragma once

#include <mllm_kernel/once_table.hpp>
#include <mllm_kernel/utils.cuh>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mllm_kernel::host::runtime {

namespace detail {
inline int current_device() {
  int device = 0;
  RuntimeDeviceCheck(cudaGetDevice(&device));
  return device;
}
}  // namespace detail

/// Number of streaming multiprocessors of `device_id` (the current device by default).
inline int get_sm_count(int device_id = detail::current_device()) {
  static constinit host::detail::DeviceAttributeCache cache;
  return host::detail::cached_device_attribute(cudaDevAttrMultiProcessorCount, device_id, cache);
}

/// Major compute capability (9 on an H100).
inline int get_cc_major(int device_id = detail::current_device()) {
  return host::detail::compute_capability_major(device_id);
}

/// The virtual architecture (90 for compute_90) of the code `kernel` runs on `device_id`; 0 when
/// unknown. Below 90 the kernel has no PDL waits or cluster code, whatever the GPU.
template <typename... Args>
int get_kernel_virtual_arch(void (*kernel)(Args...), int device_id) {
  host::detail::DeviceGuard guard(device_id);
  return host::detail::kernel_virtual_arch(reinterpret_cast<const void*>(kernel), device_id);
}

/// The CUDA runtime version, e.g. 13000 for 13.0.
inline int get_runtime_version() {
  static const int version = [] {
    int v = 0;
    RuntimeDeviceCheck(cudaRuntimeGetVersion(&v));
    return v;
  }();
  return version;
}

/// Dynamic shared memory a block may opt into on `device_id`, in bytes.
inline int get_available_dynamic_smem_per_block(int device_id = detail::current_device()) {
  static constinit host::detail::DeviceAttributeCache cache;
  return host::detail::cached_device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, device_id, cache);
}

/// Shared memory of one SM on `device_id`, in bytes (228 KB on an H100).
inline int get_smem_per_sm(int device_id = detail::current_device()) {
  static constinit host::detail::DeviceAttributeCache cache;
  return host::detail::cached_device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor, device_id, cache);
}

/// Shared memory the system reserves for each resident block on `device_id`, in bytes.
inline int get_reserved_smem_per_block(int device_id = detail::current_device()) {
  static constinit host::detail::DeviceAttributeCache cache;
  return host::detail::cached_device_attribute(cudaDevAttrReservedSharedMemoryPerBlock, device_id, cache);
}

/// Resident blocks of `kernel` per SM for a block size and dynamic shared memory on the
/// current device; the answer is cached per (kernel, device, block size, smem).
template <typename... KernelArgs>
inline int get_blocks_per_sm(void (*kernel)(KernelArgs...), int block_size, std::size_t dynamic_smem = 0) {
  struct Key {
    const void* kernel;
    int device;
    int block_size;
    std::size_t smem;
    bool operator==(const Key&) const = default;
  };
  static host::detail::OnceTable<Key, int, 256> table;
  const Key key{reinterpret_cast<const void*>(kernel), detail::current_device(), block_size, dynamic_smem};
  const std::size_t hash = (reinterpret_cast<std::uintptr_t>(key.kernel) >> 4) ^
                           (static_cast<std::size_t>(key.device) * 0x9e3779b97f4a7c15ULL) ^
                           (static_cast<std::size_t>(block_size) << 20) ^ (dynamic_smem << 7);
  int blocks = 0;
  table.get(key, hash, blocks, [&](int& computed) {
    RuntimeDeviceCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&computed, kernel, block_size, dynamic_smem));
    return true;
  });
  return blocks;
}

/// Clusters of `cluster` blocks of `kernel` (block_size threads, dynamic_smem bytes, which it may
/// use past 48 KB) that the current device runs at once: a cluster's blocks share a GPC, so this
/// can be fewer than its SMs' blocks / cluster. Not cached: the callers cache per plan.
template <typename... KernelArgs>
inline int get_max_active_clusters(void (*kernel)(KernelArgs...), int block_size, std::size_t dynamic_smem,
                                   unsigned cluster) {
  if (dynamic_smem > 48 * 1024) {
    RuntimeDeviceCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(dynamic_smem)));
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(cluster);
  config.blockDim = dim3(static_cast<unsigned>(block_size));
  config.dynamicSmemBytes = dynamic_smem;
  cudaLaunchAttribute attributes[host::detail::kMaxLaunchAttributes];
  config.numAttrs = host::detail::fill_launch_attributes(
      attributes, &cudaLaunchAttribute::val, cudaLaunchAttributeProgrammaticStreamSerialization,
      cudaLaunchAttributeCooperative, cudaLaunchAttributeClusterDimension, false, false, cluster);
  config.attrs = attributes;
  int clusters = 0;
  RuntimeDeviceCheck(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
  return clusters;
}

}  // namespace mllm_kernel::host::runtime
