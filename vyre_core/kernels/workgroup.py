"""Workgroup reductions and scans called from kernel code (``s = vyre.workgroup_sum(v)``),
written out as IR statements over a workgroup buffer, in one defined order, so that
every backend gives the same bytes (docs/kernels.md, "Workgroup reductions and scans").
Pure: the lowering (``calls.Calls.workgroup``, a mixin of ``lower.Lowerer``) hands in
names it made fresh.

The order, for a workgroup of ``W`` invocations with linear local index ``l``:

- a reduction: the values stand in slots ``0..W-1``; while ``c > 1`` slots are live,
  ``h = ceil(c / 2)`` and slot ``i < c - h`` becomes ``op(slot i, slot i + h)``; then
  ``c = h``. Every invocation gets slot 0.
- an inclusive scan (Hillis and Steele): for ``d = 1, 2, 4, ...`` below ``W``, slot
  ``i >= d`` becomes ``slot(i - d) + slot i``, all slots read before any is written.
  Exclusive: slot ``l - 1`` of the inclusive scan, 0 in the first invocation.

Barriers separate the steps, and one follows the last read, so the buffer can be used
again and the call is one workgroup-wide step: it must run where every invocation of the
workgroup does (V016).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    Assign,
    Barrier,
    Binary,
    BinOp,
    Expr,
    IdKind,
    If,
    InvocationId,
    Let,
    Lit,
    Load,
    Stmt,
    Store,
    Var,
)

#: The operations, by the name ``vyre.workgroup_<name>`` carries: the IR op combining
#: two values, and whether it is a scan.
OPS: dict[str, tuple[BinOp, str | None]] = {
    "sum": (BinOp.ADD, None), "min": (BinOp.MIN, None), "max": (BinOp.MAX, None),
    "inclusive_sum": (BinOp.ADD, "inclusive"), "exclusive_sum": (BinOp.ADD, "exclusive"),
}


def _u32(v: int) -> Lit:
    return Lit.of(DType.U32, v)


def local_index(workgroup: tuple[int, ...]) -> Expr:
    """The invocation's linear index in its workgroup (u32), x fastest."""
    wx, wy, wz = (*workgroup, 1, 1)[:3]
    index: Expr = InvocationId(IdKind.LOCAL, 0)
    if wy * wz > 1:
        row: Expr = InvocationId(IdKind.LOCAL, 1)
        if wz > 1:
            row = Binary(BinOp.ADD, row, Binary(BinOp.MUL, _u32(wy),
                                                 InvocationId(IdKind.LOCAL, 2)))
        index = Binary(BinOp.ADD, index, Binary(BinOp.MUL, _u32(wx), row))
    return index


def expand(op: str, value: Expr, dtype: DType, workgroup: tuple[int, ...], scratch: str,
           fresh: Callable[[str], str]) -> tuple[list[Stmt], str]:
    """The statements of ``vyre.workgroup_<op>(value)`` over the workgroup buffer
    ``scratch`` (``dtype``, one slot per invocation) and the name of the variable that
    holds the result after them. ``fresh`` makes a variable name no other has."""
    combine, scan = OPS[op]
    size = math.prod(workgroup)
    here = fresh("wg_lane")
    lane = Var(here)

    def at(offset: int, sign: BinOp = BinOp.ADD) -> Expr:
        return lane if offset == 0 else Binary(sign, lane, _u32(offset))

    out: list[Stmt] = [Let(here, local_index(workgroup)), Store(scratch, lane, value),
                       Barrier()]
    if scan is None:
        live = size
        while live > 1:
            half = (live + 1) // 2
            out += [If(Binary(BinOp.LT, lane, _u32(live - half)),
                       (Store(scratch, lane, Binary(combine, Load(scratch, lane),
                                                    Load(scratch, at(half)))),), ()),
                    Barrier()]
            live = half
        result = fresh("wg_result")
        out += [Let(result, Load(scratch, _u32(0))), Barrier()]
        return out, result
    step = 1
    while step < size:
        new = fresh("wg_step")
        out += [Let(new, Load(scratch, lane)),
                If(Binary(BinOp.GE, lane, _u32(step)),
                   (Assign(new, Binary(combine, Load(scratch, at(step, BinOp.SUB)),
                                       Var(new))),), ()),
                Barrier(), Store(scratch, lane, Var(new)), Barrier()]
        step *= 2
    result = fresh("wg_result")
    if scan == "inclusive":
        out.append(Let(result, Load(scratch, lane)))
    else:
        out += [Let(result, Lit.of(dtype, 0)),
                If(Binary(BinOp.GT, lane, _u32(0)),
                   (Assign(result, Load(scratch, at(1, BinOp.SUB))),), ())]
    out.append(Barrier())
    return out, result
