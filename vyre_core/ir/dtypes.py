"""Scalar data types of the IR and their fixed bit-level representation.

A dtype knows its numpy type for values (``value_np``) and for buffer storage
(``storage_np``): bool values live in buffers as one u32 word each.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from typing import Any

import numpy as np


class DType(enum.Enum):
    U32 = "u32"
    I32 = "i32"
    F32 = "f32"
    BOOL = "bool"
    F16 = "f16"
    F64 = "f64"

    @property
    def value_np(self) -> np.dtype:
        return _VALUE_NP[self]

    @property
    def storage_np(self) -> np.dtype:
        return np.dtype(np.uint32) if self is DType.BOOL else _VALUE_NP[self]

    @property
    def storage_bytes(self) -> int:
        return self.storage_np.itemsize

    @property
    def bits(self) -> int:
        return 1 if self is DType.BOOL else 8 * self.storage_bytes

    @property
    def is_float(self) -> bool:
        return self in (DType.F16, DType.F32, DType.F64)

    @property
    def is_int(self) -> bool:
        return self in (DType.U32, DType.I32)

    @property
    def is_numeric(self) -> bool:
        return self.is_int or self.is_float

    def to_bits(self, value: Any) -> int:
        """Canonical bit pattern of ``value`` in this type (floats rounded to nearest)."""
        if self is DType.BOOL:
            return int(bool(value))
        if self.is_int:
            if isinstance(value, float) or not isinstance(value, int | np.integer):
                raise TypeError(f"{self.value} literal must be an int, got {value!r}")
            v = int(value)
            lo, hi = (0, 2**32 - 1) if self is DType.U32 else (-(2**31), 2**31 - 1)
            if not lo <= v <= hi:
                other = "i32" if self is DType.U32 else "u32"
                raise ValueError(f"{v} does not fit in {self.value} [{lo}, {hi}]. Fix: use a "
                                 f"value in range, or make the other operand {other} with "
                                 f".cast(ir.{other})")
            return v & 0xFFFFFFFF
        if isinstance(value, bool) or not isinstance(value, int | float | np.number):
            raise TypeError(f"{self.value} literal must be a number, got {value!r}")
        return int(np.array(value, dtype=self.value_np).view(_BITS_NP[self])[()])

    def from_bits(self, bits: int) -> Any:
        """Python value of a canonical bit pattern."""
        if self is DType.BOOL:
            return bool(bits)
        if self is DType.U32:
            return bits
        if self is DType.I32:
            return struct.unpack("<i", struct.pack("<I", bits))[0]
        return float(np.array(bits, dtype=_BITS_NP[self]).view(self.value_np)[()])

    def __call__(self, value: Any) -> Any:
        """``ir.f32(1.5)``: a typed literal for the builder. The builder says how to make
        one (``make_literals_with``), so this module, below it, never imports it."""
        return _literal(value, self)


_VALUE_NP = {
    DType.U32: np.dtype(np.uint32), DType.I32: np.dtype(np.int32),
    DType.F32: np.dtype(np.float32), DType.BOOL: np.dtype(np.bool_),
    DType.F16: np.dtype(np.float16), DType.F64: np.dtype(np.float64),
}
_BITS_NP = {DType.F16: np.uint16, DType.F32: np.uint32, DType.F64: np.uint64}

u32, i32, f32, bool_, f16, f64 = (DType.U32, DType.I32, DType.F32, DType.BOOL,
                                  DType.F16, DType.F64)


def _no_builder(value: Any, dtype: DType) -> Any:
    raise TypeError(f"{dtype.value}({value!r}) makes a builder literal, and the builder is not "
                    "loaded (this dtype came from vyre_core.ir.dtypes). Fix: take dtypes from "
                    "vyre_core.ir (from vyre_core import ir; ir.f32(1.5)), which loads it")


_literal: Callable[[Any, DType], Any] = _no_builder


def make_literals_with(make: Callable[[Any, DType], Any]) -> None:
    """Called once by ``vyre_core.ir.builder``: ``DType(value)`` returns ``make(value, dtype)``."""
    global _literal
    _literal = make
