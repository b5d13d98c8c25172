"""Folding the conditions a specialization decides: once a constant is a literal, an
``if`` or a select on it (``if FLAT:``, ``a if MODE == 2 else b``) has one branch that
can run, and the program is written with that branch alone.

A backend then sees the program a user would have written for that value: the cpu
backend's range analysis follows ``base = g`` where it could not follow the branch not
taken (``(g // step) * span + g % step``), and no backend pays for a select per element.
Only conditions whose value is exact in every backend are folded: bool literals and
their logic, and comparisons of two integer literals of one type. Expressions are pure
(an atomic is a statement's whole initializer), so dropping a select's other operand
drops no effect; an ``if`` becomes a ``Block`` of its branch, which keeps its scope.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import Binary, BinOp, Block, Expr, If, Lit, Select, Stmt, Unary, UnOp
from vyre_core.ir.rewrite import transform

_COMPARE: dict[BinOp, Callable[[object, object], bool]] = {
    BinOp.EQ: operator.eq, BinOp.NE: operator.ne, BinOp.LT: operator.lt,
    BinOp.LE: operator.le, BinOp.GT: operator.gt, BinOp.GE: operator.ge}
_LOGIC: dict[BinOp, Callable[[bool, bool], bool]] = {
    BinOp.LOGICAL_AND: operator.and_, BinOp.AND: operator.and_,
    BinOp.LOGICAL_OR: operator.or_, BinOp.OR: operator.or_, BinOp.XOR: operator.xor}


def fold(stmt: Stmt) -> Stmt:
    """``stmt`` with every decided condition folded (the same object where none is)."""
    return transform(stmt, _step)


def _step(node: Expr | Stmt) -> Expr | Stmt:
    match node:
        case Select(Lit(DType.BOOL, bits), if_true, if_false):
            return if_true if bits else if_false
        case If(Lit(DType.BOOL, bits), then, orelse):
            return Block(then if bits else orelse)
        case Unary(UnOp.NOT, Lit(DType.BOOL, bits)):
            return Lit(DType.BOOL, int(not bits))
        case Binary(op, Lit(DType.BOOL, a), Lit(DType.BOOL, b)) if op in _LOGIC:
            return Lit(DType.BOOL, int(_LOGIC[op](bool(a), bool(b))))
        case Binary(op, Lit(ta) as a, Lit(tb) as b) if op in _COMPARE and ta is tb and \
                ta.is_int:
            return Lit(DType.BOOL, int(_COMPARE[op](a.value, b.value)))
    return node
