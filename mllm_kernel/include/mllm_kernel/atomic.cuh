// Atomic float maximum on global or shared memory, correct for negative values too, and an
// integer add with acquire-release ordering and a load with acquire for counting finished blocks.
//
//   atomic::max(&amax[0], fabsf(x));
//
// IEEE floats of the same sign order like their bit patterns: non-negative floats like signed
// integers (atomicMax on int) and negative floats in reverse like unsigned integers (atomicMin
// on unsigned). -0.0 counts as below +0.0. The result with NaN operands is unspecified.
#pragma once

#include <mllm_kernel/utils.cuh>

namespace mllm_kernel::device::atomic {

/// *addr = max(*addr, value), atomically; returns the old value.
MLLM_DEVICE float max(float* addr, float value) {
  if (!signbit(value)) {
    return __int_as_float(atomicMax(reinterpret_cast<int*>(addr), __float_as_int(value)));
  }
  return __uint_as_float(atomicMin(reinterpret_cast<unsigned int*>(addr), __float_as_uint(value)));
}

/// *addr += value with acquire and release semantics at GPU scope; returns the old value. A
/// block's counter of finished work: after a __syncthreads, one thread's add releases what the
/// whole block wrote before the barrier, and acquires what the blocks that added before wrote.
MLLM_DEVICE int add_acq_rel(int* addr, int value) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;" : "=r"(old) : "l"(addr), "r"(value) : "memory");
  return old;
}

/// *addr, read with acquire semantics at GPU scope: what was released before the value was
/// written is visible after it (a spin on another block's counter).
MLLM_DEVICE int load_acquire(const int* addr) {
  int value;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(value) : "l"(addr) : "memory");
  return value;
}

}  // namespace mllm_kernel::device::atomic
