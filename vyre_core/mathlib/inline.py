"""Writing the math library's functions out into a program (docs/design-42.md, section 3).

Each use of an operation the library computes (``unop.exp2`` on f32, say) becomes, right
before the statement that holds it: a ``let`` per argument, the function's body with
every name made fresh, and a ``let`` of its result, which the statement then reads. Every
expression is pure and total (docs/semantics.md), so evaluating an argument before the
rest of its statement changes nothing; the one expression evaluated more than once per
statement, a ``while`` condition, has its values computed before the loop and again at
the end of each pass and before each ``continue``::

    while c(exp2(x)):  body   ->   <r = exp2 of x>; while c(r): { body; <r = exp2 of x> }

so the loop keeps its shape: the same passes, and whatever the uniformity rules made of
it (a condition the same in every invocation stays so, where a ``break`` under an ``if``
would not).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace

from vyre_core.ir import Program
from vyre_core.ir.dtypes import DType
from vyre_core.ir.exprtypes import type_of
from vyre_core.ir.nodes import (
    Assign,
    Binary,
    Block,
    Continue,
    Expr,
    If,
    Let,
    Loop,
    Stmt,
    Store,
    Unary,
    Var,
    While,
    walk,
)
from vyre_core.ir.requirements import Requirements
from vyre_core.ir.rewrite import transform
from vyre_core.mathlib.library import OPERATIONS, Function, Operation, functions, param


def expand(program: Program, library: Mapping[Operation, Function] | None = None) -> Program:
    """``program`` with every operation of ``library`` (default: the math library's)
    written out as its function; the program itself when it uses none (of an operand
    type the library has)."""
    ops = OPERATIONS if library is None else {op for op, _ in library}
    used = program.requirements().ops & ops
    if not used:
        return program
    library = functions() if library is None else library
    inliner = _Inliner(program, library, used)
    body = inliner.block(program.body, {})
    return replace(program, body=body) if inliner.serial else program


def calls(program: Program) -> list[Operation]:
    """Each call ``program`` makes of the library's functions, as its operation and
    operand type, a call written out more than once (a ``while`` condition's) as often:
    what writing it out adds (the cpu backend weighs its compile time so)."""
    used = program.requirements().ops & OPERATIONS
    if not used:  # (the functions stay unbuilt for a program that calls none)
        return []
    inliner = _Inliner(program, functions(), used)
    inliner.block(program.body, {})
    return inliner.written


#: The requirements of the programs routing weighed last, by fingerprint.
_WEIGHED: OrderedDict[str, Requirements] = OrderedDict()
_WEIGHED_LIMIT = 256
_WEIGHING = threading.Lock()


def requirements(program: Program) -> Requirements:
    """``program``'s requirements as a backend is given it, the library written out
    (routing's view of a program: a backend that lowers the library itself is held to
    them as well), kept for the programs weighed last."""
    key = program.fingerprint()
    found = _WEIGHED.get(key)
    if found is None:
        found = expand(program).requirements()
        with _WEIGHING:  # (routing runs on the caller's threads)
            _WEIGHED[key] = found
            while len(_WEIGHED) > _WEIGHED_LIMIT:
                _WEIGHED.popitem(last=False)
    return found


class _Inliner:
    def __init__(self, program: Program, library: Mapping[Operation, Function],
                 used: set[str]) -> None:
        self.library = library
        self.used = used
        self.buffers = {b.name: b for b in program.buffers}
        self.constants = {c.name: c for c in program.constants}
        self.taken = set(self.buffers) | set(self.constants) | {
            n.name if isinstance(n, Let | Assign | Var) else n.var
            for n in walk(program.body) if isinstance(n, Let | Assign | Var | Loop)}
        self.serial = 0
        self.written: list[Operation] = []

    def fresh(self) -> str:
        """A name no variable or buffer of the program has."""
        while True:
            self.serial += 1
            name = f"_math{self.serial}"
            if name not in self.taken:
                return name

    def block(self, body: tuple[Stmt, ...], scope: dict[str, DType]) -> tuple[Stmt, ...]:
        scope = dict(scope)  # (a body's names end with it)
        return tuple(out for s in body for out in self.stmt(s, scope))

    def stmt(self, s: Stmt, scope: dict[str, DType]) -> list[Stmt]:
        """``s`` with its calls written out before it; ``scope`` gains what it declares."""
        before: list[Stmt] = []

        def calls(e: Expr) -> Expr:
            return transform(e, lambda node: self.call(node, before, scope))

        match s:
            case Let(name, value):
                s = Let(name, calls(value))
                scope[name] = type_of(s.value, scope.__getitem__, self.buffers, self.constants)
            case Assign(name, value):
                s = Assign(name, calls(value))
            case Store(buffer, index, value):
                s = Store(buffer, calls(index), calls(value))
            case If(cond, then, orelse):
                s = If(calls(cond), self.block(then, scope), self.block(orelse, scope))
            case Loop(var, start, end, body, step):
                start, end, step = calls(start), calls(end), calls(step)
                s = Loop(var, start, end, self.block(body, {**scope, var: DType.U32}), step)
            case While(cond, body, max_trips):
                inner = dict(scope)
                test = transform(cond, lambda node: self.call(node, before, inner))
                body = self.block(body, inner)
                if before:  # (the condition's values again, for the next pass's test)
                    again = tuple(Assign(t.name, t.value) if isinstance(t, Let) else t
                                  for t in before)
                    body = (*_before_continues(body, again), *again)
                s = While(test, body, max_trips)
            case Block(body):
                s = Block(self.block(body, scope))
        return [*before, s]

    def call(self, node: Expr | Stmt, before: list[Stmt], scope: dict[str, DType]) -> Expr:
        """``node``, or the variable holding its function's result, the function written
        out into ``before`` (``node``'s operands are already rewritten: inner calls come
        first)."""
        match node:
            case Unary(op, x) if f"unop.{op.value}" in self.used:
                key, args = f"unop.{op.value}", (x,)
            case Binary(op, a, b) if f"binop.{op.value}" in self.used:
                key, args = f"binop.{op.value}", (a, b)
            case _:
                return node
        operation = key, type_of(args[0], scope.__getitem__, self.buffers, self.constants)
        fn = self.library.get(operation)
        if fn is None:
            return node
        self.written.append(operation)
        names: dict[str, str] = {}

        def name(n: str) -> str:
            if n not in names:
                names[n] = self.fresh()
            return names[n]

        def rename(n: Expr | Stmt) -> Expr | Stmt:
            match n:
                case Var(v):
                    return Var(name(v))
                case Let(v, value):
                    return Let(name(v), value)
                case Assign(v, value):
                    return Assign(name(v), value)
                case Loop(var=v):
                    return replace(n, var=name(v))
            return n

        for i, arg in enumerate(args):
            before.append(Let(name(param(i)), arg))
        before.extend(transform(s, rename) for s in fn.body)
        result = self.fresh()
        before.append(Let(result, transform(fn.result, rename)))
        scope[result] = fn.dtype
        return Var(result)


def _before_continues(body: tuple[Stmt, ...], again: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """``body`` with ``again`` before each ``continue`` of its own loop (a nested loop's
    are that loop's)."""
    out: list[Stmt] = []
    for s in body:
        match s:
            case Continue():
                out.extend(again)
            case If(cond, then, orelse):
                s = If(cond, _before_continues(then, again), _before_continues(orelse, again))
            case Block(inner):
                s = Block(_before_continues(inner, again))
        out.append(s)
    return tuple(out)
