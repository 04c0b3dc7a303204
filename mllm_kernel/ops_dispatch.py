"""Finding the kernel of an op for a tensor's device, shared by ``ops`` and ``custom_ops``."""

from __future__ import annotations

import importlib
from types import ModuleType

import torch

_PACKAGES = {"cpu": "mllm_kernel.cpu.jit", "cuda": "mllm_kernel.cuda.jit"}
_loaded: dict[str, ModuleType] = {}


def kernel_for(op: str, tensor: torch.Tensor):
    """The ``op`` function of the kernel package for ``tensor``'s device; ValueError for a device
    with no kernels, NotImplementedError for an op that has none on that device yet."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{op}: expected a torch.Tensor, got {type(tensor).__name__}")
    device = tensor.device.type
    package = _loaded.get(device)
    if package is None:
        if device not in _PACKAGES:
            raise ValueError(f"{op}: no kernels for device {tensor.device} (supported: cpu, cuda)")
        package = _loaded[device] = importlib.import_module(_PACKAGES[device])
    fn = getattr(package, op, None)
    if fn is None:
        raise NotImplementedError(f"{op}: mllm-kernel has no {device} kernel for this op yet")
    return fn


def reject_grad(op: str, *tensors: torch.Tensor) -> None:
    """The kernels have no backward: refuse inputs that would need one, while grad mode is on."""
    if torch.is_grad_enabled():
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.requires_grad:
                raise RuntimeError(f"{op}: mllm-kernel ops do not support autograd, and an input requires grad; "
                                   "run under torch.no_grad() or torch.inference_mode(), or detach it")
