"""Calling the ops with arrays of other frameworks (NumPy, CuPy, JAX) through DLPack.

Each op of ``mllm_kernel.ops`` checks that its first argument is a torch tensor (one isinstance
check on the hot path) and otherwise hands over to ``call_with_arrays``: arrays of another
framework are viewed as torch tensors without a copy (``torch.from_dlpack``), the op runs, and
tensors it returns come back as arrays of the caller's framework. In-place ops write into NumPy and CuPy arrays' memory; JAX arrays are
immutable, so in-place ops refuse them.
"""

from __future__ import annotations

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


def call_with_arrays(op: Callable, mutates: tuple[str, ...], **arguments: Any) -> Any:
    """Calls ``op`` (an op of ``mllm_kernel.ops`` whose first argument was not a torch tensor)
    with every NumPy/CuPy/JAX array viewed as a torch tensor, and returns its results as arrays
    of the caller's framework. ``mutates`` names the arguments an in-place op writes (refused for
    JAX arrays). Anything that is neither a tensor nor a DLPack array is a TypeError."""
    frameworks = {f for f in map(_framework, arguments.values()) if f}
    if not frameworks:
        first = next(iter(arguments.values()), None)
        raise TypeError(f"{op.__name__}: expected a torch.Tensor or a DLPack array (NumPy, CuPy, JAX), "
                        f"got {type(first).__name__}")
    if len(frameworks) > 1:
        raise TypeError(f"{op.__name__}: arrays of several frameworks in one call: {sorted(frameworks)}")
    framework = frameworks.pop()
    if framework == "jax" and mutates:
        raise TypeError(f"{op.__name__}: writes {', '.join(mutates)} in place, and JAX arrays are "
                        "immutable; pass torch tensors (or NumPy/CuPy arrays)")
    result = op(**{name: _to_torch(value) for name, value in arguments.items()})
    return _from_torch(result, framework)
