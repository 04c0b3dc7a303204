"""Ops called with NumPy (CPU), CuPy and JAX (CUDA) arrays through DLPack."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from conftest import requires_cuda
from mllm_kernel import ops

np = pytest.importorskip("numpy", reason="NumPy is not installed")


def _rms_ref(x, w, eps=1e-6):
    x64 = np.asarray(x, dtype=np.float64)
    return x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + eps) * np.asarray(w, dtype=np.float64)


def test_numpy_in_numpy_out():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((5, 257), dtype=np.float32), rng.standard_normal(257, dtype=np.float32)
    y = ops.rmsnorm(x, w)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == x.shape
    np.testing.assert_allclose(y, _rms_ref(x, w), rtol=1e-5, atol=1e-5)
    q, s = ops.per_token_quant_int8(x)
    assert isinstance(q, np.ndarray) and q.dtype == np.int8 and s.shape == (5, 1)
    np.testing.assert_allclose(s[:, 0], np.abs(x).max(-1) / 127, rtol=1e-6)


def test_numpy_in_place_ops_write_the_arrays():
    rng = np.random.default_rng(1)
    x, r = rng.standard_normal((3, 128), dtype=np.float32), rng.standard_normal((3, 128), dtype=np.float32)
    w = rng.standard_normal(128, dtype=np.float32)
    expected_residual = x + r
    expected = _rms_ref(expected_residual, w)
    assert ops.fused_add_rmsnorm(x, r, w) is None
    np.testing.assert_allclose(r, expected_residual, rtol=1e-6)
    np.testing.assert_allclose(x, expected, rtol=1e-5, atol=1e-5)


def test_mixed_frameworks_are_refused():
    x = np.ones((2, 64), dtype=np.float32)
    with pytest.raises(TypeError, match="arrays of several frameworks"):
        ops.rmsnorm(x, _FakeArray())


class _FakeArray:
    """An object that speaks DLPack but belongs to no known framework."""

    def __dlpack__(self, **kwargs):
        return torch.ones(64).__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return torch.ones(64).__dlpack_device__()


@requires_cuda
@pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="CuPy is not installed")
def test_cupy_in_cupy_out():
    import cupy as cp

    x = cp.random.standard_normal((4, 4096), dtype=cp.float32)
    w = cp.random.standard_normal(4096, dtype=cp.float32)
    y = ops.rmsnorm(x, w)
    assert isinstance(y, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(y), _rms_ref(cp.asnumpy(x), cp.asnumpy(w)), rtol=1e-4, atol=1e-4)
    gate_up = cp.random.standard_normal((3, 2 * 512), dtype=cp.float32)
    h = ops.silu_and_mul(gate_up)
    g, u = cp.asnumpy(gate_up[:, :512]).astype(np.float64), cp.asnumpy(gate_up[:, 512:]).astype(np.float64)
    np.testing.assert_allclose(cp.asnumpy(h), g / (1 + np.exp(-g)) * u, rtol=1e-4, atol=1e-4)


@requires_cuda
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is not installed")
def test_jax_in_jax_out_and_in_place_refused():
    import jax
    import jax.numpy as jnp

    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        pytest.skip("JAX sees no GPU")
    key = jax.random.PRNGKey(0)
    x = jax.device_put(jax.random.normal(key, (4, 1024), dtype=jnp.float32), gpus[0])
    w = jax.device_put(jax.random.normal(jax.random.PRNGKey(1), (1024,), dtype=jnp.float32), gpus[0])
    y = ops.rmsnorm(x, w)
    assert isinstance(y, jax.Array)
    np.testing.assert_allclose(np.asarray(y), _rms_ref(np.asarray(x), np.asarray(w)), rtol=1e-4, atol=1e-4)
    with pytest.raises(TypeError, match="JAX arrays are immutable"):
        ops.fused_add_rmsnorm(x, x, w)
