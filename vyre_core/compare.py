"""Output comparison: exact bytes for integers and bool, a ULP budget for floats.

Reports the *first* divergence (element, byte offset, both values), the way
numpy.testing reports its first mismatch, so a failure points at the bug.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vyre_core.ir.dtypes import DType

_ORDERED = {2: (np.int16, np.int64), 4: (np.int32, np.int64), 8: (np.int64, np.int64)}


@dataclass(frozen=True)
class Divergence:
    index: int            # element index (or the shorter length when lengths differ)
    byte_offset: int      # first differing byte
    expected: object
    actual: object
    ulp: int | None       # float distance in ULPs, None for exact types

    def __str__(self) -> str:
        extra = f", {self.ulp} ULP apart" if self.ulp is not None else ""
        if self.sign_of_zero:
            extra += " (the sign of zero differs)"
        return (f"element {self.index} (byte {self.byte_offset}): expected {self.expected!r}, "
                f"got {self.actual!r}{extra}")

    @property
    def sign_of_zero(self) -> bool:
        """Both values are zeros of opposite sign (+0.0 against -0.0)."""
        return (isinstance(self.expected, float) and isinstance(self.actual, float)
                and self.expected == self.actual == 0.0
                and np.signbit(self.expected) != np.signbit(self.actual))


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ULPs between equal-dtype float arrays; NaN vs NaN is 0, NaN vs a number is huge.
    ``+0`` and ``-0`` are different bytes, so they are 1 ULP apart (-0 sits just below +0
    on the line the floats are counted on)."""
    signed, wide = _ORDERED[a.dtype.itemsize]
    ia = a.view(signed).astype(wide)
    ib = b.view(signed).astype(wide)
    low = np.iinfo(signed).min
    oa = np.where(ia < 0, low - ia - 1, ia)  # sign-magnitude onto a monotone integer line
    ob = np.where(ib < 0, low - ib - 1, ib)
    dist = np.abs(oa - ob)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    dist = np.where(nan_a & nan_b, 0, dist)
    return np.where(nan_a ^ nan_b, np.iinfo(np.int64).max, dist)


def first_divergence(expected: np.ndarray, actual: np.ndarray, dtype: DType,
                     ulp_budget: int = 0) -> Divergence | None:
    """None when ``actual`` matches ``expected``; else where it first differs."""
    expected = np.ascontiguousarray(expected, dtype=dtype.storage_np).reshape(-1)
    actual = np.ascontiguousarray(actual).reshape(-1)
    size = dtype.storage_bytes
    if actual.dtype != expected.dtype:
        return Divergence(0, 0, f"dtype {expected.dtype}", f"dtype {actual.dtype}", None)
    n = min(len(expected), len(actual))
    if dtype.is_float:
        e, a = expected[:n], actual[:n]
        dist = ulp_distance(e, a)
        # a zero of the wrong sign is wrong whatever the budget: no op vyre defines may
        # turn -0 into +0 or back (it is 1 ULP, and named so, in the report). Subnormals
        # are kept on every backend: one flushed to zero is as far off as its ULPs say.
        wrong_zero = (e == 0) & (a == 0) & (np.signbit(a) != np.signbit(e))
        bad = np.nonzero((dist > ulp_budget) | wrong_zero)[0]
    else:
        bad = np.nonzero(expected[:n] != actual[:n])[0]
    if len(bad):
        i = int(bad[0])
        eb = expected[i:i + 1].view(np.uint8)
        ab = actual[i:i + 1].view(np.uint8)
        offset = i * size + int(np.nonzero(eb != ab)[0][0]) if (eb != ab).any() else i * size
        ulp = int(ulp_distance(expected[i:i + 1], actual[i:i + 1])[0]) if dtype.is_float else None
        return Divergence(i, offset, expected[i].item(), actual[i].item(), ulp)
    if len(expected) != len(actual):
        return Divergence(n, n * size, f"{len(expected)} elements", f"{len(actual)} elements",
                          None)
    return None


def outputs_divergence(program, expected: Sequence[np.ndarray], actual: Sequence[np.ndarray],
                       ulp_budget: int = 0) -> str | None:
    """None when every output of ``program`` matches; else the first output that differs
    and where, as one line."""
    return buffers_divergence([(b.name, b.dtype) for b in program.outputs], expected, actual,
                              ulp_budget)


def buffers_divergence(buffers: Sequence[tuple[str, DType]], expected: Sequence[np.ndarray],
                       actual: Sequence[np.ndarray], ulp_budget: int = 0) -> str | None:
    """``outputs_divergence`` over named buffers (name, dtype): a sequence's returns."""
    if len(expected) != len(actual):
        return f"expected {len(expected)} output(s), got {len(actual)}"
    for (name, dtype), want, got in zip(buffers, expected, actual, strict=True):
        divergence = first_divergence(want, got, dtype, ulp_budget)
        if divergence is not None:
            return f"output {name!r} ({dtype.value}): {divergence}"
    return None
