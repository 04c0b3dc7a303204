"""The ``@jit`` decorator: a Python function that receives its compiled module first.

For a quick kernel of one's own; the library's wrappers declare their modules with
``jit_module`` and look functions up through a ``KernelTable`` (docs/adding_a_kernel.md).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Callable, Sequence

from mllm_kernel.jit_utils.load import Wrappers
from mllm_kernel.jit_utils.module import JitModule, _build_spec, _variant


def _tensor_device_types(values) -> set[str]:
    import torch

    found: set[str] = set()
    for v in values:
        if isinstance(v, torch.Tensor):
            found.add(str(v.device))
        elif isinstance(v, (list, tuple)):
            found |= _tensor_device_types(v)
    return found


class JitKernel(JitModule):
    """A decorated kernel: compiles its module on first call (per device) and then calls the
    wrapped function as ``fn(module, *args, **kwargs)``."""

    def __init__(self, fn: Callable, *, name: str, args: tuple[str, ...], device: str, build: dict) -> None:
        super().__init__(name, args, device, build)
        self.fn = fn
        functools.update_wrapper(self, fn)

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
    build = _build_spec(cpp_files, cuda_files, cpp_wrappers, cuda_wrappers, extra_cflags, extra_cuda_cflags,
                        extra_ldflags, extra_include_paths, cuda_archs=None, cutlass=False)

    def decorate(fn: Callable) -> JitKernel:
        return JitKernel(fn, name=func_name or fn.__name__, args=_variant(args), device=device, build=build)

    return decorate
