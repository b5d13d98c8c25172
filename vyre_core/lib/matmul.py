"""``lib.matmul``: numpy.matmul's product, in one order on every backend.

The order (docs/lib.md, "Matrix products and transposes"): ``out[i, j]`` is
``((a[i,0]*b[0,j] + a[i,1]*b[1,j]) + a[i,2]*b[2,j]) + ...``, k ascending, every product
rounded to the dtype before it is added (the IR never contracts into a fused
multiply-add). The kernel is tiled through workgroup memory (``TILE`` x ``TILE``
invocations, each one element of the result; ``KTILE`` of the inner dimension staged per
step), but the tile only changes which loads are shared, never which operations run in
which order: every ``KTILE`` gives the same bytes.

Floats start from -0 rather than 0 (``-0 + x`` is ``x`` for every ``x``, so the sum is
the one that starts from the first product; ``+0`` would turn a ``-0`` result into
``+0``), and the tile of ``a`` is padded with -0 and that of ``b`` with +0 past the inner
dimension, so a padded product is -0, which adds nothing either.

``add`` puts the product in a caller's sequence (``lib.steps.matmul``); ``matmul`` runs
it as a sequence of its own, built once per shape.

This module does not use ``from __future__ import annotations``: the kernels are made
per dtype in ``tiled``, and their annotations name that dtype from its closure.
"""

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

import vyre_core as vyre
from vyre_core import i32
from vyre_core.errors import InvalidInputError
from vyre_core.ir.dtypes import DType
from vyre_core.kernels import KernelFunction
from vyre_core.lib.args import DTYPES, MAX_ELEMENTS, as_input
from vyre_core.sequence import Sequence, SequenceBuilder

#: The workgroup's edge: a TILE x TILE block of the result per workgroup.
TILE = 16
#: The inner dimension staged per step: the tuner's range is 1 to TILE (every value the
#: same bytes); TILE on every backend (docs/lib.md says why).
KTILE = TILE


@functools.cache
def tiled(dtype: DType) -> KernelFunction:
    """The tiled kernel for ``dtype`` (its workgroup tiles are arrays of it): ``c[z] =
    a[z] @ b[z]`` for ``a`` of ``(batch, m, k)``, ``b`` of ``(batch, k, n)``, launched
    over ``dim=(n, m, batch)``."""
    T = dtype
    pad = -0.0 if dtype.is_float else 0  # (a's pad times b's 0 is -0: adds nothing)

    @vyre.kernel(workgroup=(TILE, TILE, 1))
    def matmul_tiles(a: vyre.Array[T, 3], b: vyre.Array[T, 3], c: vyre.Array[T, 3], *,
                     KTILE: vyre.Constant[i32](low=1, high=TILE) = TILE):
        a_tile = vyre.shared(T, TILE * TILE)
        b_tile = vyre.shared(T, TILE * TILE)
        col, row, z = vyre.global_id(0), vyre.global_id(1), vyre.global_id(2)
        lx, ly = vyre.local_id(0), vyre.local_id(1)
        m, k_dim, n = a.shape[1], a.shape[2], b.shape[2]
        acc = T(pad)
        for t in range((k_dim + KTILE - 1) // KTILE):
            a_col = t * KTILE + lx
            b_row = t * KTILE + ly
            a_tile[ly * TILE + lx] = a[z, row, a_col] \
                if row < m and a_col < k_dim and lx < KTILE else T(pad)
            b_tile[ly * TILE + lx] = b[z, b_row, col] \
                if b_row < k_dim and col < n and ly < KTILE else T(0)
            vyre.barrier()
            for j in range(KTILE):
                acc += a_tile[ly * TILE + j] * b_tile[j * TILE + lx]
            vyre.barrier()  # (the next step overwrites the tiles)
        if row < m and col < n:
            c[z, row, col] = acc

    return matmul_tiles


@dataclass(frozen=True)
class Plan:
    """A product as numpy sees it: ``(..., m, k) @ (..., k, n)`` with the stacks
    broadcast to ``batch``, whether ``b`` has a stack of its own (more than one matrix),
    and the shape of numpy's result (1-D operands' axes dropped)."""

    m: int
    k: int
    n: int
    batch: tuple[int, ...]
    b_stacked: bool
    shape: tuple[int, ...]


def plan(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> Plan:
    """numpy.matmul's shape rules: a 1-D ``a`` is a row (``(1, k)``), a 1-D ``b`` a column,
    their axis dropped from the result; the axes before the last two broadcast. Each
    mismatch an ``InvalidInputError`` with a Fix."""
    if not a_shape or not b_shape:
        raise InvalidInputError(
            f"matmul of a 0-d array (shapes {a_shape} and {b_shape}): numpy refuses it too",
            "Pass arrays of at least one dimension; to scale by a number, multiply.")
    a2 = (1, *a_shape) if len(a_shape) == 1 else a_shape
    b2 = (*b_shape, 1) if len(b_shape) == 1 else b_shape
    if a2[-1] != b2[-2]:
        raise InvalidInputError(
            f"matmul of shapes {a_shape} and {b_shape}: the inner dimensions differ "
            f"({a2[-1]} and {b2[-2]})",
            "Pass a of shape (..., m, k) and b of shape (..., k, n), k the same: "
            "transpose one (lib.transpose) or check which axis holds k.")
    try:
        batch = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
    except ValueError:
        raise InvalidInputError(
            f"matmul of shapes {a_shape} and {b_shape}: the stacked axes {a2[:-2]} and "
            f"{b2[:-2]} do not broadcast", "Pass stacks whose leading axes are equal or 1 "
            "(numpy's broadcasting), or one operand without stacked axes.") from None
    shape = batch + a2[-2:-1] * (len(a_shape) > 1) + b2[-1:] * (len(b_shape) > 1)
    b_stacked = math.prod(b2[:-2]) > 1
    count = math.prod(batch)  # (a stacked b: both operands are copied out to the stack)
    largest = max((math.prod(shape), *((count * a2[-2] * a2[-1], count * math.prod(b2[-2:]))
                                       if b_stacked else ())))
    if largest > MAX_ELEMENTS:
        raise InvalidInputError(
            f"matmul of shapes {a_shape} and {b_shape} would make an array of {largest} "
            f"elements; a vyre.lib call makes at most {MAX_ELEMENTS}", "Multiply in parts "
            "(slices of the stack, of a's rows or of b's columns) and put them together.")
    return Plan(a2[-2], a2[-1], b2[-1], batch, b_stacked, shape)


def add(b: SequenceBuilder, x: str, y: str, *, m: int, k: int, n: int, batch: int = 1,
        name: str | None = None) -> str:
    """Add the product of the declared buffers ``x`` (``(batch, m, k)``, numpy's order)
    and ``y`` (``(batch, k, n)``) to ``b``, in ``lib.matmul``'s order; the name of the
    transient (``(batch, m, n)``, flat) that will hold it."""
    tx, ty = b.buffer(x), b.buffer(y)
    if tx.dtype != ty.dtype or tx.dtype not in DTYPES.values():
        allowed = ", ".join(t.value for t in DTYPES.values())
        raise InvalidInputError(
            f"matmul of buffers {x!r} ({tx.dtype.value}) and {y!r} ({ty.dtype.value})",
            f"Multiply two buffers of one dtype, one of {allowed}.")
    if (tx.count, ty.count) != (batch * m * k, batch * k * n):
        raise InvalidInputError(
            f"buffers {x!r} and {y!r} hold {tx.count} and {ty.count} elements, not the "
            f"{batch * m * k} and {batch * k * n} of ({batch}, {m}, {k}) and ({batch}, {k}, "
            f"{n})", "Pass the m, k, n (and batch) the buffers are laid out in, numpy's "
            "order: x as (batch, m, k), y as (batch, k, n).")
    name = name or f"{x}_matmul"
    b.transient(name, tx.dtype, batch * m * n)
    b.step(tiled(tx.dtype), {"a": x, "b": y, "c": name}, dim=(n, m, batch),
           constants={"KTILE": KTILE},
           shapes={"a": (batch, m, k), "b": (batch, k, n), "c": (batch, m, n)})
    return name


@functools.lru_cache(maxsize=256)
def _sequence(dtype: np.dtype, batch: int, m: int, k: int, n: int) -> Sequence:
    """The product of ``batch`` pairs of matrices as one step, built once per shape."""
    b = SequenceBuilder()
    b.input("a", DTYPES[dtype], batch * m * k)
    b.input("b", DTYPES[dtype], batch * k * n)
    return b.build(returns=[add(b, "a", "b", m=m, k=k, n=n, batch=batch, name="c")])


def operands(x: np.ndarray, y: np.ndarray, p: Plan) -> tuple[np.ndarray, np.ndarray]:
    """``x`` and ``y`` as the kernel's ``(batch, m, k)`` and ``(batch, k, n)``. Where
    ``y`` is one matrix, ``x``'s stack is its rows (``(1, batch * m, k)``: no copy, the
    same sums); else each is copied out to the broadcast stack where numpy broadcasts
    it (a 1 among its stacked axes), and kept as it is where it already has that stack."""
    if not p.b_stacked:
        return x.reshape(1, -1, p.k), y.reshape(1, p.k, p.n)
    return tuple(np.ascontiguousarray(np.broadcast_to(
        v.reshape(*v.shape[:-2], rows, cols), (*p.batch, rows, cols))).reshape(-1, rows, cols)
        for v, rows, cols in ((x, p.m, p.k), (y, p.k, p.n)))


def matmul(drv: Any, a: Any, b: Any, *, backend: str | None = None) -> Any:
    """numpy.matmul's ``a @ b`` (stacks broadcast, 1-D operands promoted as numpy does) in
    the dtype of both (f16, f32, f64, i32, u32; integers wrap), each element summed in the
    order above; a numpy scalar for two 1-D arrays, zeros where k is 0."""
    shapes = np.shape(a), np.shape(b)  # (as_input makes a 0-d array 1-D)
    x, y = as_input(a, "a"), as_input(b, "b")
    if x.dtype != y.dtype:
        raise InvalidInputError(
            f"matmul of dtypes {x.dtype} and {y.dtype}: vyre.lib multiplies one dtype",
            f"Convert one first: b.astype(np.{x.dtype}) or a.astype(np.{y.dtype}) (numpy "
            "would promote to the wider; choose it yourself).")
    p = plan(*shapes)
    if math.prod(p.shape) == 0 or p.k == 0:
        return np.zeros(p.shape, x.dtype)[()]
    left, right = operands(x, y, p)
    seq = _sequence(x.dtype, len(left), left.shape[1], p.k, p.n)
    got, = drv.dispatch(seq, [left.reshape(-1), right.reshape(-1)],
                        backend=backend)
    return np.array(got).reshape(p.shape)[()]


__all__ = ["KTILE", "TILE", "Plan", "add", "matmul", "operands", "plan", "tiled"]
