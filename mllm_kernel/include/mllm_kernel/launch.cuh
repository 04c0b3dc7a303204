// Kernel launches on the stream PyTorch is using: `LaunchKernel`, with the device switch
// (`DeviceGuard`) and the device attributes a launch checks, each queried once per device.
#pragma once

#include <mllm_kernel/cuda_check.cuh>
#include <mllm_kernel/driver_launch.cuh>
#include <mllm_kernel/errors.hpp>
#include <mllm_kernel/host_atomic.hpp>
#include <mllm_kernel/source_location.hpp>

#include <cuda_runtime.h>
#include <dlpack/dlpack.h>
#include <tvm/ffi/extra/c_env_api.h>

#include <cstddef>
#include <utility>

namespace mllm_kernel::host {

namespace detail {

inline constexpr int kMaxDevices = 64;

/// One device attribute's value on each device, -1 until queried (read and written atomically).
struct DeviceAttributeCache {
  int values[kMaxDevices];
  constexpr DeviceAttributeCache() : values() {
    for (int& v : values) v = -1;
  }
};

/// A device attribute, queried once per device and process.
inline int cached_device_attribute(cudaDeviceAttr attr, int device_id, DeviceAttributeCache& cache) {
  RuntimeCheck(device_id >= 0 && device_id < kMaxDevices, "device id ", device_id, " out of range");
  int value = load_relaxed(cache.values[device_id]);
  if (value < 0) {
    RuntimeDeviceCheck(cudaDeviceGetAttribute(&value, attr, device_id));
    store_relaxed(cache.values[device_id], value);
  }
  return value;
}

inline int compute_capability_major(int device_id) {
  static constinit DeviceAttributeCache cache;
  return cached_device_attribute(cudaDevAttrComputeCapabilityMajor, device_id, cache);
}

/// Makes `device_id` current for the launch and restores the caller's device after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device_id) {
    RuntimeDeviceCheck(cudaGetDevice(&previous_));
    if (previous_ != device_id) RuntimeDeviceCheck(cudaSetDevice(device_id));
    target_ = device_id;
  }
  ~DeviceGuard() {
    if (previous_ != target_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  int target_ = 0;
};

}  // namespace detail

/// Launches a kernel on the caller's current stream and checks the launch:
///
///   LaunchKernel(grid, block, device)(kernel, args...);
///   LaunchKernel(grid, block, device, dynamic_smem).enable_pdl(true)(kernel, args...);
///
/// With a DLDevice, the stream is the one tvm-ffi's environment holds for that device, which
/// is PyTorch's current stream when the op was called with torch tensors. Dynamic shared
/// memory above 48 KB raises the kernel's limit first. `enable_pdl(true)` launches with
/// programmatic stream serialization on sm_90 and newer (ignored below). `enable_cooperative()`
/// makes it a cooperative launch: every block resident at once (a grid barrier such as
/// grid_barrier.cuh's is then safe), or the launch fails with an error.
/// `cluster_blocks(n)` groups every n consecutive blocks along x into a thread block cluster
/// (sm_90+, a ValueError below; n up to 8 on every sm_90 GPU): a cluster's blocks run at once
/// and read each other's shared memory (cluster.cuh).
class LaunchKernel {
 public:
  LaunchKernel(dim3 grid, dim3 block, DLDevice device, std::size_t dynamic_smem = 0,
               source_location loc = source_location::current())
      : grid_(grid), block_(block), smem_(dynamic_smem), device_id_(device.device_id),
        stream_(resolve_device(device)), loc_(loc) {}
  LaunchKernel(dim3 grid, dim3 block, cudaStream_t stream, std::size_t dynamic_smem = 0,
               source_location loc = source_location::current())
      : grid_(grid), block_(block), smem_(dynamic_smem), device_id_(-1), stream_(stream), loc_(loc) {}

  /// The stream tvm-ffi's environment holds for `device` (PyTorch's current stream).
  static cudaStream_t resolve_device(DLDevice device) {
    return static_cast<cudaStream_t>(TVMFFIEnvGetStream(device.device_type, device.device_id));
  }

  /// Requests programmatic dependent launch (sm_90+); the kernel should call the PDL helpers.
  LaunchKernel& enable_pdl(bool enable = true) {
    pdl_ = enable;
    return *this;
  }

  /// Requests a cooperative launch (all blocks co-resident, checked by the driver).
  LaunchKernel& enable_cooperative(bool enable = true) {
    cooperative_ = enable;
    return *this;
  }

  /// Requests thread block clusters of `blocks` blocks along x (sm_90+; 1 means none).
  LaunchKernel& cluster_blocks(unsigned blocks) {
    cluster_ = blocks;
    return *this;
  }

  template <typename... KernelArgs, typename... Args>
  void operator()(void (*kernel)(KernelArgs...), Args&&... args) const {
    int device_id = device_id_;
    if (device_id < 0) RuntimeDeviceCheck(cudaGetDevice(&device_id), loc_);
    detail::DeviceGuard guard(device_id);
    // One table lookup gives the driver's function and the code's virtual architecture. PDL and
    // clusters need an sm_90+ device running code compiled for sm_90+ (a module built for older
    // targets only has its PDL waits compiled out: launched early, it would race).
    const void* symbol = reinterpret_cast<const void*>(kernel);
    int arch = 0;
    const CUfunction function = detail::kernel_function(symbol, device_id, &arch);
    const bool sm90 = detail::compute_capability_major(device_id) >= 9;
    if (function == nullptr && ((pdl_ && sm90) || cluster_ > 1)) arch = detail::compiled_virtual_arch(symbol);
    if (cluster_ > 1) {
      RuntimeCheck(sm90 && arch >= 90, "thread block clusters need an sm_90+ device and code compiled for it, got code for compute_",
                   arch);
    }
    if (smem_ > 48 * 1024) {
      check_and_clear(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem_)));
    }
    const bool pdl = pdl_ && sm90 && arch >= 90;
    // The driver path first (less host time); the runtime launch when it cannot launch.
    if (detail::driver_launch(kernel, function, grid_, block_, smem_, stream_, pdl, cooperative_, cluster_, args...)) {
      return;
    }
    cudaLaunchConfig_t config{};
    config.gridDim = grid_;
    config.blockDim = block_;
    config.dynamicSmemBytes = smem_;
    config.stream = stream_;
    cudaLaunchAttribute attribute[detail::kMaxLaunchAttributes];
    const unsigned count = detail::fill_launch_attributes(
        attribute, &cudaLaunchAttribute::val, cudaLaunchAttributeProgrammaticStreamSerialization,
        cudaLaunchAttributeCooperative, cudaLaunchAttributeClusterDimension, pdl, cooperative_, cluster_);
    config.attrs = count > 0 ? attribute : nullptr;
    config.numAttrs = count;
    check_and_clear(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
  }

 private:
  /// Raises on a failed call. A refused launch or attribute (too many blocks, too much shared
  /// memory) also sets the thread's last error: it is cleared so that the next launch check
  /// elsewhere (PyTorch's) does not report it again.
  void check_and_clear(cudaError_t status) const {
    if (status != cudaSuccess) (void)cudaGetLastError();
    RuntimeDeviceCheck(status, loc_);
  }

  dim3 grid_;
  dim3 block_;
  std::size_t smem_;
  int device_id_;
  cudaStream_t stream_;
  bool pdl_ = false;
  bool cooperative_ = false;
  unsigned cluster_ = 1;
  source_location loc_;
};

}  // namespace mllm_kernel::host
