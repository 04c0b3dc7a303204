// CUDA repacking of GPTQ and AWQ checkpoint weights into Marlin's tile layout
// (mllm_kernel/marlin.hpp has the layout):
//   gptq_marlin_repack<bits>(b_q_weight [K * bits / 32, N], perm [K] or [0], out)
//   awq_marlin_repack<bits>(b_q_weight [K, N * bits / 32], out)
// A one-off preparation step: each thread gathers the values of one output word.
#pragma once

#include <mllm_kernel/marlin.hpp>
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>

#include <dlpack/dlpack.h>
#include <mllm_kernel/tensor_view.hpp>

#include <cstdint>

namespace {

using mllm_kernel::host::MarlinRepackParams;

constexpr int kRepackThreads = 256;

__global__ void __launch_bounds__(kRepackThreads) marlin_repack_kernel(const MarlinRepackParams p) {
  const std::int64_t row_words = p.n * mllm_kernel::marlin::kTileK * p.bits / 32;
  const std::int64_t total = p.k / mllm_kernel::marlin::kTileK * row_words;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    p.out[i] = mllm_kernel::host::marlin_repacked_word(p, i / row_words, i % row_words);
  }
}

void launch_repack(const MarlinRepackParams& p, DLDevice device) {
  using namespace mllm_kernel::host;
  const std::int64_t words = p.k / mllm_kernel::marlin::kTileK * p.n * mllm_kernel::marlin::kTileK * p.bits / 32;
  const std::int64_t blocks = mllm_kernel::host::min_of<std::int64_t>(div_ceil(words, kRepackThreads), 65536);
  LaunchKernel(static_cast<unsigned>(blocks), kRepackThreads, device)(marlin_repack_kernel, p);
}

void gptq_marlin_repack(mllm_kernel::TensorView b_q_weight, mllm_kernel::TensorView perm, mllm_kernel::TensorView out,
                        std::int64_t size_k, std::int64_t size_n, std::int64_t num_bits) {
  const MarlinRepackParams p =
      mllm_kernel::host::check_marlin_repack<kDLCUDA>(b_q_weight, &perm, out, size_k, size_n, num_bits, false);
  launch_repack(p, out.device());
}

void awq_marlin_repack(mllm_kernel::TensorView b_q_weight, mllm_kernel::TensorView out, std::int64_t size_k,
                       std::int64_t size_n, std::int64_t num_bits) {
  const MarlinRepackParams p =
      mllm_kernel::host::check_marlin_repack<kDLCUDA>(b_q_weight, nullptr, out, size_k, size_n, num_bits, true);
  launch_repack(p, out.device());
}

}  // namespace
