// CUDA essentials in one include, for host launchers and device code alike: the host ones
// (utils.hpp), function attributes (host_device.hpp), element types (type.cuh), warp constants
// (warp.cuh), programmatic dependent launch (pdl.cuh), CUDA error checks (cuda_check.cuh) and
// `LaunchKernel` (launch.cuh).
#pragma once

#include <mllm_kernel/cuda_check.cuh>
#include <mllm_kernel/host_device.hpp>
#include <mllm_kernel/launch.cuh>
#include <mllm_kernel/pdl.cuh>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/utils.hpp>
#include <mllm_kernel/warp.cuh>
