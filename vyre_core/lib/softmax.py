"""``lib.softmax`` and ``lib.logsumexp``, as scipy.special defines them, in one sequence:
the greatest element of each lane (``lib.max``'s passes), each element's ``exp(x - m)``,
their sum (``lib.sum``'s passes), then the quotient or ``m + log(sum)``. The shift ``m``
is the lane's greatest element where that is finite, else 0 (scipy's rule: a lane with
an infinity or a NaN is not shifted). docs/lib.md, "Softmax and logsumexp".
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

import vyre_core as vyre
from vyre_core import i32
from vyre_core.lib import steps
from vyre_core.lib.args import DTYPES, as_input, split
from vyre_core.sequence import Sequence, SequenceBuilder

#: Invocations per workgroup.
WORKGROUP = 256


@vyre.func
def shift(m):
    """The lane's shift: its greatest element where finite, else 0."""
    return m if m - m == 0 else 0.0


@vyre.kernel(workgroup=(WORKGROUP,))
def shifted_exp(x, greatest, out, n: i32, inner: i32):
    """exp(x - shift) of each element; its lane's greatest element is
    ``greatest[(g // (n * inner)) * inner + g % inner]``."""
    g = vyre.global_id(0)
    lane = (g // (n * inner)) * inner + g % inner
    out[g] = math.exp(x[g] - shift(greatest[lane]))


@vyre.kernel(workgroup=(WORKGROUP,))
def divided(e, total, out, n: i32, inner: i32):
    """Each exp over its lane's sum: one division."""
    g = vyre.global_id(0)
    out[g] = e[g] / total[(g // (n * inner)) * inner + g % inner]


@vyre.kernel(workgroup=(WORKGROUP,))
def shift_plus_log(greatest, total, out):
    """A lane's logsumexp: its shift plus the log of its sum of exps."""
    g = vyre.global_id(0)
    out[g] = shift(greatest[g]) + math.log(total[g])


@functools.lru_cache(maxsize=256)
def _sequence(name: str, dtype: np.dtype, outer: int, n: int, inner: int) -> Sequence:
    b = SequenceBuilder()
    ir_type = DTYPES[dtype]
    size = outer * n * inner
    b.input("x", ir_type, size)
    shape = (outer, n, inner)
    greatest = steps.max(b, "x", shape=shape, axis=1, name="greatest")
    lanes = {"n": n, "inner": inner}
    e = b.transient("e", ir_type, size)
    b.step(shifted_exp, {"x": "x", "greatest": greatest, "out": e, **lanes}, dim=size)
    total = steps.sum(b, e, shape=shape, axis=1, name="total")
    out = b.transient("result", ir_type, size if name == "softmax" else outer * inner)
    if name == "softmax":
        b.step(divided, {"e": e, "total": total, "out": out, **lanes}, dim=size)
    else:
        b.step(shift_plus_log, {"greatest": greatest, "total": total, "out": out},
               dim=outer * inner)
    return b.build(returns=[out])


def _run(drv: Any, name: str, x: Any, axis: Any, backend: str | None) -> Any:
    array = as_input(x, "x", floats_only=True)
    where = split(array.shape, axis)
    shape = array.shape if name == "softmax" else where.shape
    if where.n == 0:
        if name == "softmax":
            return np.empty(shape, array.dtype)
        return np.full(shape, -np.inf, array.dtype)[()]  # (the log of an empty sum)
    if where.outer * where.inner == 0:
        return np.empty(shape, array.dtype)
    seq = _sequence(name, array.dtype, where.outer, where.n, where.inner)
    got, = drv.dispatch(seq, [array.reshape(-1)], backend=backend)
    return np.array(got).reshape(shape)[()]


def softmax(drv: Any, x: Any, axis: int | None = None, *,
            backend: str | None = None) -> np.ndarray:
    """``exp(x - m) / sum(exp(x - m))`` along ``axis`` (None: over every element), as
    ``scipy.special.softmax``; floats only, the result in ``x``'s shape and dtype."""
    return _run(drv, "softmax", x, axis, backend)


def logsumexp(drv: Any, x: Any, axis: int | None = None, *,
              backend: str | None = None) -> Any:
    """``m + log(sum(exp(x - m)))`` along ``axis`` (None: a scalar over every element),
    as ``scipy.special.logsumexp``; floats only; ``-inf`` for an empty axis."""
    return _run(drv, "logsumexp", x, axis, backend)


__all__ = ["logsumexp", "softmax"]
