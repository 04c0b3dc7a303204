// Thread block clusters (sm_90+), the two operations a kernel here needs, in PTX rather than
// through <cooperative_groups.h>, whose headers (the whole cuda::atomic library) take more time
// to compile than many kernels do:
//
//   cluster::sync();                                   // every thread of every block of the cluster
//   float v = cluster::load_shared(&slot, rank);       // `slot` (shared memory) of block `rank`
//   float4 q = cluster::load_shared4(cluster::map_shared(&slots[i], rank));  // 16 bytes of it
//
// They compile to nothing below sm_90, where a kernel launched without clusters must not call
// them.
#pragma once

#include <mllm_kernel/host_device.hpp>

#include <cstdint>

namespace mllm_kernel::device::cluster {

/// A barrier across the cluster: each thread's earlier writes, shared memory included, are
/// visible to every thread of the cluster after it (release on arrival, acquire on waiting).
MLLM_DEVICE void sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
#endif
}

/// The address of `local` (in this block's shared memory) in the shared memory of the cluster's
/// block `rank`, for load_shared4.
MLLM_DEVICE std::uint32_t map_shared(const void* local, unsigned rank) {
  std::uint32_t remote = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(local));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(address), "r"(rank));
#endif
  return remote;
}

/// The 16 bytes at `remote` (from map_shared; 16-byte aligned) as four floats.
MLLM_DEVICE float4 load_shared4(std::uint32_t remote) {
  float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(value.x), "=f"(value.y), "=f"(value.z), "=f"(value.w)
               : "r"(remote)
               : "memory");
#endif
  return value;
}

/// The float at `local` (an address in this block's shared memory) in the shared memory of the
/// cluster's block `rank` (distributed shared memory).
MLLM_DEVICE float load_shared(const float* local, unsigned rank) {
  float value = 0.0f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(value) : "r"(map_shared(local, rank)) : "memory");
#endif
  return value;
}

}  // namespace mllm_kernel::device::cluster
