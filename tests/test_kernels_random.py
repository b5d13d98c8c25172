"""Random kernels as Python source (issue 36): hypothesis draws a small kernel AST, renders
it as the source of a ``@vyre.kernel``, and checks that the kernel gives

(a) the same bytes, on the in-process reference, as the same program built with the
    builder by an independent route (``Twin``: an interpreter of the drawn AST that emits
    ``ir.Kernel`` calls, with locals declared up front, ``for range`` as a counted
    ``while``, and Python's floor division written its own way), and
(b) the bytes the same function gives when Python itself runs it, invocation by
    invocation (``expected``): ints are ``I32``/``U32`` (Python's operators, the result
    wrapped to 32 bits, as the kernel's typing rules say), floats numpy ``float32``.

Where Python and a kernel differ by design, the model follows the documented rule
(docs/kernels.md, docs/semantics.md): ``x // 0 == -1`` and ``x % 0 == 0``, ints wrap, a
shift count is masked to 0..31, an out-of-bounds load reads 0 and an out-of-bounds store
is dropped (a negative index included), a float cast to an int saturates (NaN gives 0), a
stored NaN is the canonical one. What neither rule covers is not drawn: float ``**``,
float ``min``/``max`` (IEEE minimumNumber, not Python's), a bare literal as a local's
value or a select's branch (a kernel types it by its context, which Python's run cannot
see), assigning a loop variable, a statement after a jump.
"""

from __future__ import annotations

import builtins
import itertools
import linecache
import operator
import re
import textwrap
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

import vyre_core as vyre
from vyre_core import f32, i32, ir, u32
from vyre_reference import run

pytestmark = pytest.mark.fast

N = 8                 # invocations: one workgroup of 8
SLOTS = 4             # output elements per invocation and output array
ARRAYS = {"a": "i32", "b": "u32", "c": "f32"}          # read
OUTS = {"oi": "i32", "ou": "u32", "of": "f32"}         # written
LOCALS = {"i32": ("p0", "p1"), "u32": ("q0", "q1"), "f32": ("r0", "r1")}
I32_MIN, I32_MAX, U32_MAX = -2**31, 2**31 - 1, 2**32 - 1
MAX_TRIPS = 64        # the twin's while bound: drawn loops make at most 12 passes


# -- the drawn AST: expressions carry their type ("i32", "u32", "f32", "bool") ------------

@dataclass(frozen=True)
class Lit:
    t: str
    value: Any


@dataclass(frozen=True)
class Name:
    t: str
    name: str


@dataclass(frozen=True)
class Load:
    t: str
    array: str
    index: Any


@dataclass(frozen=True)
class Len:
    t: str
    array: str


@dataclass(frozen=True)
class Bin:
    t: str
    op: str
    left: Any
    right: Any


@dataclass(frozen=True)
class Un:
    t: str
    op: str           # "-", "~", "abs"
    operand: Any


@dataclass(frozen=True)
class MinMax:
    t: str
    fn: str
    left: Any
    right: Any


@dataclass(frozen=True)
class Cast:
    t: str
    operand: Any


@dataclass(frozen=True)
class Bits:           # vyre.bitcast(operand, t): its bits as t (all three are 32-bit)
    t: str
    operand: Any


@dataclass(frozen=True)
class Sel:
    t: str
    cond: Any
    if_true: Any
    if_false: Any


@dataclass(frozen=True)
class Cmp:            # a chain: operands[0] ops[0] operands[1] ops[1] ...
    ops: tuple[str, ...]
    operands: tuple[Any, ...]
    t: str = "bool"


@dataclass(frozen=True)
class Logic:
    op: str           # "and", "or", "not", "truth" (a number in an if/while/else test)
    operands: tuple[Any, ...]
    t: str = "bool"


# statements
@dataclass(frozen=True)
class Assign:
    name: str
    value: Any
    op: str | None = None     # augmented: "+", ...


@dataclass(frozen=True)
class Store:
    array: str
    slot: int
    value: Any
    op: str | None = None


@dataclass(frozen=True)
class If:
    cond: Any
    body: tuple
    orelse: tuple


@dataclass(frozen=True)
class For:
    var: str
    start: Any
    stop: Any
    step: int
    body: tuple


@dataclass(frozen=True)
class While:
    counter: str
    limit: int
    cond: Any | None
    body: tuple               # the counter's += 1 comes first, then this


@dataclass(frozen=True)
class Jump:
    what: str                 # "break", "continue", "return"


# -- rendering as Python source -----------------------------------------------------------

def _lit(value: Any) -> str:
    text = repr(float(value)) if isinstance(value, float) else repr(value)
    return f"({text})" if text.startswith("-") else text


def src(e: Any) -> str:
    """An expression's source, fully parenthesized."""
    match e:
        case Lit(value=v):
            return _lit(v)
        case Name(name=n):
            return n
        case Load(array=a, index=i):
            return f"{a}[{src(i)}]"
        case Len(array=a):
            return f"len({a})"
        case Bin(op=op, left=l, right=r):
            return f"({src(l)} {op} {src(r)})"
        case Un(op="abs", operand=x):
            return f"abs({src(x)})"
        case Un(op=op, operand=x):
            return f"({op}{src(x)})"
        case MinMax(fn=fn, left=l, right=r):
            return f"{fn}({src(l)}, {src(r)})"
        case Cast(t=t, operand=x):
            return f"{t}({src(x)})"
        case Bits(t=t, operand=x):
            return f"vyre.bitcast({src(x)}, vyre.{t})"
        case Sel(cond=c, if_true=a, if_false=b):
            return f"({src(a)} if {src(c)} else {src(b)})"
        case Cmp(ops=ops, operands=xs):
            parts = [src(xs[0])]
            for op, x in zip(ops, xs[1:], strict=True):
                parts += [op, src(x)]
            return f"({' '.join(parts)})"
        case Logic(op="not", operands=(x,)):
            return f"(not {src(x)})"
        case Logic(op="truth", operands=(x,)):
            return src(x)
        case Logic(op=op, operands=(a, b)):
            return f"({src(a)} {op} {src(b)})"
    raise AssertionError(e)


def _slot(slot: int) -> str:
    return f"i * {SLOTS} + {slot}"


def lines(body: tuple, depth: int) -> list[str]:
    pad = "    " * depth
    out: list[str] = []
    for s in body:
        match s:
            case Assign(name=n, value=v, op=None):
                out.append(f"{pad}{n} = {src(v)}")
            case Assign(name=n, value=v, op=op):
                out.append(f"{pad}{n} {op}= {src(v)}")
            case Store(array=a, slot=k, value=v, op=op):
                out.append(f"{pad}{a}[{_slot(k)}] {op or ''}= {src(v)}")
            case If():
                out += _if_lines(s, depth, "if")
            case For(var=v, start=a, stop=b, step=step, body=inner):
                args = f"{src(a)}, {src(b)}" + ("" if step == 1 else f", {step}")
                out.append(f"{pad}for {v} in range({args}):")
                out += lines(inner, depth + 1) or [f"{pad}    pass"]
            case While(counter=w, limit=n, cond=c, body=inner):
                test = f"{w} < {n}" + ("" if c is None else f" and {src(c)}")
                out += [f"{pad}{w} = i32(0)", f"{pad}while {test}:", f"{pad}    {w} += 1"]
                out += lines(inner, depth + 1)
            case Jump(what=w):
                out.append(f"{pad}{w}")
    return out


def _if_lines(s: If, depth: int, keyword: str) -> list[str]:
    pad = "    " * depth
    out = [f"{pad}{keyword} {src(s.cond)}:", *(lines(s.body, depth + 1) or [f"{pad}    pass"])]
    if len(s.orelse) == 1 and isinstance(s.orelse[0], If):
        out += _if_lines(s.orelse[0], depth, "elif")
    elif s.orelse:
        out += [f"{pad}else:", *lines(s.orelse, depth + 1)]
    return out


def source(body: tuple) -> str:
    params = ", ".join(["s: i32", *(f"{n}: vyre.Array[{t}]" for n, t in ARRAYS.items()),
                        *(f"{n}: vyre.Array[{t}]" for n, t in OUTS.items())])
    epilogue = [Store(out, k, Name(t, LOCALS[t][k]))
                for out, t in OUTS.items() for k in range(2)]
    text = [f"@vyre.kernel(workgroup=({N},))", f"def drawn({params}):",
            "    i = vyre.global_id(0)", *lines(body, 1), *lines(tuple(epilogue), 1)]
    return "\n".join(text) + "\n"


# -- the strategy -------------------------------------------------------------------------

_INT_OPS = ["+", "-", "*", "//", "%", "&", "|", "^"]
_CMP = ["==", "!=", "<", "<=", ">", ">="]
_I32_LITS = st.one_of(st.integers(-9, 9), st.sampled_from([I32_MIN, I32_MAX, -1, 2**16]))
_U32_LITS = st.one_of(st.integers(0, 9), st.sampled_from([U32_MAX, 2**31, 2**16]))
_F32_LITS = st.sampled_from([0.5, -1.25, 2.0, 3.0, -0.0, 0.0, 1e-3, 7, -2])


class Draw:
    """Draws a typed AST; ``scope`` maps a type to the names readable here."""

    def __init__(self, draw: Any) -> None:
        self.draw = draw
        self.names = itertools.count()

    def pick(self, options: list) -> Any:
        return self.draw(st.sampled_from(options))

    def lit(self, t: str) -> Lit:
        return Lit(t, self.draw({"i32": _I32_LITS, "u32": _U32_LITS, "f32": _F32_LITS}[t]))

    def leaf(self, t: str, scope: dict[str, list[str]]) -> Any:
        kinds = ["name", "load"] + (["len"] if t == "i32" else [])
        kind = self.pick(kinds) if scope[t] else "load"
        if kind == "name":
            return Name(t, self.pick(scope[t]))
        if kind == "len":
            return Len("i32", self.pick(list(ARRAYS)))
        array = next(a for a, at in ARRAYS.items() if at == t)
        return Load(t, array, self.index(scope))

    def index(self, scope: dict[str, list[str]]) -> Any:
        how = self.pick(["i", "wrapped", "raw"])
        if how == "i":
            return Name("i32", "i")
        t = self.pick(["i32", "u32"])
        e = self.expr(t, scope, 1)
        return Bin(t, "%", e, Lit(t, N)) if how == "wrapped" else e

    def operand(self, t: str, scope: dict[str, list[str]], depth: int) -> Any:
        """A right operand: sometimes a bare literal (typed by the other side)."""
        if self.draw(st.integers(0, 3)) == 0:
            return self.lit(t)
        return self.expr(t, scope, depth)

    def expr(self, t: str, scope: dict[str, list[str]], depth: int) -> Any:
        """A value of type ``t`` that is never a bare literal (a literal alone is i32 or
        f32 in a kernel, whatever the context: Python could not tell)."""
        if depth <= 0:
            return self.leaf(t, scope)
        sub = depth - 1
        kinds = ["leaf", "bin", "un", "cast", "bits", "sel"]
        kinds += {"i32": ["shift", "pow", "minmax"], "u32": ["shift", "pow", "minmax"],
                  "f32": []}[t]
        kind = self.pick(kinds)
        if kind == "leaf":
            return self.leaf(t, scope)
        if kind == "bin":
            op = self.pick(_INT_OPS if t != "f32" else ["+", "-", "*", "/"])
            return Bin(t, op, self.expr(t, scope, sub), self.operand(t, scope, sub))
        if kind == "shift":
            return Bin(t, self.pick(["<<", ">>"]), self.expr(t, scope, sub),
                       Lit(t, self.draw(st.integers(0, 31))))
        if kind == "pow":
            return Bin(t, "**", self.expr(t, scope, sub), Lit(t, self.draw(st.integers(0, 4))))
        if kind == "minmax":
            return MinMax(t, self.pick(["min", "max"]), self.expr(t, scope, sub),
                          self.operand(t, scope, sub))
        if kind == "un":
            ops = {"i32": ["-", "~", "abs"], "u32": ["~"], "f32": ["-", "abs"]}[t]
            return Un(t, self.pick(ops), self.expr(t, scope, sub))
        if kind == "cast":
            return Cast(t, self.expr(self.pick([x for x in LOCALS if x != t]), scope, sub))
        if kind == "bits":
            return Bits(t, self.expr(self.pick([x for x in LOCALS if x != t]), scope, sub))
        return Sel(t, self.cond(scope, sub), self.expr(t, scope, sub),
                   self.expr(t, scope, sub))

    def cond(self, scope: dict[str, list[str]], depth: int, test: bool = False) -> Any:
        kinds = ["cmp", "cmp", "chain"] + (["and", "or", "not"] if depth > 0 else []) + \
            (["truth"] if test else [])
        kind = self.pick(kinds)
        sub = max(depth - 1, 0)
        if kind in ("cmp", "chain"):
            t = self.pick(list(LOCALS))
            n = 1 if kind == "cmp" else 2
            operands = (self.expr(t, scope, sub),
                        *(self.operand(t, scope, sub) for _ in range(n)))
            return Cmp(tuple(self.pick(_CMP) for _ in range(n)), operands)
        if kind == "truth":
            return Logic("truth", (self.expr(self.pick(list(LOCALS)), scope, sub),))
        if kind == "not":
            return Logic("not", (self.cond(scope, sub),))
        return Logic(kind, (self.cond(scope, sub), self.cond(scope, sub)))

    def assigned_value(self, t: str, scope: dict[str, list[str]]) -> Any:
        return self.expr(t, scope, self.draw(st.integers(0, 2)))

    def block(self, scope: dict[str, list[str]], assignable: dict[str, list[str]],
              depth: int, loops: int, size: int, top: bool = False) -> tuple:
        scope = {t: list(ns) for t, ns in scope.items()}
        assignable = {t: list(ns) for t, ns in assignable.items()}
        out = []
        for _ in range(self.draw(st.integers(1 if size else 0, size))):
            kinds = ["assign", "aug", "store", "temp"]
            if depth > 0:
                kinds += ["if", "for", "while"]
            kind = self.pick(kinds)
            if kind in ("assign", "aug"):
                t = self.pick(list(LOCALS))
                name = self.pick(assignable[t])
                if kind == "assign":
                    out.append(Assign(name, self.assigned_value(t, scope)))
                else:
                    ops = [*_INT_OPS, "<<", ">>"] if t != "f32" else ["+", "-", "*", "/"]
                    op = self.pick(ops)
                    value = Lit(t, self.draw(st.integers(0, 31))) if op in ("<<", ">>") \
                        else self.operand(t, scope, 1)
                    out.append(Assign(name, value, op))
            elif kind == "store":
                t = self.pick(list(LOCALS))
                array = next(a for a, at in OUTS.items() if at == t)
                op = self.pick([None, None, "+", "-", "*"] + (["^"] if t != "f32" else []))
                out.append(Store(array, self.draw(st.integers(2, SLOTS - 1)),
                                 self.expr(t, scope, 2), op))
            elif kind == "temp":
                t = self.pick(list(LOCALS))
                name = f"t{next(self.names)}"
                out.append(Assign(name, self.expr(t, scope, 2)))
                scope[t].append(name)
                assignable[t].append(name)
            elif kind == "if":
                branches = self.draw(st.integers(1, 3))   # if, if/else, if/elif/else
                out.append(self.if_(scope, assignable, depth, loops, branches))
            elif kind == "for":
                var = f"v{next(self.names)}"
                step = self.pick([1, 1, 2, 3, -1, -2])
                inner = {**scope, "i32": [*scope["i32"], var]}
                out.append(For(var, self.bound(scope), self.bound(scope), step,
                               self.loop_body(inner, assignable, depth, loops)))
            else:
                w = f"w{next(self.names)}"
                inner = {**scope, "i32": [*scope["i32"], w]}
                cond = self.cond(scope, 1) if self.draw(st.booleans()) else None
                out.append(While(w, self.draw(st.integers(0, 3)), cond,
                                 self.loop_body(inner, assignable, depth, loops)))
                scope["i32"].append(w)   # assigned on every path after the loop
        if loops and self.draw(st.integers(0, 3)) == 0:
            out.append(Jump(self.pick(["break", "continue"])))
        elif not top and self.draw(st.integers(0, 9)) == 0:
            out.append(Jump("return"))   # (not at the top: the epilogue follows)
        return tuple(out)

    def if_(self, scope, assignable, depth, loops, branches) -> If:
        body = self.block(scope, assignable, depth - 1, loops, 3)
        if branches == 1:
            orelse: tuple = ()
        elif branches == 2:
            orelse = self.block(scope, assignable, depth - 1, loops, 3)
        else:
            orelse = (self.if_(scope, assignable, depth, loops, 2),)
        return If(self.cond(scope, 2, test=True), body, orelse)

    def loop_body(self, scope, assignable, depth, loops) -> tuple:
        return self.block(scope, assignable, depth - 1, loops + 1, 3)

    def bound(self, scope: dict[str, list[str]]) -> Any:
        """A range() bound from -4 to 4: a literal, or Python's % of any i32 value."""
        if self.draw(st.booleans()):
            return Lit("i32", self.draw(st.integers(-4, 4)))
        return Bin("i32", "-", Bin("i32", "%", self.expr("i32", scope, 1), Lit("i32", 5)),
                   Lit("i32", 2))


@st.composite
def kernels(draw) -> tuple:
    """A drawn kernel body: the six locals declared, then statements."""
    d = Draw(draw)
    scope: dict[str, list[str]] = {"i32": ["i", "s"], "u32": [], "f32": []}
    body = []
    for t, names in LOCALS.items():
        for name in names:
            value = d.expr(t, scope, draw(st.integers(0, 2)))
            body.append(Assign(name, value))
            scope[t].append(name)
    assignable = {t: list(ns) for t, ns in LOCALS.items()}
    body += d.block(scope, assignable, 3, 0, 5, top=True)
    return tuple(body)


# -- the builder twin ---------------------------------------------------------------------

_T = {"i32": ir.i32, "u32": ir.u32, "f32": ir.f32}


def _names_in(body: tuple) -> dict[str, str]:
    """Every local the body assigns or loops over, with its type."""
    found: dict[str, str] = {}
    for s in body:
        match s:
            case Assign(name=n, value=v, op=None):
                found.setdefault(n, v.t)
            case If(body=a, orelse=b):
                found.update(_names_in(a) | _names_in(b))
            case For(var=v, body=a):
                found[v] = "i32"
                found.update(_names_in(a))
            case While(counter=w, body=a):
                found[w] = "i32"
                found.update(_names_in(a))
    return found


class Twin:
    """The drawn kernel built with ``ir.Kernel``: every local a ``let`` of zero at the
    top, assigned with ``k.assign``; ``for range`` a ``while`` that steps its variable
    first thing in each pass."""

    def __init__(self, body: tuple) -> None:
        k = self.k = ir.Kernel(workgroup=(N,))
        self.bufs = {"s": k.uniform("s", ir.i32)}
        for name, t in [*ARRAYS.items()]:
            self.bufs[name] = k.read(name, _T[t])
        for name, t in OUTS.items():
            self.bufs[name] = k.read_write(name, _T[t])
        self.vars = {"i": k.let("i", ir.cast(ir.global_id(0), ir.i32))}
        for name, t in sorted(_names_in(body).items()):
            self.vars[name] = k.let(name, _T[t](0))
        self.fresh = itertools.count()
        epilogue = tuple(Store(out, n, Name(t, LOCALS[t][n]))
                         for out, t in OUTS.items() for n in range(2))
        self.block(body + epilogue)
        self.program = k.build()

    def e(self, e: Any) -> Any:
        match e:
            case Lit(t=t, value=v):
                return _T[t](v)
            case Name(name="s"):
                return self.bufs["s"][ir.u32(0)]
            case Name(name=n):
                return self.vars[n]
            case Load(array=a, index=i):
                return self.bufs[a][self.index(i)]
            case Len(array=a):
                return ir.cast(self.bufs[a].len, ir.i32)
            case Bin(t=t, op=op, left=l, right=r):
                return self.binary(t, op, self.e(l), self.e(r), r)
            case Un(op="abs", operand=x):
                return abs(self.e(x))
            case Un(op=op, operand=x):
                return -self.e(x) if op == "-" else ~self.e(x)
            case MinMax(fn=fn, left=l, right=r):
                return (ir.min if fn == "min" else ir.max)(self.e(l), self.e(r))
            case Cast(t=t, operand=x):
                return ir.cast(self.e(x), _T[t])
            case Bits(t=t, operand=x):
                return ir.bitcast(self.e(x), _T[t])
            case Sel(cond=c, if_true=a, if_false=b):
                return ir.select(self.e(c), self.e(a), self.e(b))
            case Cmp(ops=ops, operands=xs):
                values = [self.e(x) for x in xs]
                pairs = zip(ops, values, values[1:], strict=False)
                tests = [_COMPARE[op](a, b) for op, a, b in pairs]
                return tests[0] if len(tests) == 1 else ir.logical_and(*tests)
            case Logic(op="truth", operands=(x,)):
                return self.e(x) != _T[x.t](0)
            case Logic(op="not", operands=(x,)):
                return ir.logical_not(self.e(x))
            case Logic(op=op, operands=(a, b)):
                return (ir.logical_and if op == "and" else ir.logical_or)(self.e(a), self.e(b))
        raise AssertionError(e)

    def index(self, i: Any) -> Any:
        v = self.e(i)
        return ir.cast(v, ir.u32) if i.t == "i32" else v

    def binary(self, t: str, op: str, a: Any, b: Any, b_node: Any) -> Any:
        if op == "**":
            if b_node.value == 0:
                return _T[t](1)
            result = a
            for _ in range(b_node.value - 1):
                result = result * a
            return result
        if op in ("<<", ">>"):
            count = ir.u32(b_node.value) if isinstance(b_node, Lit) else ir.cast(b, ir.u32)
            return a << count if op == "<<" else a >> count
        if op in ("//", "%") and t == "i32":
            # floor: the truncated quotient one lower (the remainder plus the divisor)
            # where a non-zero remainder's sign differs from the divisor's
            q, r = a / b, a % b
            adjust = ir.logical_and(r != ir.i32(0), (r ^ b) < ir.i32(0))
            return ir.select(adjust, q - ir.i32(1), q) if op == "//" else \
                ir.select(adjust, r + b, r)
        if op == "//":
            return a / b     # u32: the truncated quotient is the floor
        return {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
                "%": operator.mod, "&": operator.and_, "|": operator.or_,
                "^": operator.xor}[op](a, b)

    def block(self, body: tuple) -> None:
        for s in body:
            self.stmt(s)

    def stmt(self, s: Any) -> None:
        k = self.k
        match s:
            case Assign(name=n, value=v, op=None):
                k.assign(self.vars[n], self.e(v))
            case Assign(name=n, value=v, op=op):
                k.assign(self.vars[n], self.binary(v.t, op, self.vars[n], self.e(v), v))
            case Store(array=a, slot=n, value=v, op=op):
                index = ir.cast(self.vars["i"], ir.u32) * ir.u32(SLOTS) + ir.u32(n)
                value = self.e(v) if op is None else \
                    self.binary(v.t, op, self.bufs[a][index], self.e(v), v)
                self.bufs[a][index] = value
            case If(cond=c, body=a, orelse=b):
                self.if_(c, a, b)
            case For():
                self.for_(s)
            case While(counter=w, limit=n, cond=c, body=a):
                k.assign(self.vars[w], ir.i32(0))
                test = self.vars[w] < ir.i32(n)
                self.while_(test if c is None else ir.logical_and(test, self.e(c)),
                            (Assign(w, Lit("i32", 1), "+"), *a))
            case Jump(what="break"):
                k.break_()
            case Jump(what="continue"):
                k.continue_()
            case Jump(what="return"):
                k.ret()

    def if_(self, cond: Any, then: tuple, orelse: tuple) -> None:
        with self.k.if_(self.e(cond)):
            self.block(then)
        if orelse:
            with self.k.else_():
                self.block(orelse)

    def while_(self, test: Any, body: tuple, prologue: Any = None) -> None:
        with self.k.while_(test, MAX_TRIPS):
            if prologue is not None:
                prologue()
            self.block(body)

    def for_(self, s: For) -> None:
        k = self.k
        n = next(self.fresh)
        start = k.let(f"_start{n}", self.e(s.start))
        stop = k.let(f"_stop{n}", self.e(s.stop))
        var = self.vars[s.var]
        k.assign(var, start - ir.i32(s.step))

        def step() -> None:
            k.assign(var, var + ir.i32(s.step))
            with k.if_(var >= stop if s.step > 0 else var <= stop):
                k.break_()
        self.while_(ir.lit(True), s.body, step)


_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
            ">": operator.gt, ">=": operator.ge}


# -- Python's own run ---------------------------------------------------------------------

def _wrap(value: int, signed: bool) -> int:
    value &= U32_MAX
    return value - 2**32 if signed and value > I32_MAX else value


def _floordiv(a: int, b: int) -> int:
    return -1 if b == 0 else a // b          # docs/kernels.md: x // 0 is -1


def _mod(a: int, b: int) -> int:
    return 0 if b == 0 else a % b            # ... and x % 0 is 0


class _Int(int):
    """A 32-bit int: Python's operator on the values, the result wrapped."""

    signed = True

    def __new__(cls, value: int) -> _Int:
        return int.__new__(cls, _wrap(int(value), cls.signed))


_BINARY = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
           "floordiv": _floordiv, "mod": _mod, "pow": operator.pow, "and": operator.and_,
           "or": operator.or_, "xor": operator.xor,
           "lshift": lambda a, b: a << (b & 31), "rshift": lambda a, b: a >> (b & 31)}


def _method(fn: Any, reflected: bool) -> Any:
    def method(self: _Int, other: Any) -> Any:
        if (isinstance(other, _Int) and type(other) is not type(self)) or \
                not isinstance(other, int):
            return NotImplemented       # never drawn: a kernel refuses to mix
        a, b = (int(other), int(self)) if reflected else (int(self), int(other))
        return type(self)(fn(a, b))
    return method


for _name, _fn in _BINARY.items():
    setattr(_Int, f"__{_name}__", _method(_fn, False))
    setattr(_Int, f"__r{_name}__", _method(_fn, True))
_Int.__neg__ = lambda self: type(self)(-int(self))
_Int.__invert__ = lambda self: type(self)(~int(self))
_Int.__abs__ = lambda self: type(self)(abs(int(self)))


class I32(_Int):
    signed = True


class U32(_Int):
    signed = False


def _to_int(cls: type, value: Any) -> _Int:
    if isinstance(value, np.floating):       # truncate, saturate; NaN gives 0
        if np.isnan(value):
            return cls(0)
        lo, hi = (I32_MIN, I32_MAX) if cls.signed else (0, U32_MAX)
        return cls(min(max(int(np.trunc(value)) if np.isfinite(value) else
                           (hi if value > 0 else lo), lo), hi))
    return cls(int(value))


class _Array:
    """An array as a kernel sees it: an index is taken as u32, out of bounds reads 0
    and drops a store."""

    def __init__(self, data: np.ndarray, kind: Any) -> None:
        self.data, self.kind = data, kind

    def _at(self, index: Any) -> int | None:
        flat = int(index) & U32_MAX
        return flat if flat < len(self.data) else None

    def __getitem__(self, index: Any) -> Any:
        at = self._at(index)
        return self.kind(0 if at is None else self.data[at])

    def __setitem__(self, index: Any, value: Any) -> None:
        at = self._at(index)
        if at is not None:
            self.data[at] = int(self.kind(value)) if self.kind is not np.float32 else value

    def __len__(self) -> int:
        return len(self.data)


class _Vyre:
    """``vyre`` as the Python run sees it."""

    gid = 0
    Array = type("ArrayShim", (), {"__class_getitem__": classmethod(lambda cls, k: cls)})

    @staticmethod
    def kernel(**_: Any) -> Any:
        return lambda fn: fn

    @classmethod
    def global_id(cls, axis: int) -> I32:
        return I32(cls.gid)

    i32, u32, f32 = I32, U32, np.float32

    @staticmethod
    def bitcast(value: Any, to: type) -> Any:
        """numpy's view of the 32 bits, a float NaN's the canonical NaN's."""
        if isinstance(value, np.floating):
            bits = 0x7FC00000 if np.isnan(value) else int(np.float32(value).view(np.uint32))
        else:
            bits = int(value) & U32_MAX
        return np.uint32(bits).view(np.float32) if to is np.float32 else to(bits)


def _typed_like(result: Any, args: tuple) -> Any:
    """``min``/``max``: a literal takes the other operand's type."""
    typed = next((a for a in args if isinstance(a, _Int)), None)
    return type(typed)(result) if typed is not None and not isinstance(result, _Int) \
        else result


PYTHON = {
    "vyre": _Vyre,
    "i32": lambda v: _to_int(I32, v),
    "u32": lambda v: _to_int(U32, v),
    "f32": lambda v: np.float32(int(v)) if isinstance(v, int) else np.float32(v),
    # the kernel's typing rules for Python's ints: len() and range variables are i32
    "len": lambda a: I32(len(a.data)),
    "range": lambda *args: map(I32, builtins.range(*map(int, args))),
    "min": lambda *args: _typed_like(builtins.min(*args), args),
    "max": lambda *args: _typed_like(builtins.max(*args), args),
}


def expected(text: str, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The outputs Python gives running the source over every invocation."""
    namespace = dict(PYTHON)
    exec(compile(text, "<python run>", "exec"), namespace)
    kinds = {"i32": I32, "u32": U32, "f32": np.float32}
    arrays = {n: _Array(inputs[n].copy(), kinds[t]) for n, t in {**ARRAYS, **OUTS}.items()}
    with np.errstate(all="ignore"):
        for gid in range(N):
            _Vyre.gid = gid
            namespace["drawn"](I32(int(inputs["s"][0])), *arrays.values())
    return [arrays[n].data for n in OUTS]


# -- the test -----------------------------------------------------------------------------

_COUNTER = itertools.count()


def define_kernel(text: str) -> Any:
    """The kernel the source defines: its text kept in linecache, where the frontend
    reads a function's source from."""
    filename = f"<random kernel {next(_COUNTER)}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace = {"vyre": vyre, "i32": i32, "u32": u32, "f32": f32, "__name__": "drawn"}
    exec(compile(text, filename, "exec"), namespace)
    return namespace["drawn"], filename


def _canonical(array: np.ndarray) -> bytes:
    """The bytes, every float NaN the canonical one (as a stored NaN is)."""
    if array.dtype == np.float32:
        bits = array.view(np.uint32).copy()
        bits[np.isnan(array)] = 0x7FC00000
        return bits.tobytes()
    return array.tobytes()


_INT_INPUTS = st.one_of(st.integers(-20, 20), st.sampled_from([I32_MIN, I32_MAX, -1]))
_inputs = st.fixed_dictionaries({
    "s": st.lists(_INT_INPUTS, min_size=1, max_size=1).map(lambda v: np.array(v, np.int32)),
    "a": st.lists(_INT_INPUTS, min_size=N, max_size=N).map(lambda v: np.array(v, np.int32)),
    "b": st.lists(st.one_of(st.integers(0, 20), st.just(U32_MAX)), min_size=N,
                  max_size=N).map(lambda v: np.array(v, np.uint32)),
    "c": st.lists(st.sampled_from([0.0, -0.0, 0.5, -1.5, 3.25, 100.0, -7.0]), min_size=N,
                  max_size=N).map(lambda v: np.array(v, np.float32)),
    "oi": st.just(np.arange(N * SLOTS, dtype=np.int32) - 5),
    "ou": st.just(np.arange(N * SLOTS, dtype=np.uint32) * 3),
    "of": st.just(np.linspace(-2, 2, N * SLOTS, dtype=np.float32)),
})


#: Kernels drawn: 50 in the full suite (each form of FORMS, "truth of a number" aside,
#: in 10 of them or more; 150 drew no form these 50 do not); the fast tier (make test-fast:
#: tests/conftest.py loads hypothesis's "fast-tier" profile there) draws 30 of them, to
#: stay fast. No deadline: a loaded machine can stall an example for seconds (the test
#: checks bytes).
EXAMPLES = 30 if settings.get_current_profile_name() == "fast-tier" else 50


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          phases=[Phase.generate, Phase.shrink],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(kernels(), _inputs)
def test_a_random_kernel_gives_its_builder_twins_bytes_and_pythons(body, inputs):
    text = source(body)
    kernel, filename = define_kernel(text)
    try:
        names = ["s", *ARRAYS, *OUTS]
        plan = kernel.plan(N, [inputs["s"][0].item(), *(inputs[n] for n in names[1:])])
    finally:
        linecache.cache.pop(filename, None)
    got = run(plan.program, plan.inputs, grid=(1,))
    twin = run(Twin(body).program, [inputs[n] for n in names], grid=(1,))
    note = textwrap.indent(text, "    ")
    assert [o.tobytes() for o in got] == [o.tobytes() for o in twin], note
    want = expected(text, inputs)
    assert [_canonical(o) for o in got] == [_canonical(o) for o in want], note


#: Each form the strategy is meant to draw, recognised in the drawn source.
FORMS = {
    "for": r"\bfor ", "negative step": r"range\(.*, -\d\):", "while": r"\bwhile ",
    "break": r"\bbreak\b", "continue": r"\bcontinue\b", "return": r"\breturn\b",
    "elif": r"\belif ", "else": r"\belse:", "floor division": r" // ", "modulo": r" % ",
    "power": r" \*\* ", "chained comparison": r"\(\S+ [<>=!]+ \S+ [<>=!]+ ",
    "augmented local": r"\b[pqrtw]\d+ [-+*/%&|^<>]+= ", "augmented store": r"\] [-+*^]= ",
    "and": r" and ", "or": r" or ", "not": r"\(not ", "shift": r" (<<|>>) ",
    "min/max": r"\b(min|max)\(", "abs": r"\babs\(", "cast": r"\b[iuf]32\(",
    "bitcast": r"\bvyre\.bitcast\(",
    "select": r" if .* else ", "len": r"\blen\(",
    "local first assigned in a block": r"^ {8,}t\d+ = ",
    "truth of a number": r"op='truth'",   # (in the drawn AST's repr, below the source)
}


def test_the_strategy_draws_each_form():
    """The test above checks only what the strategy draws: within 400 draws, each form."""
    seen: set[str] = set()

    def all_seen(body: tuple) -> bool:
        text = f"{source(body)}\n{body!r}"
        seen.update(form for form, pattern in FORMS.items() if re.search(pattern, text, re.M))
        return len(seen) == len(FORMS)

    find(kernels(), all_seen, settings=settings(
        max_examples=400, derandomize=True, database=None, deadline=None,
        phases=[Phase.generate], suppress_health_check=list(HealthCheck)))
