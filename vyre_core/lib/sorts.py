"""Sorts: ``lib.sort`` and ``lib.argsort``, numpy's stable order, by an LSD radix sort.

The order (docs/lib.md, "Sorts") is numpy's ``kind="stable"``: ascending, NaNs last,
``-0.0`` equal to ``+0.0``, equal elements in their input order. A stable sort under a
total order has one result, so every backend gives numpy's bytes (NaNs canonical).

Each element's **key** is an unsigned integer that orders as numpy does: a u32 is its own
key, an i32 has its sign bit flipped, a float's bits have every bit flipped when its sign
is set and the sign bit set when not, both zeros take ``+0``'s key and every NaN the
largest (f16 and f64: the same on 16 and 64 bits). The kernels read an array's bits (the
host passes ``x.view(np.uint32)``, no copy; f16 widened to u32): no float is computed
with. An f64's key is two words: its low words are sorted first, then its high words.

Every lane along the axis is sorted at once: its lane number is the most significant
part of the key. Each pass sorts stably by one 8-bit digit, least significant first (the
key's digits, then the lane's): per-block digit counts (one invocation walks a block of
consecutive elements and owns its 256 counters, so no atomics), each digit's counts
scanned along the blocks (``lib.cumsum``'s passes, exact on i32), then a stable scatter
(the same invocation walks its block again, in order, each element to the next place of
its digit: after every smaller digit's, and after its digit's in the blocks before).
An axis that is not the last is gathered into lanes first and spread back after. All
passes are one sequence, built once per shape.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

import vyre_core as vyre
from vyre_core import i32, ir, u32
from vyre_core.ir.dtypes import DType
from vyre_core.lib import scan
from vyre_core.lib.args import as_input, buffer_split, split
from vyre_core.sequence import Sequence, SequenceBuilder

#: Invocations per workgroup (each walks a block of its own).
WORKGROUP = 64
#: Values of one digit (8 bits a pass).
RADIX = 256
#: The longest block one invocation walks (shorter ones for small arrays: ``block_length``).
MAX_BLOCK = 4096

U32 = vyre.Array[u32]
I32 = vyre.Array[i32]


@dataclass(frozen=True)
class Keys:
    """How a dtype's bits become keys: ``width`` bits of key, ``sign`` its sign bit (0 for
    u32); for floats the bits of ``inf`` (a greater magnitude is a NaN; no integer's is)
    and of the canonical ``nan`` stored in a NaN's place."""

    width: int
    sign: int
    inf: int = 0xFFFFFFFF
    nan: int = 0
    floating: bool = False

    def params(self) -> dict[str, int]:
        """The kernels' scalars: ``flip``, the bits a negative float flips (0 for an
        integer), and ``top``, the sign's place."""
        return {"sign": self.sign, "inf": self.inf, "top": self.width - 1,
                "flip": (1 << self.width) - 1 if self.floating else 0}


#: The 32-bit and 16-bit dtypes' keys (f64's are two words: ``wide_keys``).
KEYS = {np.dtype(np.uint32): Keys(32, 0), np.dtype(np.int32): Keys(32, 1 << 31),
        np.dtype(np.float32): Keys(32, 1 << 31, 0x7F800000, 0x7FC00000, True),
        np.dtype(np.float16): Keys(16, 1 << 15, 0x7C00, 0x7E00, True)}


@vyre.func
def key(bits, sign, inf, flip, top):
    """The key of an element's bits: ``sign`` flipped, and every bit (``flip``) of a
    negative float, without a branch on the sign (it is random in random data); then the
    rare cases: a NaN's key is every bit of the width, a zero's ``+0.0``'s."""
    flipped = bits ^ (((u32(0) - (bits >> top)) & flip) | sign)
    mag = bits & (sign - 1)
    return (sign | (sign - 1)) if mag > inf else (
        sign if mag == 0 and flip != 0 else flipped)


@vyre.func
def canonical(bits, sign, inf, nan):
    """The bits stored for an element: a NaN's are the canonical NaN's."""
    return nan if (bits & (sign - 1)) > inf else bits


@vyre.func
def digit(bits, at, k, shift, n, by_lane, sign, inf, flip, top):
    """Element ``k``'s digit in this pass: bits ``shift`` to ``shift + 7`` of its key, or
    (``by_lane``) of its lane, ``at[k] // n`` (``at`` its place in lane order)."""
    d = u32(0)
    if by_lane != 0:  # noqa: SIM108 (a select would load both; a pass reads one)
        d = u32(i32(at[k]) // n)
    else:
        d = key(bits[k], sign, inf, flip, top)
    return i32((d >> shift) & 255)


@vyre.func
def starts(counts, ends, g, blocks):
    """Block ``g``'s counts become where its first element of each digit goes: the
    elements of smaller digits (the last row of ``ends``), then those of its digit in
    the blocks before it (its row of ``ends``, less its own count)."""
    before = 0
    last = (blocks - 1) * RADIX
    for d in range(RADIX):
        slot = g * RADIX + d
        counts[slot] = before + ends[slot] - counts[slot]
        before += ends[last + d]


@vyre.func
def address(p, n, inner):
    """Where element ``p`` of lane order lies in ``x`` seen as ``(outer, n, inner)``: lane
    ``p // n`` is ``(o, i)`` = ``(lane // inner, lane % inner)``, at ``k = p % n``."""
    lane = p // n
    return ((lane // inner) * n + p % n) * inner + lane % inner


@vyre.kernel(workgroup=(WORKGROUP,))
def count_digits(bits: U32, at: U32, counts: I32, total: i32, block: i32, shift: u32,
                 n: i32, by_lane: i32, sign: u32, inf: u32, flip: u32, top: u32):
    """How many of block ``g``'s elements have each digit, added to ``counts[g * RADIX +
    d]`` (zero: each pass has its own; a block's counters side by side, so its walk stays
    in a few cache lines)."""
    g = vyre.global_id(0)
    for k in range(g * block, min(g * block + block, total)):
        slot = g * RADIX + digit(bits, at, k, shift, n, by_lane, sign, inf, flip, top)
        counts[slot] += 1


@vyre.kernel(workgroup=(WORKGROUP,))
def scatter(bits: U32, at: U32, counts: I32, ends: I32, out: U32, total: i32, block: i32,
            blocks: i32, shift: u32, n: i32, by_lane: i32, sign: u32, inf: u32, nan: u32,
            flip: u32, top: u32):
    """Block ``g``'s elements, in order, each to the next place of its digit."""
    g = vyre.global_id(0)
    starts(counts, ends, g, blocks)
    for k in range(g * block, min(g * block + block, total)):
        slot = g * RADIX + digit(bits, at, k, shift, n, by_lane, sign, inf, flip, top)
        to = counts[slot]
        counts[slot] = to + 1
        out[to] = canonical(bits[k], sign, inf, nan)


@vyre.kernel(workgroup=(WORKGROUP,))
def scatter_with_place(bits: U32, at: U32, counts: I32, ends: I32, out: U32, out_at: U32,
                       total: i32, block: i32, blocks: i32, shift: u32, n: i32,
                       by_lane: i32, sign: u32, inf: u32, nan: u32, flip: u32, top: u32):
    """``scatter``, each element's place in lane order going with it."""
    g = vyre.global_id(0)
    starts(counts, ends, g, blocks)
    for k in range(g * block, min(g * block + block, total)):
        slot = g * RADIX + digit(bits, at, k, shift, n, by_lane, sign, inf, flip, top)
        to = counts[slot]
        counts[slot] = to + 1
        out[to] = canonical(bits[k], sign, inf, nan)
        out_at[to] = at[k]


@vyre.kernel(workgroup=(256,))
def places(at: U32):
    """Each element's place in lane order: its index."""
    g = vyre.global_id(0)
    at[g] = u32(g)


@vyre.kernel(workgroup=(256,))
def gather(x: U32, out: U32, n: i32, inner: i32):
    """``x``'s lanes one after another (lane order)."""
    g = vyre.global_id(0)
    out[g] = x[address(g, n, inner)]


@vyre.kernel(workgroup=(256,))
def spread(x: U32, out: U32, n: i32, inner: i32):
    """Lane order back to ``x``'s."""
    g = vyre.global_id(0)
    out[address(g, n, inner)] = x[g]


@vyre.kernel(workgroup=(256,))
def positions(at: U32, out: I32, n: i32, inner: i32):
    """argsort's result: each sorted element's index along the axis, ``at % n`` (an i32,
    as ``lib.steps.argmax``'s), put where ``x``'s order has it."""
    g = vyre.global_id(0)
    out[address(g, n, inner)] = i32(at[g]) % n


@vyre.func
def wide_nan(low, high):
    """Whether the f64 of words ``(low, high)`` is a NaN: exponent all ones, a fraction."""
    mag = high & 0x7FFFFFFF
    return mag > 0x7FF00000 or (mag == 0x7FF00000 and low != 0)


@vyre.kernel(workgroup=(256,))
def wide_keys(x: U32, high: U32, low: U32, n: i32, inner: i32):
    """An f64's 64-bit key as two words, in lane order: the 32-bit float rule on 64 bits
    (both zeros ``+0.0``'s key, every NaN the largest)."""
    g = vyre.global_id(0)
    w = u32(address(g, n, inner)) * 2
    lo = x[w]
    hi = x[w + 1]
    nan = wide_nan(lo, hi)
    zero = (hi & 0x7FFFFFFF) == 0 and lo == 0
    negative = hi >= 0x80000000
    high[g] = 0xFFFFFFFF if nan else (0x80000000 if zero else (
        ~hi if negative else hi | 0x80000000))
    low[g] = 0xFFFFFFFF if nan else (0 if zero else (~lo if negative else lo))


@vyre.kernel(workgroup=(256,))
def pick(x: U32, at: U32, out: U32):
    """``x`` in the order the places say."""
    g = vyre.global_id(0)
    out[g] = x[at[g]]


@vyre.kernel(workgroup=(256,))
def pick_wide(x: U32, at: U32, out: U32, n: i32, inner: i32):
    """The f64 sort's result: each sorted element's two words, put where ``x``'s order
    has it (a NaN's the canonical NaN's)."""
    g = vyre.global_id(0)
    w = u32(address(i32(at[g]), n, inner)) * 2
    to = u32(address(g, n, inner)) * 2
    lo = x[w]
    hi = x[w + 1]
    nan = wide_nan(lo, hi)
    out[to] = 0 if nan else lo
    out[to + 1] = 0x7FF80000 if nan else hi


def block_length(total: int) -> int:
    """Elements per block: about ``4 sqrt(total)``, a power of two from RADIX to MAX_BLOCK,
    so the counts (RADIX a block) stay a small share of the work and a small array is not
    one long walk. Any block gives the same result."""
    return min(MAX_BLOCK, max(RADIX, 1 << (4 * math.isqrt(total) - 1).bit_length()))


def digit_passes(width: int, lanes: int) -> list[tuple[int, int]]:
    """``(by_lane, shift)`` of each pass in order: the key's digits, then the lane's."""
    lane_bits = (lanes - 1).bit_length()
    return [(0, s) for s in range(0, width, 8)] + [(1, s) for s in range(0, lane_bits, 8)]


class _Passes:
    """The passes of one sort, added to ``b`` in turn: the words sorted so far and the
    places going with them (``carry``), each pass writing the other of two buffers."""

    def __init__(self, b: SequenceBuilder, total: int, n: int, carry: bool,
                 prefix: str) -> None:
        self.b, self.total, self.n, self.carry, self.prefix = b, total, n, carry, prefix
        self.bits = [f"{prefix}sorted0", f"{prefix}sorted1"]
        self.at = [f"{prefix}at0", f"{prefix}at1"]
        for name in self.bits + (self.at if carry else []):
            b.transient(name, DType.U32, total)
        self.size = block_length(total)
        self.blocks = -(-total // self.size)
        self.done = 0
        self.places = self.at[1] if carry else ""
        if carry:
            b.step(places, {"at": self.places}, dim=total)

    def sort(self, source: str, keys: Keys, lanes: int) -> str:
        """Sort the words of ``source`` by their keys (``keys``' rule), then by lane; the
        buffer that holds them sorted (``self.places``: their places)."""
        common = {"total": self.total, "block": self.size, "n": self.n, **keys.params()}
        for by_lane, shift in digit_passes(keys.width, lanes):
            turn = self.done % 2
            counts = self.b.transient(f"{self.prefix}counts{self.done}", DType.I32,
                                      RADIX * self.blocks)
            this = {**common, "shift": shift, "by_lane": by_lane, "bits": source,
                    "at": self.places or source, "counts": counts}
            self.b.step(count_digits, this, dim=self.blocks)
            ends = scan.add(self.b, counts, shape=(self.blocks, RADIX), axis=0,
                            name=f"{self.prefix}ends{self.done}")
            moved = {**this, "ends": ends, "out": self.bits[turn], "nan": keys.nan,
                     "blocks": self.blocks}
            if self.carry:
                self.b.step(scatter_with_place, {**moved, "out_at": self.at[turn]},
                            dim=self.blocks)
                self.places = self.at[turn]
            else:
                self.b.step(scatter, moved, dim=self.blocks)
            source = self.bits[turn]
            self.done += 1
        return source


def _steps(b: SequenceBuilder, x: str, dtype: np.dtype, lanes: int, n: int, inner: int,
           arg: bool, prefix: str = "", result: str = "result") -> str:
    """Every pass of a sort of ``lanes`` lanes of ``n`` (``inner`` > 1: strided in ``x``
    seen as ``(outer, n, inner)``) added to ``b``: ``x`` holds the elements' u32 words
    (f16 widened, f64 two), the transients' names start with ``prefix``. The buffer that
    holds the sorted words in ``x``'s layout, or (``arg``) the i32 places along the axis;
    ``result`` where a last step writes one."""
    total = lanes * n
    wide = dtype == np.float64
    run = _Passes(b, total, n, carry=arg or lanes > 1 or wide, prefix=prefix)
    lanes_back = {"n": n, "inner": inner, "out": result}
    if wide:  # (the low words' passes, then the high words' in that order, then lanes)
        high, low, high_now = (b.transient(f"{prefix}{name}", DType.U32, total)
                               for name in ("high", "low", "high_now"))
        b.step(wide_keys, {"x": x, "high": high, "low": low, "n": n, "inner": inner},
               dim=total)
        run.sort(low, KEYS[np.dtype(np.uint32)], 1)
        b.step(pick, {"x": high, "at": run.places, "out": high_now}, dim=total)
        run.sort(high_now, KEYS[np.dtype(np.uint32)], lanes)
        if not arg:
            b.transient(result, DType.U32, 2 * total)
            b.step(pick_wide, {"x": x, "at": run.places, **lanes_back}, dim=total)
            return result
    else:
        source = x
        if inner > 1:
            b.step(gather, {"x": x, "out": run.bits[1], "n": n, "inner": inner}, dim=total)
            source = run.bits[1]
        source = run.sort(source, KEYS[dtype], lanes)
        if not arg and inner == 1:
            return source
        if not arg:
            b.transient(result, DType.U32, total)
            b.step(spread, {"x": source, **lanes_back}, dim=total)
            return result
    b.transient(result, DType.I32, total)
    b.step(positions, {"at": run.places, **lanes_back}, dim=total)
    return result


@functools.lru_cache(maxsize=256)
def _sequence(dtype: np.dtype, lanes: int, n: int, inner: int, arg: bool) -> Sequence:
    """Every pass of a sort (``_steps``) as one sequence of the words the host hands it;
    ``arg``: the places are returned."""
    b = SequenceBuilder()
    b.input("x", DType.U32, lanes * n * (2 if dtype == np.float64 else 1))
    return b.build(returns=[_steps(b, "x", dtype, lanes, n, inner, arg)])


@functools.cache
def _words(dtype: DType) -> ir.Program:
    """A buffer of ``dtype``'s elements as the words the host hands ``lib.sort``'s
    kernels (``x.view(np.uint32)``): an f16's 16 bits in a word, an f64's two words, low
    first. (A NaN's bits are the canonical NaN's: every NaN has one key, and is stored
    canonical, so the order and the bytes are those of any payload.)"""
    k = ir.Kernel(workgroup=(256,))
    x, out = k.read("x", dtype), k.read_write("out", DType.U32)
    i = k.let("i", ir.global_id())
    with k.if_(i < x.len):
        if dtype is DType.F64:
            bits = k.let("bits", x[i].bitcast(DType.U64))
            out[i * 2] = (bits & 0xFFFFFFFF).cast(DType.U32)
            out[i * 2 + 1] = (bits >> 32).cast(DType.U32)
        elif dtype is DType.F16:
            out[i] = x[i].bitcast(DType.U16).cast(DType.U32)
        else:
            out[i] = x[i].bitcast(DType.U32)
    return k.build()


@functools.cache
def _elements(dtype: DType) -> ir.Program:
    """The words of ``_words`` as ``dtype``'s elements again."""
    k = ir.Kernel(workgroup=(256,))
    words, out = k.read("x", DType.U32), k.read_write("out", dtype)
    i = k.let("i", ir.global_id())
    with k.if_(i < out.len):
        if dtype is DType.F64:
            high = words[i * 2 + 1].cast(DType.U64) << 32
            out[i] = (high | words[i * 2].cast(DType.U64)).bitcast(DType.F64)
        elif dtype is DType.F16:
            out[i] = words[i].cast(DType.U16).bitcast(DType.F16)
        else:
            out[i] = words[i].bitcast(dtype)
    return k.build()


def add(b: SequenceBuilder, source: str, *, shape: Any = None, axis: int | None = -1,
        arg: bool = False, name: str | None = None) -> str:
    """Add the sort (``arg``: argsort) of the declared buffer ``source`` (seen as
    ``shape``, default flat; along ``axis``, None: the whole buffer) to ``b``: its
    elements' bits into words (a bitcast), ``lib.sort``'s passes over them unchanged,
    and for a sort the sorted words back into the buffer's dtype. The name of the
    transient that holds the result (``source``'s size; argsort's: i32 indices along the
    axis); its passes' transients are named after it."""
    given, where = buffer_split(b, source, shape, axis)
    name = name or f"{source}_{'argsort' if arg else 'sort'}"
    wide = given.dtype is DType.F64
    words = b.transient(f"{name}_words", DType.U32, given.count * (2 if wide else 1))
    b.step(_words(given.dtype), {"x": source, "out": words}, dim=given.count)
    found = _steps(b, words, np.dtype(given.dtype.value_np), where.outer * where.inner,
                   where.n, where.inner, arg, prefix=f"{name}_",
                   result=name if arg else f"{name}_result")
    if not arg:
        b.transient(name, given.dtype, given.count)
        b.step(_elements(given.dtype), {"x": found, "out": name}, dim=given.count)
    return name


def _sort(drv: Any, x: Any, axis: Any, backend: str | None, arg: bool) -> np.ndarray:
    array = as_input(x, "x")
    if axis is None:
        array, axis = array.reshape(-1), 0
    where = split(array.shape, axis)
    if array.size == 0:
        return np.empty(array.shape, np.intp if arg else array.dtype)
    half = array.itemsize == 2  # (f16: each word widened to a u32; f64: two u32 words)
    words = array.view(np.uint16).astype(np.uint32) if half else array.view(np.uint32)
    seq = _sequence(array.dtype, where.outer * where.inner, where.n, where.inner, arg)
    got, = drv.dispatch(seq, [words.reshape(-1)], backend=backend)
    if arg:
        return np.asarray(got).astype(np.intp).reshape(array.shape)
    if half:
        return np.asarray(got).astype(np.uint16).view(array.dtype).reshape(array.shape)
    return np.array(got).view(array.dtype).reshape(array.shape)


def sort(drv: Any, x: Any, axis: int | None = -1, *, backend: str | None = None) -> np.ndarray:
    """``x`` sorted along ``axis`` (None: flattened first), ascending, as
    ``numpy.sort(x, axis, kind="stable")``: NaNs last, ``-0.0`` and ``+0.0`` equal (each
    keeps its sign and its place among equals); a NaN comes back canonical."""
    return _sort(drv, x, axis, backend, arg=False)


def argsort(drv: Any, x: Any, axis: int | None = -1, *,
            backend: str | None = None) -> np.ndarray:
    """The indices that sort ``x`` along ``axis`` (None: into the flattened array), as
    ``numpy.argsort(x, axis, kind="stable")``: equal elements in index order; ``numpy.intp``."""
    return _sort(drv, x, axis, backend, arg=True)


__all__ = ["argsort", "sort"]
