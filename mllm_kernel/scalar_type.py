"""The vLLM-style ScalarType of quantized weights, and the integer ids the GEMMs take.

A ScalarType describes an element format torch has no dtype for: ``uint4b8`` is a 4-bit
unsigned integer stored with a bias of 8 (value = stored - 8, GPTQ's symmetric 4-bit), ``uint4``
has no bias (AWQ's 4-bit, used with zero points). Kernels take the type as one integer, its
``id``: the fields packed from the lowest bit with widths

    exponent 8 | mantissa 8 | signed 1 | bias 32 | finite_values_only 1 | nan_repr 8

so ids match the ones serving code computes with its own ScalarType (``b_q_type_id`` of
``gptq_marlin_gemm``)::

    from mllm_kernel.scalar_type import scalar_types
    gptq_marlin_gemm(..., b_q_type_id=scalar_types.uint4b8.id, ...)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["NanRepr", "ScalarType", "scalar_types"]

_FIELDS = (("exponent", 8), ("mantissa", 8), ("signed", 1), ("bias", 32), ("finite_values_only", 1),
           ("nan_repr", 8))


class NanRepr(enum.IntEnum):
    NONE = 0                # no NaN
    IEEE_754 = 1            # exponent all ones, mantissa not zero
    EXTD_RANGE_MAX_MIN = 2  # exponent and mantissa all ones (float8_e4m3fn)


@dataclass(frozen=True)
class ScalarType:
    """An element format: ``exponent`` bits (0 for integers), ``mantissa`` bits (an integer's
    bits less the sign), ``signed``, ``bias`` (stored = value + bias)."""

    exponent: int
    mantissa: int
    signed: bool
    bias: int = 0
    finite_values_only: bool = False
    nan_repr: NanRepr = NanRepr.IEEE_754

    @classmethod
    def uint(cls, bits: int, bias: int = 0) -> ScalarType:
        return cls(0, bits, False, bias)

    @classmethod
    def int_(cls, bits: int, bias: int = 0) -> ScalarType:
        return cls(0, bits - 1, True, bias)

    @classmethod
    def float_(cls, exponent: int, mantissa: int, finite_values_only: bool, nan_repr: NanRepr) -> ScalarType:
        return cls(exponent, mantissa, True, 0, finite_values_only, NanRepr(nan_repr))

    @classmethod
    def float_IEEE754(cls, exponent: int, mantissa: int) -> ScalarType:
        return cls(exponent, mantissa, True, 0, False, NanRepr.IEEE_754)

    @property
    def id(self) -> int:
        value, offset = 0, 0
        for name, width in _FIELDS:
            value |= (int(getattr(self, name)) & ((1 << width) - 1)) << offset
            offset += width
        return value

    @classmethod
    def from_id(cls, type_id: int) -> ScalarType:
        """The type whose ``id`` is type_id (any id decodes; the kernels say which they take)."""
        if not isinstance(type_id, int) or isinstance(type_id, bool) or not 0 <= type_id < 1 << 58:
            raise ValueError(f"not a ScalarType id: {type_id!r}")
        fields = {}
        for name, width in _FIELDS:
            fields[name] = type_id & ((1 << width) - 1)
            type_id >>= width
        bias = fields["bias"] - (1 << 32) if fields["bias"] >= 1 << 31 else fields["bias"]
        if fields["nan_repr"] not in NanRepr._value2member_map_:
            raise ValueError(f"not a ScalarType id: nan_repr field {fields['nan_repr']}")
        return cls(fields["exponent"], fields["mantissa"], bool(fields["signed"]), bias,
                   bool(fields["finite_values_only"]), NanRepr(fields["nan_repr"]))

    @property
    def size_bits(self) -> int:
        return self.exponent + self.mantissa + int(self.signed)

    def is_integer(self) -> bool:
        return self.exponent == 0

    def __str__(self) -> str:
        if self.is_integer():
            return f"{'int' if self.signed else 'uint'}{self.size_bits}" + (f"b{self.bias}" if self.bias else "")
        flags = ("f" if self.finite_values_only else "") + ("n" if self.nan_repr == NanRepr.EXTD_RANGE_MAX_MIN else "")
        return f"float{self.size_bits}_e{self.exponent}m{self.mantissa}{flags}"


class scalar_types:  # noqa: N801 (the name serving code imports)
    int4 = ScalarType.int_(4)
    uint4 = ScalarType.uint(4)
    int8 = ScalarType.int_(8)
    uint8 = ScalarType.uint(8)
    uint4b8 = ScalarType.uint(4, 8)        # GPTQ 4-bit, symmetric
    uint8b128 = ScalarType.uint(8, 128)    # GPTQ 8-bit, symmetric
    float8_e4m3fn = ScalarType.float_(4, 3, True, NanRepr.EXTD_RANGE_MAX_MIN)
    float8_e5m2 = ScalarType.float_IEEE754(5, 2)
    float16 = ScalarType.float_IEEE754(5, 10)
    bfloat16 = ScalarType.float_IEEE754(8, 7)
