// Function attributes: MLLM_HOST_DEVICE for code that both nvcc (host and device) and a plain
// C++ compiler build, such as the arithmetic the kernels share with host-side unit tests;
// MLLM_DEVICE for device-only code (under nvcc only).
#pragma once

#if defined(__CUDACC__)
/// Callable from host and device, always inlined.
#define MLLM_HOST_DEVICE __host__ __device__ __forceinline__
/// Runs on the device only, always inlined.
#define MLLM_DEVICE __device__ __forceinline__
#else
#define MLLM_HOST_DEVICE inline
#endif
