// Asynchronous global-to-shared copies (cp.async, sm_80+), for kernels that keep several tiles
// in flight: issue copies, commit them as a group, and wait until at most N groups are pending.
#pragma once

#include <mllm_kernel/host_device.hpp>

#include <cstdint>

namespace mllm_kernel::device {

/// Copies 16 bytes from global `src` to shared `dst` (both 16-byte aligned), bypassing L1.
MLLM_DEVICE void cp_async16(void* dst, const void* src) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(address), "l"(src));
}

/// As cp_async16, writing zeros instead when `valid` is false (src is then not read, but
/// must still be a valid address).
MLLM_DEVICE void cp_async16_or_zero(void* dst, const void* src, bool valid) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(address), "l"(src), "r"(valid ? 16 : 0));
}

/// As cp_async16 for data streamed once from memory (weights), under an L2 `policy`
/// (cache_hint.cuh's l2_evict_first()), with L2 fetching the 128-byte block around a miss: the
/// stream then takes the place of its own lines instead of what other blocks still read (the
/// activations, a next kernel's weights asked for ahead of its PDL wait; docs/tuning/marlin.md).
MLLM_DEVICE void cp_async16_stream(void* dst, const void* src, std::uint64_t policy) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::128B [%0], [%1], 16, %2;" ::"r"(address), "l"(src),
               "l"(policy));
}

/// cp_async16_stream writing zeros instead when `valid` is false (as cp_async16_or_zero).
MLLM_DEVICE void cp_async16_stream_or_zero(void* dst, const void* src, bool valid, std::uint64_t policy) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::128B [%0], [%1], 16, %2, %3;" ::"r"(address), "l"(src),
               "r"(valid ? 16 : 0), "l"(policy));
}

/// Copies 4 bytes from global `src` to shared `dst` (both 4-byte aligned), through L1.
MLLM_DEVICE void cp_async4(void* dst, const void* src) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(address), "l"(src));
}

/// Copies 8 bytes from global `src` to shared `dst` (both 8-byte aligned), through L1.
MLLM_DEVICE void cp_async8(void* dst, const void* src) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(address), "l"(src));
}

/// As cp_async16_or_zero, through L1: for data that other blocks on the SM read too.
MLLM_DEVICE void cp_async16_cached_or_zero(void* dst, const void* src, bool valid) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(address), "l"(src), "r"(valid ? 16 : 0));
}

/// Asks L2 to fetch the line that holds global `src`: only a hint, and nothing reaches the SM,
/// so it may come before a PDL wait even for data the previous kernel is writing (L2 is where
/// every SM's writes meet).
MLLM_DEVICE void prefetch_l2(const void* src) { asm volatile("prefetch.global.L2 [%0];" ::"l"(src)); }

MLLM_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;" ::); }

/// Waits until at most kPending committed groups are still in flight.
template <int kPending>
MLLM_DEVICE void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending));
}

}  // namespace mllm_kernel::device
