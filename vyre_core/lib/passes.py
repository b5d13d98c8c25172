"""The passes of vyre.lib's reductions, as ``@vyre.kernel`` kernels.

Every pass reads an array viewed as ``(outer, n, inner)`` (numpy's order, ``inner``
contiguous) and leaves ``(outer, m, inner)`` partial results, ``m = ceil(n / FAN_IN)``.
A lane is cut into **blocks** of ``BLOCK`` consecutive places along the axis (the last
may be short: a lane of up to ``BLOCK`` is one block); a block of ``size`` places has
``parts = ceil(size / FAN_IN)`` partials, its partial ``t`` being its places ``t, t +
parts, t + 2 parts, ...`` combined left to right, starting from the first (so ``-0.0``
stays ``-0.0``); a lane's partials are its blocks' in order. One invocation makes one
partial. Neighbouring invocations read neighbouring elements, so a GPU's loads are
coalesced and the cpu backend runs the chunk loop once per row of lanes, vectorised; and
the invocations of one block read it from its start to its end (partials ``m`` apart,
the rule before blocks, took a new page every step of the loop over a long lane: twice
the time of a stream on a CPU whose prefetcher does not follow it, BENCHMARKS.md).

A pass is one step per kind of block: its grid is ``(parts * inner, blocks, outer)``
(``global_id``: ``t * inner + c``, the block after ``first``, the outer lane), and every
block of a step has ``size`` places, ``parts`` partials and ``full = size // parts``
elements in every partial (the first ``size % parts`` one more): numbers the same in
every invocation, so no invocation divides and the cpu backend proves every load
consecutive and inside ``x``. A lane of up to ``BLOCK`` is one step of one block; a
longer lane a step of its whole blocks and, where the last is short, a step of that one
(``steps``). docs/lib.md writes the order down; tests/lib_model.py is it in numpy.
"""

from __future__ import annotations

import vyre_core as vyre
from vyre_core import bool_, i32

#: Invocations per workgroup: lanes the cpu backend vectorises, at most wgpu's limit.
WORKGROUP = 256
#: The most elements one invocation combines, one after another.
FAN_IN = 256
#: Places along the axis a whole block has: ``WORKGROUP`` partials of ``FAN_IN`` each.
BLOCK = WORKGROUP * FAN_IN
#: The argument passes' constant ``GREATER``: argmax's order (True) or argmin's. The
#: specialized program has only that comparison (``ir/fold.py``).
Greater = vyre.Constant[bool_]


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


def steps(n: int) -> list[tuple[int, dict[str, int]]]:
    """The steps of a pass over lanes of ``n``: each one's number of blocks, and its
    parameters (``first``, ``size``, ``parts``, ``full``)."""
    whole, last = divmod(n, BLOCK) if n > BLOCK else (0, n)
    found = []
    for first, blocks, size in ((0, whole, BLOCK), (whole, 1 if last else 0, last)):
        if blocks:
            parts = -(-size // FAN_IN)
            found.append((blocks, {"first": first, "size": size, "parts": parts,
                                   "full": size // parts}))
    return found


@vyre.func
def start_of(n, inner, first):
    """Where the block of this invocation starts in ``x``: block ``first + global_id(1)``
    of outer lane ``global_id(2)``."""
    return (vyre.global_id(2) * n + (first + vyre.global_id(1)) * BLOCK) * inner


@vyre.func
def out_of(m, inner, first):
    """Where this invocation's partial goes: the block's ``WORKGROUP`` partials (a whole
    block's; the last has fewer) after the lane's blocks before it."""
    return (vyre.global_id(2) * m + (first + vyre.global_id(1)) * WORKGROUP) * inner


@vyre.func
def place_of(g, inner, first):
    """The place along the axis of the first element of this invocation's partial."""
    return (first + vyre.global_id(1)) * BLOCK + g // inner


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


@vyre.kernel(workgroup=(WORKGROUP, 1, 1))
def sum_pass(x, out, n: i32, m: i32, inner: i32, first: i32, size: i32, parts: i32,
             full: i32):
    g = vyre.global_id(0)
    start = start_of(n, inner, first)
    stride = parts * inner
    acc = x[start + g]
    for j in range(1, full):
        acc += x[start + g + j * stride]
    if g + full * stride < size * inner:
        acc += x[start + (g + full * stride)]
    out[out_of(m, inner, first) + g] = acc


@vyre.kernel(workgroup=(WORKGROUP, 1, 1))
def prod_pass(x, out, n: i32, m: i32, inner: i32, first: i32, size: i32, parts: i32,
              full: i32):
    g = vyre.global_id(0)
    start = start_of(n, inner, first)
    stride = parts * inner
    acc = x[start + g]
    for j in range(1, full):
        acc *= x[start + g + j * stride]
    if g + full * stride < size * inner:
        acc *= x[start + (g + full * stride)]
    out[out_of(m, inner, first) + g] = acc


@vyre.kernel(workgroup=(WORKGROUP, 1, 1))
def max_pass(x, out, n: i32, m: i32, inner: i32, first: i32, size: i32, parts: i32,
             full: i32):
    """numpy's maximum of each partial's elements (NaN if any is, else IEEE
    maximumNumber: -0 below +0): their greatest in an ordered comparison
    (``v if v > m else m``, one vector maximum), beside ``z``, the sum of their zeros and
    NaNs (NaN if any is NaN, else +0 if any zero is +0), which decides where ``m`` is a
    zero or ``z`` a NaN. The maximum of a set is one value whatever the order, so these
    are the bytes of combining left to right by that rule, with one compare per element
    where the rule took six (docs/lib.md)."""
    g = vyre.global_id(0)
    start = start_of(n, inner, first)
    stride = parts * inner
    top = x[start + g]
    z = top if zero_or_nan(top) else negative_zero_like(top)
    for j in range(1, full):
        v = x[start + g + j * stride]
        top = v if v > top else top
        z = z + v if zero_or_nan(v) else z
    if g + full * stride < size * inner:
        last = x[start + (g + full * stride)]
        top = last if last > top else top
        z = z + last if zero_or_nan(last) else z
    out[out_of(m, inner, first) + g] = top + z if top == 0 or z != z else top


@vyre.kernel(workgroup=(WORKGROUP, 1, 1))
def min_pass(x, out, n: i32, m: i32, inner: i32, first: i32, size: i32, parts: i32,
             full: i32):
    """numpy's minimum, as ``max_pass``: ``z`` sums the negated zeros and NaNs (+0 if any
    zero is -0; ``-0 - v`` is ``-v``), and of zeros the result is ``-(z - low)``: -0
    where any is."""
    g = vyre.global_id(0)
    start = start_of(n, inner, first)
    stride = parts * inner
    low = x[start + g]
    none = negative_zero_like(low)
    z = none - low if zero_or_nan(low) else none
    for j in range(1, full):
        v = x[start + g + j * stride]
        low = v if v < low else low
        z = z - v if zero_or_nan(v) else z
    if g + full * stride < size * inner:
        last = x[start + (g + full * stride)]
        low = last if last < low else low
        z = z - last if zero_or_nan(last) else z
    out[out_of(m, inner, first) + g] = none - (z - low) if low == 0 or z != z else low


@vyre.kernel(workgroup=(WORKGROUP, 1, 1))
def square_sum_pass(x, out, n: i32, m: i32, inner: i32, first: i32, size: i32, parts: i32,
                    full: i32):
    """sum_pass of x[k] * x[k], each product rounded (norm's first pass)."""
    g = vyre.global_id(0)
    start = start_of(n, inner, first)
    stride = parts * inner
    acc = x[start + g] * x[start + g]
    for j in range(1, full):
        v = x[start + g + j * stride]
        acc += v * v
    if g + full * stride < size * inner:
        v = x[start + (g + full * stride)]
        acc += v * v
    out[out_of(m, inner, first) + g] = acc


@vyre.kernel(workgroup=(WORKGROUP, 1, 1))
def dot_pass(x, y, out, n: i32, m: i32, inner: i32, first: i32, size: i32, parts: i32,
             full: i32):
    """sum_pass of x[k] * y[k], each product rounded (dot's first pass)."""
    g = vyre.global_id(0)
    start = start_of(n, inner, first)
    stride = parts * inner
    acc = x[start + g] * y[start + g]
    for j in range(1, full):
        acc += x[start + g + j * stride] * y[start + g + j * stride]
    if g + full * stride < size * inner:
        acc += x[start + (g + full * stride)] * y[start + (g + full * stride)]
    out[out_of(m, inner, first) + g] = acc


@vyre.kernel(workgroup=(WORKGROUP, 1, 1))
def arg_first(x, best, at: vyre.Array[i32], n: i32, m: i32, inner: i32, first: i32,
              size: i32, parts: i32, full: i32, *, GREATER: Greater = True):
    """argmax's (``GREATER``) or argmin's first pass: the index of an element is its place
    along the axis."""
    g = vyre.global_id(0)
    start = start_of(n, inner, first)
    stride = parts * inner
    place = place_of(g, inner, first)
    v = x[start + g]
    k = place
    for j in range(1, full):
        w = x[start + g + j * stride]
        kw = place + j * parts
        take = beats_max(v, k, w, kw) if GREATER else beats_min(v, k, w, kw)
        v = w if take else v
        k = kw if take else k
    if g + full * stride < size * inner:
        w = x[start + (g + full * stride)]
        kw = place + full * parts
        take = beats_max(v, k, w, kw) if GREATER else beats_min(v, k, w, kw)
        v = w if take else v
        k = kw if take else k
    to = out_of(m, inner, first) + g
    best[to] = v
    at[to] = k


@vyre.kernel(workgroup=(WORKGROUP, 1, 1))
def arg_next(x, xat: vyre.Array[i32], best, at: vyre.Array[i32], n: i32, m: i32,
             inner: i32, first: i32, size: i32, parts: i32, full: i32, *,
             GREATER: Greater = True):
    """argmax's (``GREATER``) or argmin's later passes: values with the indices the pass
    before found."""
    g = vyre.global_id(0)
    start = start_of(n, inner, first)
    stride = parts * inner
    v = x[start + g]
    k = xat[start + g]
    for j in range(1, full):
        w = x[start + g + j * stride]
        kw = xat[start + g + j * stride]
        take = beats_max(v, k, w, kw) if GREATER else beats_min(v, k, w, kw)
        v = w if take else v
        k = kw if take else k
    if g + full * stride < size * inner:
        w = x[start + (g + full * stride)]
        kw = xat[start + (g + full * stride)]
        take = beats_max(v, k, w, kw) if GREATER else beats_min(v, k, w, kw)
        v = w if take else v
        k = kw if take else k
    to = out_of(m, inner, first) + g
    best[to] = v
    at[to] = k
