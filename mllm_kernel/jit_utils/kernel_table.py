"""``KernelTable``: the compiled function of one op for each variant of its module.

Every kernel wrapper, CPU and CUDA, finds its function the same way: one dict lookup keyed by
the variant (usually the input's dtype), with the module built or loaded on the first miss::

    _MODULES = {dtype: jit_module("rmsnorm", args=make_cpp_args(dtype), device="cuda", ...)
                for dtype in FLOAT_DTYPES}
    _RMSNORM = KernelTable("rmsnorm", _MODULES, arg="input")

    def rmsnorm(input, weight, eps=1e-6, out=None):
        function = _RMSNORM[input.dtype]          # the hot path: one dict lookup
        ...

A table over a single module (one module serves every dtype; its C++ checks the dtype) accepts
any key and leaves the checking to the kernel.
"""

from __future__ import annotations

from typing import Callable, Hashable, Mapping

import torch

from mllm_kernel.jit_utils.module import JitModule


def _text(value: object) -> str:
    return str(value).removeprefix("torch.") if isinstance(value, torch.dtype) else repr(value)


class KernelTable(dict):
    """``op``'s function per variant key. ``modules`` maps each key to its ``JitModule``, or is
    one ``JitModule`` serving every key. ``arg`` names the argument the key comes from, for the
    message of an unsupported key; ``export`` is the function's name in the module (``op``
    unless given)."""

    def __init__(self, op: str, modules: Mapping[Hashable, JitModule] | JitModule, arg: str = "input",
                 export: str | None = None) -> None:
        super().__init__()
        self.op = op
        self.arg = arg
        self.export = export or op
        self._modules = modules

    def modules(self) -> list[JitModule]:
        """Every module this table may load (for ``precompile``)."""
        modules = self._modules
        return [modules] if isinstance(modules, JitModule) else list(dict.fromkeys(modules.values()))

    def __missing__(self, key: Hashable) -> Callable:
        modules = self._modules
        module = modules if isinstance(modules, JitModule) else modules.get(key)
        if module is None:
            supported = ", ".join(map(_text, modules))
            if isinstance(key, torch.dtype):
                raise ValueError(f"{self.op}: {self.arg}: dtype must be one of {supported}, got {_text(key)}")
            raise ValueError(f"{self.op}: {self.arg} must be one of {supported}, got {_text(key)}")
        function = getattr(module.load(), self.export)
        self[key] = function
        return function
