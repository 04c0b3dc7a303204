// Thread block clusters (sm_90+), the two operations a kernel here needs, in PTX rather than
// through <cooperative_groups.h>, whose headers (the whole cuda::atomic library) take more time
// to compile than many kernels do:
//
//   cluster::sync();                                   // every thread of every block of the cluster
//   float v = cluster::load_shared(&slot, rank);       // `slot` (shared memory) of block `rank`
//
// Both compile to nothing below sm_90, where a kernel launched without clusters must not call
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

/// The float at `local` (an address in this block's shared memory) in the shared memory of the
/// cluster's block `rank` (distributed shared memory).
MLLM_DEVICE float load_shared(const float* local, unsigned rank) {
  float value = 0.0f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(local));
  std::uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(address), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(value) : "r"(remote) : "memory");
#endif
  return value;
}

}  // namespace mllm_kernel::device::cluster
