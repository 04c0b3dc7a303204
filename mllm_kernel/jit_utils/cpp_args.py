"""``make_cpp_args``: Python values as C++ template arguments."""

from __future__ import annotations

import math

# Names the headers define (dtype.hpp, utils.cuh and the CPU types header).
_TORCH_DTYPE_NAMES = {
    "float32": "fp32_t",
    "float16": "fp16_t",
    "bfloat16": "bf16_t",
    "float64": "fp64_t",
    "float8_e4m3fn": "fp8_e4m3_t",
    "float8_e5m2": "fp8_e5m2_t",
    "int8": "int8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "int64": "int64_t",
    "uint8": "uint8_t",
    "uint16": "uint16_t",
    "uint32": "uint32_t",
    "uint64": "uint64_t",
    "bool": "bool",
}

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class CppArgs(tuple):
    """The converted arguments: a tuple of strings (``*args`` names a variant) whose ``str``
    is the comma-separated list for a template: ``f"kernel<{args}>"``."""

    def __str__(self) -> str:
        return ", ".join(self)


def _to_cpp(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise ValueError(f"make_cpp_args: integer {value} does not fit in int64")
        if value == _INT64_MIN:  # the literal 9223372036854775808 itself overflows
            return "(-9223372036854775807LL - 1)"
        return f"{value}LL" if abs(value) > 2**31 - 1 else str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "__builtin_nan(\"\")"
        if math.isinf(value):
            return "__builtin_huge_val()" if value > 0 else "(-__builtin_huge_val())"
        # repr() is the shortest text that parses back to the same double.
        return repr(value)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        torch = None
    if torch is not None and isinstance(value, torch.dtype):
        name = str(value).removeprefix("torch.")
        if name in _TORCH_DTYPE_NAMES:
            return _TORCH_DTYPE_NAMES[name]
        raise TypeError(f"make_cpp_args: torch dtype {value} has no C++ type in mllm-kernel")
    raise TypeError(
        f"make_cpp_args: cannot turn {value!r} (type {type(value).__name__}) into a C++ template "
        "argument; use int, float, bool or torch.dtype"
    )


def make_cpp_args(*values: object) -> CppArgs:
    """Converts int, float, bool and torch.dtype values to C++ template-argument text.

    >>> str(make_cpp_args(256, True, -3))
    '256, true, -3'
    """
    return CppArgs(_to_cpp(v) for v in values)
