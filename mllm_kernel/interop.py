"""Calling the ops with arrays of other frameworks (NumPy, CuPy, JAX) through DLPack.

``accepts_dlpack_arrays`` wraps an op of ``mllm_kernel.ops``: torch tensors go straight through
(one isinstance check); an array of another framework is viewed as a torch tensor without a
copy (``torch.from_dlpack``), the op runs, and tensors it returns come back as arrays of the
caller's framework. In-place ops write into NumPy and CuPy arrays' memory; JAX arrays are
immutable, so in-place ops refuse them.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any, Callable

import torch

_FRAMEWORK_IMPORTS = {"numpy": "numpy", "cupy": "cupy", "jax": "jax.dlpack", "jaxlib": "jax.dlpack"}


def _framework(value: Any) -> str | None:
    """"numpy", "cupy", "jax" for an array of that framework, else None."""
    if isinstance(value, torch.Tensor) or not hasattr(value, "__dlpack__"):
        return None
    root = type(value).__module__.split(".")[0]
    return "jax" if root == "jaxlib" else root if root in _FRAMEWORK_IMPORTS else "dlpack"


def _to_torch(value: Any) -> Any:
    return torch.from_dlpack(value) if _framework(value) else value


def _from_torch(value: Any, framework: str) -> Any:
    if isinstance(value, tuple):
        return tuple(_from_torch(v, framework) for v in value)
    if not isinstance(value, torch.Tensor):
        return value
    module = importlib.import_module(_FRAMEWORK_IMPORTS.get(framework, "numpy"))
    try:
        return module.from_dlpack(value)
    except (TypeError, BufferError, RuntimeError) as error:
        raise TypeError(f"cannot return a {value.dtype} result as a {framework} array through DLPack "
                        f"({error}); call the op with torch tensors instead") from None


def accepts_dlpack_arrays(mutates: tuple[str, ...] = ()) -> Callable[[Callable], Callable]:
    """Lets ``op`` take NumPy/CuPy/JAX arrays and return the same framework's arrays.
    ``mutates`` names the arguments an in-place op writes (refused for JAX arrays)."""

    def decorate(op: Callable) -> Callable:
        @functools.wraps(op)
        def wrapper(*args, **kwargs):
            if isinstance(args[0] if args else None, torch.Tensor):
                return op(*args, **kwargs)
            frameworks = {f for f in map(_framework, (*args, *kwargs.values())) if f}
            if not frameworks:
                return op(*args, **kwargs)
            if len(frameworks) > 1:
                raise TypeError(f"{op.__name__}: arrays of several frameworks in one call: {sorted(frameworks)}")
            framework = frameworks.pop()
            if framework == "jax" and mutates:
                raise TypeError(f"{op.__name__}: writes {', '.join(mutates)} in place, and JAX arrays are "
                                "immutable; pass torch tensors (or NumPy/CuPy arrays)")
            result = op(*map(_to_torch, args), **{k: _to_torch(v) for k, v in kwargs.items()})
            return _from_torch(result, framework)

        return wrapper

    return decorate
