// Atomic float maximum on global or shared memory, correct for negative values too.
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

}  // namespace mllm_kernel::device::atomic
