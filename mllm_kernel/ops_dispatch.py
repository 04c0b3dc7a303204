"""Finding the kernel of an op for a tensor's device, shared by ``ops`` and ``custom_ops``."""

from __future__ import annotations

import importlib
from types import ModuleType

import torch

_PACKAGES = {"cpu": "mllm_kernel.cpu.jit", "cuda": "mllm_kernel.cuda.jit"}
_loaded: dict[str, ModuleType] = {}


_resolved: dict[tuple[str, bool], object] = {}


def kernel_for(op: str, tensor: torch.Tensor):
    """The ``op`` function of the kernel package for ``tensor``'s device; ValueError for a device
    with no kernels, NotImplementedError for an op that has none on that device yet."""
    # Hot path: two cheap tensor properties and a dict lookup (tensor.device builds an object).
    try:
        is_cuda = tensor.is_cuda
        if is_cuda or tensor.is_cpu:
            return _resolved[(op, is_cuda)]
    except AttributeError:
        raise TypeError(f"{op}: expected a torch.Tensor, got {type(tensor).__name__}") from None
    except KeyError:
        pass
    device = tensor.device.type
    package = _loaded.get(device)
    if package is None:
        if device not in _PACKAGES:
            raise ValueError(f"{op}: no kernels for device {tensor.device} (supported: cpu, cuda)")
        package = _loaded[device] = importlib.import_module(_PACKAGES[device])
    fn = getattr(package, op, None)
    if fn is None:
        raise NotImplementedError(f"{op}: mllm-kernel has no {device} kernel for this op yet")
    _resolved[(op, device == "cuda")] = fn
    return fn


def refuse_grad(op: str) -> None:
    """The kernels have no backward: the error for an input that requires grad in grad mode."""
    raise RuntimeError(f"{op}: mllm-kernel ops do not support autograd, and an input requires grad; "
                       "run under torch.no_grad() or torch.inference_mode(), or detach it")
