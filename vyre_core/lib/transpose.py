"""``lib.transpose``: numpy.transpose's result as a contiguous copy, the same bytes.

A transpose moves bits, so it runs on the elements' bits as unsigned words (u8, u16, or
u32 with an extra last axis of ``itemsize / 4`` words): no float is loaded or stored, so
a NaN's payload survives (a backend stores every float NaN as the canonical one) and any
numeric dtype numpy has is taken. Axes of length 1 are dropped and axes that stay
neighbours in the same order are merged (``layout``), so what runs is the smallest
equivalent permutation:

- none left (the identity): the copy is numpy's own;
- the last axis stays last: ``copy_rows``, each run of the last axis copied whole, both
  sides read and written consecutively;
- else, with at most one other axis, ``tiled``: a TILE x TILE tile of the two axes that
  are last on either side is read along the input's last axis into workgroup memory
  and written along the output's, so a GPU's loads and stores are both coalesced; the
  other axis is the launch's third;
- else (two or more other axes) ``copy_rows`` with rows of one element: a gather.

``add`` puts the same step in a caller's sequence (``lib.steps.transpose``); there the
elements move in the buffer's own dtype.

This module does not use ``from __future__ import annotations``: ``tiled`` makes a
kernel per word type, its tile an array of it.
"""

import functools
import math
import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

import vyre_core as vyre
from vyre_core import u32
from vyre_core.errors import InvalidInputError
from vyre_core.ir.dtypes import DType
from vyre_core.kernels import KernelFunction
from vyre_core.lib.args import MAX_ELEMENTS
from vyre_core.sequence import Sequence, SequenceBuilder

#: The edge of a tile of ``tiled`` (a TILE x TILE workgroup).
TILE = 16
#: Invocations per workgroup of ``copy_rows``.
WORKGROUP = 256
#: The word an element's bits move as, by itemsize (larger ones: several u32).
WORDS = {1: DType.U8, 2: DType.U16, 4: DType.U32}


@vyre.func
def place(index, shape, strides):
    """The offset of the ``index``-th element (numpy's order) of an array of extents
    ``shape`` whose axes are ``strides`` elements apart. Unsigned: an i32 floor division
    is several instructions on a GPU (Python's rounding, x // 0), a u32 one is one."""
    offset = u32(0)
    rest = index
    for d in range(len(shape) - 1, -1, -1):
        offset += (rest % shape[d]) * strides[d]
        rest = rest // shape[d]
    return offset


@vyre.kernel(workgroup=(WORKGROUP,))
def copy_rows(x, out, shape: vyre.Array[u32], strides: vyre.Array[u32], length: u32):
    """Element ``g`` of the output: element ``g % length`` of row ``g // length``, whose
    start in ``x`` is its place among the rows (``shape``, ``strides``: the output's
    axes but the last, and their strides in ``x``)."""
    g = u32(vyre.global_id(0))
    out[g] = x[place(g // length, shape, strides) + g % length]


@functools.cache
def tiled(word: DType) -> KernelFunction:
    """The tiled kernel for one word type. Axis ``a`` is ``x``'s last (length ``la``,
    ``oa`` apart in ``out``), axis ``q`` is ``out``'s last (``lq``, ``sq`` apart in
    ``x``); the one other axis, if any, is ``workgroup_id(2)``, ``xs`` apart in ``x`` and
    ``os`` in ``out``. Launched over ``dim=(la, lq, other)``. (An offset from a loop
    over several other axes, as ``place``'s, cost the cpu backend its proven workgroups:
    800 ms against 60-100 ms for a 4096 x 4096 transpose.)"""
    T = word

    @vyre.kernel(workgroup=(TILE, TILE, 1))
    def transpose_tiles(x, out, xs: u32, os: u32, la: u32, lq: u32, sq: u32, oa: u32):
        tile = vyre.shared(T, TILE * (TILE + 1))  # (+1: a column reads no one bank)
        lx, ly = u32(vyre.local_id(0)), u32(vyre.local_id(1))
        ta, tq = u32(vyre.workgroup_id(0)) * TILE, u32(vyre.workgroup_id(1)) * TILE
        z = u32(vyre.workgroup_id(2))
        if ta + lx < la and tq + ly < lq:
            tile[ly * (TILE + 1) + lx] = x[z * xs + (tq + ly) * sq + ta + lx]
        vyre.barrier()
        if ta + ly < la and tq + lx < lq:
            out[z * os + (ta + ly) * oa + tq + lx] = tile[lx * (TILE + 1) + ly]

    return transpose_tiles


def permutation(ndim: int, axes: Any) -> tuple[int, ...]:
    """numpy.transpose's ``axes``: None reverses them; else each axis once, negative
    from the end. Anything else an ``InvalidInputError`` with a Fix."""
    if axes is None:
        return tuple(range(ndim))[::-1]
    try:
        given = [operator.index(a) for a in axes]
    except TypeError:
        raise InvalidInputError(
            f"axes={axes!r} is not a sequence of ints",
            f"Pass a permutation of 0..{ndim - 1} (a tuple of ints), or axes=None to "
            "reverse the axes.") from None
    if len(given) != ndim or not all(-ndim <= a < ndim for a in given) or \
            len({a % ndim for a in given}) != ndim:
        raise InvalidInputError(
            f"axes={tuple(given)} is not a permutation of the {ndim} axes of x",
            f"Pass each of 0..{ndim - 1} once (negative from the end), in the order the "
            "result's axes take them, or axes=None to reverse the axes.")
    return tuple(a % ndim for a in given)


def layout(shape: tuple[int, ...], perm: tuple[int, ...]) -> tuple[tuple[int, ...],
                                                                     tuple[int, ...]]:
    """The smallest ``(shape, perm)`` that moves the same elements as ``shape``
    transposed by ``perm``: axes of length 1 dropped, and each run of axes that are
    neighbours in both orders merged into one."""
    kept = [a for a in perm if shape[a] != 1]
    runs: list[list[int]] = []
    for a in kept:
        if runs and runs[-1][-1] == a - 1:
            runs[-1].append(a)
        else:
            runs.append([a])
    by_input = sorted(range(len(runs)), key=lambda r: runs[r][0])
    merged = tuple(math.prod(shape[a] for a in runs[r]) for r in by_input)
    return merged, tuple(by_input.index(r) for r in range(len(runs)))


@dataclass(frozen=True)
class Launch:
    """What runs for a layout: ``kernel`` ("copy", "rows" or "tiles") and its sizes."""

    kernel: str
    sizes: tuple[tuple[str, Any], ...] = ()


def _strides(shape: tuple[int, ...]) -> list[int]:
    return [math.prod(shape[a + 1:]) for a in range(len(shape))]


def launch(shape: tuple[int, ...], perm: tuple[int, ...]) -> Launch:
    """The kernel and the sizes it is given for a layout (of ``layout``)."""
    d = len(shape)
    if perm == tuple(range(d)):
        return Launch("copy")
    strides = _strides(shape)
    out_shape = [shape[a] for a in perm]
    if perm[-1] == d - 1:
        return Launch("rows", (("shape", tuple(out_shape[:-1])),
                               ("strides", tuple(strides[a] for a in perm[:-1])),
                               ("length", shape[-1])))
    rest = [k for k in range(d) if perm[k] not in (d - 1, perm[-1])]
    if len(rest) > 1:  # (each element gathered: rows of one)
        return Launch("rows", (("shape", tuple(out_shape)),
                               ("strides", tuple(strides[a] for a in perm)), ("length", 1)))
    out_strides = _strides(tuple(out_shape))
    return Launch("tiles", (
        ("xs", strides[perm[rest[0]]] if rest else 0),
        ("os", out_strides[rest[0]] if rest else 0),
        ("la", shape[-1]), ("lq", shape[perm[-1]]), ("sq", strides[perm[-1]]),
        ("oa", out_strides[perm.index(d - 1)])))


def _steps(b: SequenceBuilder, source: str, out: str, word: DType,
           shape: tuple[int, ...], perm: tuple[int, ...]) -> None:
    """The step moving ``source`` seen as ``shape`` into ``out`` transposed by ``perm``
    (a layout of ``layout``); the identity is a copy of rows as long as the buffer."""
    count = math.prod(shape)
    run = launch(shape, perm)
    if run.kernel == "copy":
        run = Launch("rows", (("shape", (1,)), ("strides", (0,)), ("length", count)))
    bind: dict[str, Any] = {"x": source, "out": out}
    for key, value in run.sizes:
        bind[key] = b.constant(f"{out}_{key}", DType.U32, value) \
            if isinstance(value, tuple) else value
    if run.kernel == "rows":
        b.step(copy_rows, bind, dim=count)
    else:
        sizes = dict(run.sizes)
        b.step(tiled(word), bind, dim=(sizes["la"], sizes["lq"],
                                       count // (sizes["la"] * sizes["lq"])))


def add(b: SequenceBuilder, source: str, *, shape: Any, axes: Any = None,
        name: str | None = None) -> str:
    """Add the transpose of the declared buffer ``source`` (laid out as ``shape``,
    numpy's order) by ``axes`` to ``b``, as ``lib.transpose``; the name of the transient
    (``source``'s dtype and size, flat) that will hold it. The elements move in their
    own dtype here, so a float NaN's payload becomes the canonical NaN's, as every float
    vyre stores does."""
    given = b.buffer(source)
    shape = tuple(shape)
    if math.prod(shape) != given.count or not given.dtype.is_numeric:
        raise InvalidInputError(
            f"buffer {source!r} ({given.dtype.value}[{given.count}]) seen as shape {shape}",
            "Pass the shape its elements are laid out in (numpy's order, its product the "
            "buffer's count), of a buffer of numbers.")
    name = name or f"{source}_transpose"
    b.transient(name, given.dtype, given.count)
    _steps(b, source, name, given.dtype, *layout(shape, permutation(len(shape), axes)))
    return name


@functools.lru_cache(maxsize=256)
def _sequence(word: DType, shape: tuple[int, ...], perm: tuple[int, ...]) -> Sequence:
    """The transpose of a layout as one step, built once per layout and word type."""
    b = SequenceBuilder()
    b.input("x", word, math.prod(shape))
    b.transient("out", word, math.prod(shape))
    _steps(b, "x", "out", word, shape, perm)
    return b.build(returns=["out"])


def words(dtype: np.dtype) -> tuple[DType, int]:
    """The unsigned word an element of ``dtype`` moves as, and how many per element;
    a dtype that is not a number's (object, strings, records) is refused."""
    if dtype.kind not in "biufc" or (dtype.itemsize not in (1, 2) and dtype.itemsize % 4):
        raise InvalidInputError(
            f"x has dtype {dtype}, which lib.transpose does not move",
            "Pass an array of numbers (bool, ints, floats, complex); numpy.transpose "
            "handles the rest.")
    if dtype.itemsize in WORDS:
        return WORDS[dtype.itemsize], 1
    return DType.U32, dtype.itemsize // 4


def transpose(drv: Any, x: Any, axes: Any = None, *,
              backend: str | None = None) -> np.ndarray:
    """``numpy.transpose(x, axes)`` as a new C-contiguous array: the same elements, bit
    for bit (NaN payloads included), any number of axes."""
    given = np.asarray(x)
    array = np.ascontiguousarray(given).reshape(given.shape)  # (a 0-d one stays 0-d)
    word, per = words(array.dtype)
    perm = permutation(array.ndim, axes)
    result_shape = tuple(array.shape[a] for a in perm)
    if array.size * per > MAX_ELEMENTS:
        raise InvalidInputError(
            f"x has {array.size * per} words of 32 bits or less; a vyre.lib call moves at "
            f"most {MAX_ELEMENTS}", "Transpose it in parts (slices along an axis that "
            "stays in place) and put them together.")
    shape, order = (*array.shape, per), (*perm, array.ndim)
    shape, order = layout(shape, order)
    if array.size == 0 or launch(shape, order).kernel == "copy":
        return np.array(np.transpose(array, perm), order="C")  # (a copy, never x)
    seq = _sequence(word, shape, order)
    got, = drv.dispatch(seq, [array.reshape(-1).view(word.value_np)],
                        backend=backend)
    return np.array(got).view(array.dtype).reshape(result_shape)


__all__ = ["add", "copy_rows", "launch", "layout", "permutation", "tiled", "transpose",
           "words"]
