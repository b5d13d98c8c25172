"""The parameter annotations of a kernel: ``Array[dtype]``, ``Array[dtype, ndim]`` and
``Constant[dtype]``. Pure values, hashable, so a signature built from them is a cache key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vyre_core.errors import KernelSyntaxError
from vyre_core.ir.dtypes import DType


@dataclass(frozen=True)
class ArrayType:
    """An array parameter: its element type and number of axes. ``ndim`` 1 is a flat,
    runtime-sized buffer; 2 or 3 is shaped (numpy's order), its extents passed per launch."""

    dtype: DType
    ndim: int = 1

    def __repr__(self) -> str:
        return f"Array[{self.dtype.value}]" if self.ndim == 1 else \
            f"Array[{self.dtype.value}, {self.ndim}]"


@dataclass(frozen=True)
class ConstantType:
    """A keyword-only specialization constant of ``dtype`` (``vyre.Constant[u32]``), with
    the inclusive range ``vyre.Constant[u32](low=1, high=64)`` the tuner sweeps and a
    dispatch's choice must keep to."""

    dtype: DType
    low: Any = None
    high: Any = None

    def __call__(self, *, low: Any = None, high: Any = None) -> ConstantType:
        if self.low is not None or self.high is not None:
            raise KernelSyntaxError(f"{self!r}(...): the range is given twice",
                                    "Give the range once: vyre.Constant[u32](low=1, high=64).")
        if low is None and high is None:
            raise KernelSyntaxError(f"{self!r}(): a range with no bound",
                                    "Give low=, high= or both, or write "
                                    f"{self!r} alone.")
        return ConstantType(self.dtype, low, high)

    def __repr__(self) -> str:
        bounds = ", ".join(f"{k}={v!r}" for k, v in (("low", self.low), ("high", self.high))
                           if v is not None)
        return f"Constant[{self.dtype.value}]" + (f"({bounds})" if bounds else "")


def _dtype(value: Any, what: str) -> DType:
    if not isinstance(value, DType):
        raise KernelSyntaxError(f"{what}[{value!r}]: {value!r} is not a vyre dtype",
                                f"Write {what}[f32] (or u32, i32, ...: from vyre_core import f32).")
    return value


class _ArrayAnnotation:
    """``vyre.Array[f32]`` (1-D) or ``vyre.Array[f32, 2]`` (shaped, numpy's order)."""

    def __getitem__(self, key: Any) -> ArrayType:
        dtype, ndim = key if isinstance(key, tuple) and len(key) == 2 else (key, 1)
        if isinstance(ndim, bool) or not isinstance(ndim, int) or not 1 <= ndim <= 3:
            raise KernelSyntaxError(f"Array[..., {ndim!r}]: an array has 1 to 3 axes",
                                    "Write Array[f32], Array[f32, 2] or Array[f32, 3].")
        return ArrayType(_dtype(dtype, "Array"), ndim)

    def __repr__(self) -> str:
        return "vyre.Array"


class _ConstantAnnotation:
    """``vyre.Constant[u32]``: a keyword-only parameter fixed before the kernel runs;
    ``vyre.Constant[u32](low=1, high=64)`` gives it an inclusive range."""

    def __getitem__(self, key: Any) -> ConstantType:
        return ConstantType(_dtype(key, "Constant"))

    def __repr__(self) -> str:
        return "vyre.Constant"


Array = _ArrayAnnotation()
Constant = _ConstantAnnotation()
