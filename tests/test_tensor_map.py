"""TMA tensor maps made on the host (include/mllm_kernel/tensor_map.cuh): made where a GPU is,
and each failure a RuntimeError naming it. Compiled everywhere nvcc is; without a driver the
unavailable path is what runs."""

from __future__ import annotations

import pytest
import torch
from conftest import needs_nvcc

from mllm_kernel.jit_utils import load_cuda_jit

pytestmark = needs_nvcc

PROBE = """
#include <mllm_kernel/tensor_map.cuh>

#include <cstdint>

// The size of the tensor map of a bf16 [rows, cols] matrix at `address` (boxes of 128 x 64).
inline std::int64_t tensor_map_probe(std::int64_t address, std::int64_t rows, std::int64_t cols,
                                     std::int64_t row_stride) {
  const CUtensorMap map = mllm_kernel::host::row_tile_tensor_map<mllm_kernel::bf16_t>(
      reinterpret_cast<const void*>(address), rows, cols, row_stride, 128, 64);
  return static_cast<std::int64_t>(sizeof(map));
}
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    source = tmp_path_factory.mktemp("tensor_map") / "tensor_map_probe.cuh"
    source.write_text(PROBE)
    return load_cuda_jit("test_tensor_map_probe", cuda_files=[source],
                         cuda_wrappers=[("probe", "tensor_map_probe")]).probe


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU and its driver")
def test_made_and_refused_by_the_driver(probe):
    x = torch.empty(300, 128, dtype=torch.bfloat16, device="cuda")
    assert probe(x.data_ptr(), 300, 128, 128) == 128
    with pytest.raises(RuntimeError, match=r"cuTensorMapEncodeTiled failed \(error \d+\) for a \[300, 100\] matrix "
                                           r"with row stride 100"):
        probe(x.data_ptr(), 300, 100, 100)  # rows of 200 bytes: not a multiple of 16


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without a CUDA device")
def test_without_a_device_it_is_unavailable(probe):
    with pytest.raises(RuntimeError, match=r"cuTensorMapEncodeTiled is not available \(no CUDA driver or device\)"):
        probe(4096, 300, 128, 128)
