// The headers most CPU kernel modules parse before their own code, compiled once per toolchain
// and CPU target into a GCC precompiled header (jit_utils/cpu_pch.py) that a module's compile
// then reads instead (`-include`). Highway itself is not here: its per-target re-inclusion
// needs <hwy/highway.h> first in the kernel's own source. The SIMD intrinsics it includes are
// the larger part of its parse, and they are here.
#ifndef MLLM_KERNEL_CPU_PRECOMPILED_HPP_
#define MLLM_KERNEL_CPU_PRECOMPILED_HPP_

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#elif defined(__aarch64__) || defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include <mllm_kernel/cpu/thread_pool.hpp>
#include <mllm_kernel/integer.hpp>
#include <mllm_kernel/op_args.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/tensor_view.hpp>
#include <mllm_kernel/utils.hpp>

#endif  // MLLM_KERNEL_CPU_PRECOMPILED_HPP_
