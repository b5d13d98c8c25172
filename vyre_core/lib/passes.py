"""The passes of vyre.lib's reductions, as ``@vyre.kernel`` kernels.

Every pass reads an array viewed as ``(outer, n, inner)`` (numpy's order, ``inner``
contiguous) and leaves ``(outer, m, inner)`` partial results, ``m = ceil(n / FAN_IN)``:
partial ``i`` of a lane is its elements ``i, i + m, i + 2m, ...`` (below ``n``) combined
left to right, starting from the first (so ``-0.0`` stays ``-0.0``). One invocation makes
one partial. Neighbouring invocations read neighbouring elements, so a GPU's loads are
coalesced and the cpu backend runs the chunk loop once per workgroup over its lanes.

A pass is told ``span = n * inner`` (one outer block, in elements), ``step = m * inner``
(the stride between the elements one invocation combines, and the outputs per outer
block) and ``full = n // m`` (the chunks every invocation has; those with ``i < n % m``
have one more). Its ``dim`` is ``outer * step``; no pass divides per element.
docs/lib.md writes the order down; tests/lib_model.py is it in numpy.
"""

from __future__ import annotations

import vyre_core as vyre
from vyre_core import bool_, i32

#: Invocations per workgroup: lanes the cpu backend vectorises, at most wgpu's limit.
WORKGROUP = 256
#: The most elements one invocation combines, one after another.
FAN_IN = 256
#: Every pass's constant ``FLAT``: True where the array is one outer block (``outer`` 1:
#: every reduction of all elements, and of axis 0), so ``g < step`` and ``g`` is both
#: ``t`` and ``base``. The specialized program has only that branch (``ir/fold.py``),
#: whose loads the cpu backend proves consecutive and inside ``x``; the other branch's
#: division and remainder made each of them a checked gather. The same operations on the
#: same elements: the same bytes.
Flat = vyre.Constant[bool_]


def levels(n: int) -> list[tuple[int, int]]:
    """The passes reducing ``n`` elements: (elements in, partials out) for each, until one
    is left (one pass when ``n`` is 1: it is the element, its NaN made canonical)."""
    out = []
    while True:
        m = -(-n // FAN_IN)
        out.append((n, m))
        if m == 1:
            return out
        n = m


@vyre.func
def zero_or_nan(v):
    """Whether ``v`` is a zero or NaN: the elements whose rule the maximum (minimum) of
    ``max_pass`` (``min_pass``) leaves to a sum of their own."""
    return v == 0 or v != v


@vyre.func
def negative_zero_like(v):
    """-0 in ``v``'s type (0 for an integer): the sum of no zeros (``-0 + z`` is ``z``).
    +0 (``v`` clamped to [0, 0], so an infinity gives no NaN) times +0 - 1, in the type's
    own arithmetic: a negative literal does not fit u32."""
    p = min(max(v, 0), 0)
    return p * (p - 1)


@vyre.func
def beats_max(a, ia, b, ib):
    """Whether (b, ib) comes before (a, ia) in argmax's order: NaN above every number,
    then greater values, and of equals (or of NaNs) the lower index: numpy's first."""
    return b > a or (b != b and a == a) or ((b == a or (b != b and a != a)) and ib < ia)


@vyre.func
def beats_min(a, ia, b, ib):
    """argmin's order: NaN below every number, then smaller values, then the lower index."""
    return b < a or (b != b and a == a) or ((b == a or (b != b and a != a)) and ib < ia)


@vyre.kernel(workgroup=(WORKGROUP,))
def sum_pass(x, out, span: i32, step: i32, full: i32, *, FLAT: Flat = False):
    g = vyre.global_id(0)
    t = g if FLAT else g % step
    base = g if FLAT else (g // step) * span + t
    acc = x[base]
    for j in range(1, full):
        acc += x[base + j * step]
    if t + full * step < span:
        acc += x[base + full * step]
    out[g] = acc


@vyre.kernel(workgroup=(WORKGROUP,))
def prod_pass(x, out, span: i32, step: i32, full: i32, *, FLAT: Flat = False):
    g = vyre.global_id(0)
    t = g if FLAT else g % step
    base = g if FLAT else (g // step) * span + t
    acc = x[base]
    for j in range(1, full):
        acc *= x[base + j * step]
    if t + full * step < span:
        acc *= x[base + full * step]
    out[g] = acc


@vyre.kernel(workgroup=(WORKGROUP,))
def max_pass(x, out, span: i32, step: i32, full: i32, *, FLAT: Flat = False):
    """numpy's maximum of each partial's elements (NaN if any is, else IEEE
    maximumNumber: -0 below +0): their greatest in an ordered comparison
    (``v if v > m else m``, one vector maximum), beside ``z``, the sum of their zeros and
    NaNs (NaN if any is NaN, else +0 if any zero is +0), which decides where ``m`` is a
    zero or ``z`` a NaN. The maximum of a set is one value whatever the order, so these
    are the bytes of combining left to right by that rule, with one compare per element
    where the rule took six (docs/lib.md)."""
    g = vyre.global_id(0)
    t = g if FLAT else g % step
    base = g if FLAT else (g // step) * span + t
    m = x[base]
    z = m if zero_or_nan(m) else negative_zero_like(m)
    for j in range(1, full):
        v = x[base + j * step]
        m = v if v > m else m
        z = z + v if zero_or_nan(v) else z
    if t + full * step < span:
        last = x[base + full * step]
        m = last if last > m else m
        z = z + last if zero_or_nan(last) else z
    out[g] = m + z if m == 0 or z != z else m


@vyre.kernel(workgroup=(WORKGROUP,))
def min_pass(x, out, span: i32, step: i32, full: i32, *, FLAT: Flat = False):
    """numpy's minimum, as ``max_pass``: ``z`` sums the negated zeros and NaNs (+0 if any
    zero is -0; ``-0 - v`` is ``-v``), and of zeros the result is ``-(z - m)``: -0
    where any is."""
    g = vyre.global_id(0)
    t = g if FLAT else g % step
    base = g if FLAT else (g // step) * span + t
    m = x[base]
    none = negative_zero_like(m)
    z = none - m if zero_or_nan(m) else none
    for j in range(1, full):
        v = x[base + j * step]
        m = v if v < m else m
        z = z - v if zero_or_nan(v) else z
    if t + full * step < span:
        last = x[base + full * step]
        m = last if last < m else m
        z = z - last if zero_or_nan(last) else z
    out[g] = none - (z - m) if m == 0 or z != z else m


@vyre.kernel(workgroup=(WORKGROUP,))
def square_sum_pass(x, out, span: i32, step: i32, full: i32, *,
                    FLAT: Flat = False):
    """sum_pass of x[k] * x[k], each product rounded (norm's first pass)."""
    g = vyre.global_id(0)
    t = g if FLAT else g % step
    base = g if FLAT else (g // step) * span + t
    acc = x[base] * x[base]
    for j in range(1, full):
        v = x[base + j * step]
        acc += v * v
    if t + full * step < span:
        v = x[base + full * step]
        acc += v * v
    out[g] = acc


@vyre.kernel(workgroup=(WORKGROUP,))
def dot_pass(x, y, out, span: i32, step: i32, full: i32, *, FLAT: Flat = False):
    """sum_pass of x[k] * y[k], each product rounded (dot's first pass)."""
    g = vyre.global_id(0)
    t = g if FLAT else g % step
    base = g if FLAT else (g // step) * span + t
    acc = x[base] * y[base]
    for j in range(1, full):
        acc += x[base + j * step] * y[base + j * step]
    if t + full * step < span:
        acc += x[base + full * step] * y[base + full * step]
    out[g] = acc


@vyre.kernel(workgroup=(WORKGROUP,))
def argmax_first(x, best, at: vyre.Array[i32], span: i32, step: i32, full: i32,
                 inner: i32, *, FLAT: Flat = False):
    """argmax's first pass: the index of an element is its place along the axis."""
    g = vyre.global_id(0)
    t = g if FLAT else g % step
    m = step // inner
    i = t // inner
    base = g if FLAT else (g // step) * span + t
    v = x[base]
    k = i
    for j in range(1, full):
        w = x[base + j * step]
        take = beats_max(v, k, w, i + j * m)
        v = w if take else v
        k = i + j * m if take else k
    if t + full * step < span:
        w = x[base + full * step]
        take = beats_max(v, k, w, i + full * m)
        v = w if take else v
        k = i + full * m if take else k
    best[g] = v
    at[g] = k


@vyre.kernel(workgroup=(WORKGROUP,))
def argmin_first(x, best, at: vyre.Array[i32], span: i32, step: i32, full: i32,
                 inner: i32, *, FLAT: Flat = False):
    g = vyre.global_id(0)
    t = g if FLAT else g % step
    m = step // inner
    i = t // inner
    base = g if FLAT else (g // step) * span + t
    v = x[base]
    k = i
    for j in range(1, full):
        w = x[base + j * step]
        take = beats_min(v, k, w, i + j * m)
        v = w if take else v
        k = i + j * m if take else k
    if t + full * step < span:
        w = x[base + full * step]
        take = beats_min(v, k, w, i + full * m)
        v = w if take else v
        k = i + full * m if take else k
    best[g] = v
    at[g] = k


@vyre.kernel(workgroup=(WORKGROUP,))
def argmax_next(x, xat: vyre.Array[i32], best, at: vyre.Array[i32], span: i32, step: i32,
                full: i32, *, FLAT: Flat = False):
    """argmax's later passes: values with the indices the pass before found."""
    g = vyre.global_id(0)
    t = g if FLAT else g % step
    base = g if FLAT else (g // step) * span + t
    v = x[base]
    k = xat[base]
    for j in range(1, full):
        w = x[base + j * step]
        kw = xat[base + j * step]
        take = beats_max(v, k, w, kw)
        v = w if take else v
        k = kw if take else k
    if t + full * step < span:
        w = x[base + full * step]
        kw = xat[base + full * step]
        take = beats_max(v, k, w, kw)
        v = w if take else v
        k = kw if take else k
    best[g] = v
    at[g] = k


@vyre.kernel(workgroup=(WORKGROUP,))
def argmin_next(x, xat: vyre.Array[i32], best, at: vyre.Array[i32], span: i32, step: i32,
                full: i32, *, FLAT: Flat = False):
    g = vyre.global_id(0)
    t = g if FLAT else g % step
    base = g if FLAT else (g // step) * span + t
    v = x[base]
    k = xat[base]
    for j in range(1, full):
        w = x[base + j * step]
        kw = xat[base + j * step]
        take = beats_min(v, k, w, kw)
        v = w if take else v
        k = kw if take else k
    if t + full * step < span:
        w = x[base + full * step]
        kw = xat[base + full * step]
        take = beats_min(v, k, w, kw)
        v = w if take else v
        k = kw if take else k
    best[g] = v
    at[g] = k
