"""The ``@jit`` decorator: a Python function that receives its compiled module first."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable, Sequence

from mllm_kernel.jit_utils.compile import Wrappers, load_cpu_jit, load_cuda_jit
from mllm_kernel.jit_utils.registry import KernelRecord, register

_DEVICES = ("auto", "cpu", "cuda")


def _tensor_device_types(values) -> set[str]:
    import torch

    found: set[str] = set()
    for v in values:
        if isinstance(v, torch.Tensor):
            found.add(str(v.device))
        elif isinstance(v, (list, tuple)):
            found |= _tensor_device_types(v)
    return found


class JitKernel:
    """A decorated kernel: compiles its module on first call (per device) and then calls the
    wrapped function as ``fn(module, *args, **kwargs)``."""

    def __init__(self, fn: Callable, *, name: str, args: tuple[str, ...], device: str, build: dict) -> None:
        if device not in _DEVICES:
            raise ValueError(f"jit: device must be one of {_DEVICES}, got {device!r}")
        self.fn = fn
        self.name = name
        self.args = args
        self.device = device
        self._build = build
        self._modules: dict[str, Any] = {}
        devices = ("cpu", "cuda") if device == "auto" else (device,)
        devices = tuple(d for d in devices if self._has_sources(d))
        if not devices:
            raise ValueError(f"jit({name!r}): no sources for device {device!r}")
        self.devices = devices
        files = [*(build.get("cpp_files") or ()), *(build.get("cuda_files") or ())]
        register(KernelRecord(name, devices, args, tuple(str(f) for f in files), kernel=self))
        functools.update_wrapper(self, fn)

    def _has_sources(self, device: str) -> bool:
        key = "cpp_files" if device == "cpu" else "cuda_files"
        return bool(self._build.get(key))

    def module(self, device: str):
        """The compiled module for ``device`` ("cpu" or "cuda"), built on first use."""
        module = self._modules.get(device)
        if module is not None:
            return module
        b = self._build
        if device not in self.devices:
            raise ValueError(f"{self.name}: no {device} sources (this kernel runs on {', '.join(self.devices)})")
        if device == "cpu":
            module = load_cpu_jit(self.name, *self.args, cpp_files=b["cpp_files"], cpp_wrappers=b["cpp_wrappers"],
                                  extra_cflags=b["extra_cflags"], extra_ldflags=b["extra_ldflags"],
                                  extra_include_paths=b["extra_include_paths"])
        else:
            with_cpp = self.device == "cuda"  # "auto" kernels keep their C++ files for the CPU module
            module = load_cuda_jit(self.name, *self.args, cuda_files=b["cuda_files"], cuda_wrappers=b["cuda_wrappers"],
                                   cpp_files=b["cpp_files"] if with_cpp else None,
                                   cpp_wrappers=b["cpp_wrappers"] if with_cpp else None,
                                   extra_cflags=b["extra_cflags"], extra_cuda_cflags=b["extra_cuda_cflags"],
                                   extra_ldflags=b["extra_ldflags"], extra_include_paths=b["extra_include_paths"])
        self._modules[device] = module
        return module

    def resolve_device(self, args: tuple, kwargs: dict) -> str:
        if self.device != "auto":
            return self.device
        found = _tensor_device_types(list(args) + list(kwargs.values()))
        kinds = {d.split(":")[0] for d in found}
        if not kinds:
            raise ValueError(f"{self.name}: device='auto' needs at least one tensor argument")
        if len(found) > 1:
            raise ValueError(f"{self.name}: tensors must be on one device, got {', '.join(sorted(found))}")
        kind = kinds.pop()
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"{self.name}: unsupported device {kind!r}")
        return kind

    def __call__(self, *args, **kwargs):
        return self.fn(self.module(self.resolve_device(args, kwargs)), *args, **kwargs)


def jit(
    *,
    args: object | Sequence[object] = (),
    device: str = "auto",
    cpp_files: Sequence[str | Path] | None = None,
    cuda_files: Sequence[str | Path] | None = None,
    cpp_wrappers: Wrappers | None = None,
    cuda_wrappers: Wrappers | None = None,
    func_name: str | None = None,
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str | Path] | None = None,
) -> Callable[[Callable], JitKernel]:
    """Decorates ``fn(compiled_module, *args, **kwargs)`` into a kernel that compiles on first
    call and is recorded in the registry.

    ``args`` (a value or a list) name the variant, ``device`` is "cpu", "cuda" or "auto" (the
    device of the tensor arguments; mixed devices are an error). A "cpu" module is built from
    ``cpp_files``/``cpp_wrappers``; a "cuda" module from ``cuda_files``/``cuda_wrappers`` plus
    any ``cpp_files``; under "auto" the C++ files serve the CPU module only.
    """
    variant = tuple(str(a) for a in (args if isinstance(args, (list, tuple)) else [args]))
    build = dict(cpp_files=list(cpp_files or ()), cuda_files=list(cuda_files or ()),
                 cpp_wrappers=list(cpp_wrappers or ()), cuda_wrappers=list(cuda_wrappers or ()),
                 extra_cflags=extra_cflags, extra_cuda_cflags=extra_cuda_cflags, extra_ldflags=extra_ldflags,
                 extra_include_paths=extra_include_paths)

    def decorate(fn: Callable) -> JitKernel:
        return JitKernel(fn, name=func_name or fn.__name__, args=variant, device=device, build=build)

    return decorate
