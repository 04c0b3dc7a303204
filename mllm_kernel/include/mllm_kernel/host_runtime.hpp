// The host runtime: the library code every kernel's host side shares (TensorMatcher's checks,
// error messages, dtype and device names), compiled once per toolchain into a shared library
// that every JIT module links (`mllm_kernel/csrc/host_runtime.cpp`), instead of into each
// module. Its functions are declared in the headers that own them with MLLM_KERNEL_HOST_API,
// which keeps them visible across the modules' hidden-by-default symbols.
#pragma once

#if defined(_WIN32)
#define MLLM_KERNEL_HOST_API
#else
#define MLLM_KERNEL_HOST_API __attribute__((visibility("default")))
#endif
