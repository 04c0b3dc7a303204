// Host-side essentials in one include: checked errors (errors.hpp), integer helpers
// (integer.hpp) and the DLPack dtypes and devices (dtype.hpp, dl_device.hpp).
#pragma once

#include <mllm_kernel/dl_device.hpp>
#include <mllm_kernel/dtype.hpp>
#include <mllm_kernel/errors.hpp>
#include <mllm_kernel/integer.hpp>
