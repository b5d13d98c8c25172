"""Substituting chosen values, and folding the conditions they decide: once a constant is
a literal, an ``if`` or a select on it (``if FLAT:``, ``a if MODE == 2 else b``) has one
branch that can run, and the program is written with that branch alone.

A backend then sees the program a user would have written for that value: the cpu
backend's range analysis follows ``base = g`` where it could not follow the branch not
taken (``(g // step) * span + g % step``), and no backend pays for a select per element.
A condition is decided when it reads a constant and nothing but constants, literals, bool
logic, comparisons of integers of one type and bitcasts of a constant or literal to an
integer (its bits, a NaN's the canonical ones), each exact on every backend; a condition a
program wrote as a literal is its own business and kept, as in a program without
constants. Expressions are pure (an atomic is a statement's whole initializer), so
dropping a select's other operand drops no effect; an ``if`` becomes a ``Block`` of its
branch, which keeps its scope.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from typing import TypeVar

from vyre_core.ir.dtypes import DType, bits_seen
from vyre_core.ir.nodes import (
    Binary,
    BinOp,
    Bitcast,
    Block,
    Expr,
    If,
    Lit,
    Select,
    SpecRef,
    Stmt,
    Unary,
    UnOp,
)
from vyre_core.ir.typerules import bitcast_allowed

Node = TypeVar("Node", Expr, Stmt)

_COMPARE: dict[BinOp, Callable[[object, object], bool]] = {
    BinOp.EQ: operator.eq, BinOp.NE: operator.ne, BinOp.LT: operator.lt,
    BinOp.LE: operator.le, BinOp.GT: operator.gt, BinOp.GE: operator.ge}
_LOGIC: dict[BinOp, Callable[[bool, bool], bool]] = {
    BinOp.LOGICAL_AND: operator.and_, BinOp.AND: operator.and_,
    BinOp.LOGICAL_OR: operator.or_, BinOp.OR: operator.or_, BinOp.XOR: operator.xor}


def substitute(node: Node, lits: Mapping[str, Lit]) -> Node:
    """``node`` with each constant of ``lits`` its literal and each ``if`` and select
    whose condition those literals decide replaced by its branch taken (the same object
    where nothing changes). A constant ``lits`` lacks is left for the validator."""
    match node:
        case SpecRef(name):
            return lits.get(name, node)
        case Select(cond, if_true, if_false):
            taken = decided(cond, lits)
            if taken is not None:
                return substitute(if_true if taken else if_false, lits)
        case If(cond, then, orelse):
            taken = decided(cond, lits)
            if taken is not None:
                return Block(tuple(substitute(s, lits) for s in (then if taken else orelse)))
    changes = {}
    for field in fields(node):
        old = getattr(node, field.name)
        if isinstance(old, Expr | Stmt):
            new = substitute(old, lits)
        elif isinstance(old, tuple) and old and isinstance(old[0], Stmt):
            new = tuple(substitute(s, lits) for s in old)
            new = old if all(a is b for a, b in zip(new, old, strict=True)) else new
        else:
            continue
        if new is not old:
            changes[field.name] = new
    return replace(node, **changes) if changes else node


def decided(cond: Expr, lits: Mapping[str, Lit]) -> bool | None:
    """The value of ``cond`` where the chosen values decide it (it reads a constant);
    None where they do not."""
    found = _value(cond, lits)
    return None if found is None or not found[1] else found[0]


def _value(e: Expr, lits: Mapping[str, Lit]) -> tuple[object, bool] | None:
    """``e``'s value as a literal's (a bool for a bool), and whether it read a constant;
    None where it is not made of constants, literals, logic and integer comparisons."""
    match e:
        case SpecRef(name) if name in lits:
            return _literal(lits[name]), True
        case Lit():
            return _literal(e), False
        case Bitcast() if _type(e, lits) is not None:
            lit = _read(e.value, lits)
            return _literal(Lit(e.dtype, bits_seen(lit.dtype, lit.bits))), \
                isinstance(e.value, SpecRef)
        case Unary(UnOp.NOT, a):
            found = _value(a, lits)
            if found is not None and isinstance(found[0], bool):
                return not found[0], found[1]
        case Binary(op, a, b) if op in _LOGIC or op in _COMPARE:
            x, y = _value(a, lits), _value(b, lits)
            if x is None or y is None:
                return None
            if op in _LOGIC and isinstance(x[0], bool) and isinstance(y[0], bool):
                return _LOGIC[op](x[0], y[0]), x[1] or y[1]
            if op in _COMPARE and _type(a, lits) is _type(b, lits) is not None:
                return _COMPARE[op](x[0], y[0]), x[1] or y[1]
    return None


def _literal(lit: Lit) -> object:
    return bool(lit.bits) if lit.dtype is DType.BOOL else lit.value


def _read(e: Expr, lits: Mapping[str, Lit]) -> Lit | None:
    """The literal a constant or literal is (None: another kind)."""
    lit = lits.get(e.name) if isinstance(e, SpecRef) else e
    return lit if isinstance(lit, Lit) else None


def _type(e: Expr, lits: Mapping[str, Lit]) -> DType | None:
    """The integer type of a constant or literal compared, or of a bitcast of one of its
    width to an integer (None: another kind)."""
    if isinstance(e, Bitcast):
        lit = _read(e.value, lits)
        fits = lit is not None and bitcast_allowed(lit.dtype, e.dtype)
        return e.dtype if fits and e.dtype.is_int else None
    lit = _read(e, lits)
    return lit.dtype if lit is not None and lit.dtype.is_int else None
