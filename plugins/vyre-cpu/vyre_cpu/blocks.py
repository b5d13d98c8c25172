"""The proven version of a plain kernel that runs in lockstep
(``codegen._Writer.in_blocks``): what decides whether it can be written, and how its
lanes are laid out. Pure: no numba.

A plain program (no barriers, workgroup memory, subgroups or atomics) whose loops run once
per workgroup has independent invocations, so its lanes need not be a workgroup: this
version runs them in *blocks*, each one row of the grid, up to ``LANES`` consecutive ids
along the axis the program's accesses step on (``_Writer.inner_axis``), the rest fixed. A
loop whose bounds are the same in every lane runs once per block, each statement over the
block's lanes in a loop of consecutive ids that LLVM vectorises, as PoCL and Intel's
OpenCL CPU runtime run a work-group's work-items. The kernel's leading launch guard
(``if global_id(a) >= n: return``) becomes the blocks' extents, so no lane returns and
no lane loop needs a mask."""

from __future__ import annotations

from vyre_core.ir.nodes import (
    Binary,
    BinOp,
    Expr,
    IdKind,
    If,
    InvocationId,
    Return,
    Stmt,
    walk,
)

#: The most lanes of a block (a row's ids are split into equal blocks of at most this
#: many): long enough for the vectoriser (a loop of 8 stays scalar, and every pass of a
#: loop run once pays the lane loop's setup), short enough that the rows a block gathers
#: from (lanes across rows: ``a[i, j]`` with ``i`` the lane) stay in the first-level
#: cache. At PolyBench's MEDIUM size, atax's ``A x`` (lanes across rows) took 0.043 ms
#: in blocks of 128, 0.045 in 256, 0.059 in 512; its ``A^T y`` (lanes along rows) 0.010,
#: 0.008 and 0.005 ms.
LANES = 512
#: How many passes of a loop run once per block a lane runs in one lane loop
#: (``_Writer.unrolled``).
UNROLL = 4
#: A let of at most this many nodes over the lane's ids is written as its code where read
#: rather than kept in a lane array.
INLINE_NODES = 8


class Unblockable(Exception):
    """The kernel cannot run in blocks (a loop run once whose bounds differ within one)."""


def launch_guard(body: tuple[Stmt, ...]) -> tuple[dict[int, Expr], tuple[Stmt, ...]] | None:
    """The bounds a leading launch guard (``if gid(a) >= n or gid(b) >= m: return``, as
    ``vyre_core.kernels`` writes it) puts on the global ids, by axis, and the statements
    after it; no bounds where there is no such guard. None when a ``return`` is left
    anywhere else: a lane that returns needs the lockstep's masks, which this version
    is without."""
    bounds: dict[int, Expr] = {}
    if body and isinstance(body[0], If) and body[0].then == (Return(),) and \
            not body[0].orelse:
        found = _past(body[0].cond)
        if found is not None:
            bounds, body = found, body[1:]
    if any(isinstance(n, Return) for n in walk(body)):
        return None
    return bounds, body


def _past(cond: Expr) -> dict[int, Expr] | None:
    """``gid(a) >= x or gid(b) >= y ...`` as ``{a: x, b: y}`` (None: another condition)."""
    match cond:
        case Binary(BinOp.GE, InvocationId(IdKind.GLOBAL, axis), bound):
            return {axis: bound}
        case Binary(BinOp.OR | BinOp.LOGICAL_OR, lhs, rhs):
            a, b = _past(lhs), _past(rhs)
            if a is None or b is None or a.keys() & b.keys():
                return None
            return a | b
    return None
