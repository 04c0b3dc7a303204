"""Compile-only checks for the CUDA quantization and KV-cache kernels (no GPU needed; runs in CI
where nvcc exists): builds every module variant through the normal JIT path and checks each
exports its ops."""

from __future__ import annotations

import pytest
import torch

from mllm_kernel.jit_utils import toolchain
from mllm_kernel.jit_utils.errors import ToolchainNotFoundError


def _nvcc_or_none():
    try:
        return toolchain.find_nvcc()
    except ToolchainNotFoundError:
        return None


pytestmark = pytest.mark.skipif(_nvcc_or_none() is None, reason="nvcc not found")

QUANT_OPS = {
    "per_group": ["per_token_group_quant_fp8", "per_token_group_quant_int8"],
    "per_token": ["per_token_quant_fp8", "per_token_quant_int8"],
    "per_tensor": ["per_tensor_quant_fp8"],
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16],
                         ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("family", list(QUANT_OPS))
def test_quant_module_builds(family, dtype):
    from mllm_kernel.cuda.jit import quant

    assert set(quant._KERNELS) == set(QUANT_OPS)
    assert set(quant._KERNELS[family]) == {torch.float32, torch.float16, torch.bfloat16}
    module = quant._KERNELS[family][dtype].module("cuda")
    for name in QUANT_OPS[family]:
        assert callable(getattr(module, name)), f"quant_{family}[{dtype}] does not export {name}"


def test_kv_cache_module_builds():
    from mllm_kernel.cuda.jit import kv_cache

    module = kv_cache._kv_cache_module.module("cuda")
    assert callable(module.store_kv_cache)
    assert callable(module.store_kv_cache__fp8)
