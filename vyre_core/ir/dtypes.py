"""Scalar data types of the IR and their fixed bit-level representation.

A dtype knows its numpy type for values (``value_np``) and for buffer storage
(``storage_np``): bool values live in buffers as one u32 word each. Integers are 8, 16, 32
or 64 bits wide, unsigned or two's complement.
"""

from __future__ import annotations

import enum
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
    U8 = "u8"
    U16 = "u16"
    I8 = "i8"
    I16 = "i16"
    U64 = "u64"
    I64 = "i64"

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
        return self in _INT_RANGE

    @property
    def is_signed(self) -> bool:
        """A signed integer (two's complement)."""
        return self.is_int and _INT_RANGE[self][0] < 0

    @property
    def int_range(self) -> tuple[int, int]:
        """The smallest and largest value of an integer type."""
        return _INT_RANGE[self]

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
            lo, hi = _INT_RANGE[self]
            if not lo <= v <= hi:
                holds = next((t for t in sorted(_INT_RANGE, key=lambda t: (
                    t.bits, t.is_signed != self.is_signed)) if t.bits >= self.bits
                    and _INT_RANGE[t][0] <= v <= _INT_RANGE[t][1]), None)
                wider = "" if holds is None else \
                    f", or make the other operand {holds.value} with .cast(ir.{holds.value})"
                raise ValueError(f"{v} does not fit in {self.value} [{lo}, {hi}]. Fix: use a "
                                 f"value in range{wider}")
            return v & ((1 << self.bits) - 1)
        if isinstance(value, bool) or not isinstance(value, int | float | np.number):
            raise TypeError(f"{self.value} literal must be a number, got {value!r}")
        with np.errstate(over="ignore"):
            try:
                rounded = np.array(value, dtype=self.value_np)
            except OverflowError:  # (an int past even f64)
                rounded = np.array(np.inf, dtype=self.value_np)
        if np.isinf(rounded) and not (isinstance(value, float | np.floating)
                                      and np.isinf(value)):
            top = float(np.finfo(self.value_np).max)
            wider = {DType.F16: ", or the wider ir.f32", DType.F32: ", or the wider ir.f64"}
            shown = repr(value) if len(repr(value)) <= 24 else repr(value)[:20] + "..."
            raise ValueError(f"{shown} does not fit in {self.value}: it rounds to infinity "
                             f"(the largest finite {self.value} is {top!r}). Fix: use a value "
                             f"of at most {top!r} in magnitude{wider.get(self, '')}; write "
                             "float('inf') for infinity")
        return int(rounded.view(_BITS_NP[self])[()])

    def from_bits(self, bits: int) -> Any:
        """Python value of a canonical bit pattern."""
        if self is DType.BOOL:
            return bool(bits)
        if self.is_int:
            return bits - (1 << self.bits) if self.is_signed and bits >> (self.bits - 1) else bits
        return float(np.array(bits, dtype=_BITS_NP[self]).view(self.value_np)[()])

    def __call__(self, value: Any) -> Any:
        """``ir.f32(1.5)``: a typed literal for the builder (``ir.u32(i)`` of an expression:
        its cast). The builder says how to make one (``make_literals_with``), so this
        module, below it, never imports it."""
        return _literal(value, self)


_VALUE_NP = {
    DType.U32: np.dtype(np.uint32), DType.I32: np.dtype(np.int32),
    DType.F32: np.dtype(np.float32), DType.BOOL: np.dtype(np.bool_),
    DType.F16: np.dtype(np.float16), DType.F64: np.dtype(np.float64),
    DType.U8: np.dtype(np.uint8), DType.U16: np.dtype(np.uint16),
    DType.I8: np.dtype(np.int8), DType.I16: np.dtype(np.int16),
    DType.U64: np.dtype(np.uint64), DType.I64: np.dtype(np.int64),
}
_BITS_NP = {DType.F16: np.uint16, DType.F32: np.uint32, DType.F64: np.uint64}
#: The bits of each float type's canonical quiet NaN: what every NaN stored becomes, and
#: what a NaN shows when its bits are read (a bitcast): payloads differ by device.
CANONICAL_NAN = {DType.F16: 0x7E00, DType.F32: 0x7FC00000, DType.F64: 0x7FF8000000000000}
_INF_BITS = {DType.F16: 0x7C00, DType.F32: 0x7F800000, DType.F64: 0x7FF0000000000000}


def bits_seen(dtype: DType, bits: int) -> int:
    """The bits a value of ``dtype`` stored as ``bits`` shows when they are read as
    another type (``Bitcast``): its own, but a NaN's are the canonical NaN's."""
    if dtype.is_float and bits & ~(1 << (dtype.bits - 1)) > _INF_BITS[dtype]:
        return CANONICAL_NAN[dtype]
    return bits
_INT_RANGE = {t: (int(np.iinfo(_VALUE_NP[t]).min), int(np.iinfo(_VALUE_NP[t]).max))
              for t in (DType.U32, DType.I32, DType.U8, DType.U16, DType.I8, DType.I16,
                        DType.U64, DType.I64)}

u32, i32, f32, bool_, f16, f64 = (DType.U32, DType.I32, DType.F32, DType.BOOL,
                                  DType.F16, DType.F64)
u8, u16, i8, i16, u64, i64 = (DType.U8, DType.U16, DType.I8, DType.I16, DType.U64, DType.I64)
#: The integer types narrower and wider than 32 bits, added after contract 1: a program
#: using one needs the backend to name ``dtype.<name>`` among its ops.
NEWER_DTYPES = (DType.U8, DType.U16, DType.I8, DType.I16, DType.U64, DType.I64)


def _no_builder(value: Any, dtype: DType) -> Any:
    raise TypeError(f"{dtype.value}({value!r}) makes a builder literal, and the builder is not "
                    "loaded (this dtype came from vyre_core.ir.dtypes). Fix: take dtypes from "
                    "vyre_core.ir (from vyre_core import ir; ir.f32(1.5)), which loads it")


_literal: Callable[[Any, DType], Any] = _no_builder


def make_literals_with(make: Callable[[Any, DType], Any]) -> None:
    """Called once by ``vyre_core.ir.values``: ``DType(value)`` returns ``make(value, dtype)``."""
    global _literal
    _literal = make
