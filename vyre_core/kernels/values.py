"""Values of a kernel body and the typing rules (docs/kernels.md, "Types"), in one place.

A ``Value`` is an IR expression with its dtype, or a Python number not yet typed (a
literal, a module-level number, a fold of them): such a number takes the type of the
other operand, or its own default (int -> i32, float -> f32, bool -> bool) when alone.
Every operator keeps Python's meaning or is refused (``Refusal``, a cause and a Fix that
the lowering turns into a ``KernelSyntaxError`` at the offending node); nothing is
converted between types silently.
"""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass
from typing import Any

from vyre_core.ir import typerules
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import Binary, BinOp, Bitcast, Cast, Expr, Lit, Select, Unary, UnOp

#: The largest exponent ``x ** n`` multiplies out (the builder's rule).
MAX_POWER = 16


class Refusal(Exception):
    """A construct the kernel cannot express; ``node`` is set by the innermost visitor."""

    def __init__(self, cause: str, fix: str, node: ast.AST | None = None) -> None:
        super().__init__(cause)
        self.cause, self.fix, self.node = cause, fix, node


@dataclass(frozen=True)
class Value:
    """An expression of ``dtype``, or (``node`` None) the Python number ``const``."""

    node: Expr | None
    dtype: DType | None
    const: Any = None

    @property
    def weak(self) -> bool:
        return self.node is None


def number(value: Any) -> Value:
    """A Python number (or numpy scalar: it keeps its dtype) as a value."""
    np_dtype = getattr(value, "dtype", None)
    if np_dtype is not None:
        dtype = next((t for t in DType if t.value_np == np_dtype), None)
        if dtype is None:
            raise Refusal(f"a numpy {np_dtype} scalar has no vyre type",
                          "Use a Python number or a numpy scalar of a vyre dtype.")
        return Value(Lit.of(dtype, value.item()), dtype)
    return Value(None, None, value)


def _default_type(const: Any) -> DType:
    if isinstance(const, bool):
        return DType.BOOL
    return DType.I32 if isinstance(const, int) else DType.F32


def literal(const: Any, dtype: DType) -> Lit:
    """``const`` as a literal of ``dtype``, refused when it does not fit or has the
    wrong kind (a float where an int is meant)."""
    if isinstance(const, bool) != (dtype is DType.BOOL) or (
            isinstance(const, float) and dtype.is_int):
        raise Refusal(f"{const!r} used as {dtype.value}",
                      f"Write a {dtype.value} value, or cast: {dtype.value}(...).")
    try:
        return Lit.of(dtype, const)
    except (TypeError, ValueError) as exc:
        raise Refusal(f"{const!r} does not fit in {dtype.value}",
                      f"Use a value in range, or another type ({exc})") from None


def settle(v: Value, like: DType | None = None) -> Value:
    """``v`` as a typed expression: a number takes ``like``, else its default type."""
    if not v.weak:
        return v
    dtype = like if like is not None else _default_type(v.const)
    return Value(literal(v.const, dtype), dtype)


def cast(v: Value, dtype: DType) -> Value:
    """``f32(v)``: a literal of a number, a cast of an expression (none when already)."""
    if v.weak:
        const = v.const
        if dtype.is_int and isinstance(const, float):
            const = int(const) if math.isfinite(const) else const
        if dtype.is_float and not isinstance(const, bool):
            const = float(const)
        return Value(literal(const, dtype), dtype)
    if v.dtype is dtype:
        return v
    if not typerules.cast_allowed(v.dtype, dtype):
        raise Refusal(f"a {v.dtype.value} cannot be cast to {dtype.value}",
                      "Compare instead: x != 0.0.")
    return Value(Cast(dtype, v.node), dtype)


def bitcast(v: Value, dtype: DType) -> Value:
    """``vyre.bitcast(v, dtype)``: ``v``'s bits as ``dtype`` (a number alone takes its
    default type first), refused between types of two widths or with a bool."""
    v = settle(v)
    if not typerules.bitcast_allowed(v.dtype, dtype):
        raise Refusal(f"a bitcast of a {v.dtype.value} to {dtype.value}: "
                      + ("a bool has no bits of its own" if DType.BOOL in (v.dtype, dtype)
                         else f"{v.dtype.bits} bits are not {dtype.bits}"),
                      "Bitcast between types of one width (f16/u16/i16, f32/u32/i32, "
                      "f64/u64/i64, u8/i8); convert a value with a cast: u32(x).")
    return Value(Bitcast(dtype, v.node), dtype)


def truth(v: Value) -> Value:
    """A condition: a bool as it is; a number is true when non-zero (Python's meaning)."""
    v = settle(v)
    if v.dtype is DType.BOOL:
        return v
    return compare("!=", v, Value(None, None, 0))


def _pair(a: Value, b: Value, symbol: str, sources: tuple[str, str]) -> tuple[Value, Value]:
    """Both operands typed alike: a number takes the other's type; two typed values must
    have one type already (a Fix names the cast)."""
    if a.weak != b.weak:
        (number, side), (typed, other) = ((a, sources[0]), (b, sources[1])) if a.weak else \
            ((b, sources[1]), (a, sources[0]))
        try:
            settled = settle(number, typed.dtype)
        except Refusal as r:
            if not (typed.dtype.is_int and isinstance(number.const, int)):
                raise
            raise Refusal(f"{side} used as {typed.dtype.value} in {sources[0]} {symbol} "
                          f"{sources[1]}: {r.cause}",
                          f"Cast the {typed.dtype.value} side to a type that holds both: "
                          f"i64({other}) (or i32({other}) when it is below 2**31).") from None
        return (settled, b) if a.weak else (a, settled)
    a, b = settle(a), settle(b)
    if a.dtype is not b.dtype:
        left, right = sources
        if a.dtype.is_float != b.dtype.is_float:
            int_side, float_type = (left, b.dtype) if b.dtype.is_float else (right, a.dtype)
            fix = f"Cast the integer: {float_type.value}({int_side})."
        else:
            fix = (f"Cast one side: {b.dtype.value}({left}) or {a.dtype.value}({right}) "
                   "(ids, range variables, len() and int literals are i32).")
        raise Refusal(f"{left} {symbol} {right} mixes {a.dtype.value} and {b.dtype.value}: a "
                      "kernel never converts between types silently", fix)
    return a, b


_FOLD = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
         "//": operator.floordiv, "%": operator.mod, "**": operator.pow,
         "&": operator.and_, "|": operator.or_, "^": operator.xor,
         "<<": operator.lshift, ">>": operator.rshift,
         "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
         ">": operator.gt, ">=": operator.ge}

_ARITH = {"+": BinOp.ADD, "-": BinOp.SUB, "*": BinOp.MUL, "&": BinOp.AND, "|": BinOp.OR,
          "^": BinOp.XOR}
_COMPARE = {"==": BinOp.EQ, "!=": BinOp.NE, "<": BinOp.LT, "<=": BinOp.LE, ">": BinOp.GT,
            ">=": BinOp.GE}


def _fold(symbol: str, a: Any, b: Any) -> Value:
    try:
        return Value(None, None, _FOLD[symbol](a, b))
    except (ZeroDivisionError, OverflowError, ValueError) as exc:
        raise Refusal(f"{a!r} {symbol} {b!r} fails in Python ({exc})",
                      "Correct the constant expression.") from None


def _binary(op: BinOp, a: Value, b: Value, symbol: str) -> Value:
    dtype = typerules.binop_result(op, a.dtype, b.dtype)
    if dtype is None:
        raise Refusal(f"{symbol} is not defined on {a.dtype.value}",
                      "See the operator table in docs/kernels.md; cast the operands.")
    return Value(Binary(op, a.node, b.node), dtype)


def _zero(dtype: DType) -> Value:
    return Value(Lit.of(dtype, 0), dtype)


def _one(dtype: DType) -> Value:
    return Value(Lit.of(dtype, 1), dtype)


def select(cond: Value, if_true: Value, if_false: Value) -> Value:
    """``if_true if cond else if_false`` (both evaluated: expressions have no effects)."""
    t, f = _pair(if_true, if_false, "if/else", ("the value if true", "the value if false"))
    return Value(Select(truth(cond).node, t.node, f.node), t.dtype)


def binop(symbol: str, a: Value, b: Value, sources: tuple[str, str] = ("a", "b")) -> Value:
    """``a symbol b`` with Python's meaning (docs/kernels.md, "Operators")."""
    if a.weak and b.weak:
        return _fold(symbol, a.const, b.const)
    if symbol == "**":
        return power(a, b)
    if symbol in ("<<", ">>"):
        a = settle(a)
        if not a.dtype.is_int:
            raise Refusal(f"{symbol} on {a.dtype.value}", "Shift integers only.")
        count = cast(settle(b, DType.U32), DType.U32) if b.weak or b.dtype.is_int else None
        if count is None:
            raise Refusal(f"a shift by a {b.dtype.value}", "Shift by an integer.")
        if b.weak and not 0 <= b.const < a.dtype.bits:
            raise Refusal(f"a shift of a {a.dtype.value} by {b.const}: the IR masks the count "
                          f"to 0..{a.dtype.bits - 1}, which Python does not",
                          f"Shift by 0 to {a.dtype.bits - 1}, or widen first: "
                          f"i64({sources[0]}) {symbol} {b.const}.")
        return _binary(BinOp.SHL if symbol == "<<" else BinOp.SHR, a, count, symbol)
    a, b = _pair(a, b, symbol, sources)
    t = a.dtype
    if symbol in _COMPARE:
        return _binary(_COMPARE[symbol], a, b, symbol)
    if symbol in _ARITH:
        if symbol in "&|^" and not (t.is_int or t is DType.BOOL):
            raise Refusal(f"{symbol} on {t.value}", "Bitwise operators take ints or bools.")
        if t is DType.BOOL and symbol in "+-*":
            raise Refusal(f"{symbol} on bools", "Convert first: i32(flag).")
        return _binary(_ARITH[symbol], a, b, symbol)
    if symbol == "/":
        if t.is_int:
            raise Refusal(f"{sources[0]} / {sources[1]} on {t.value}: Python's / of ints "
                          "gives a float",
                          f"Write {sources[0]} // {sources[1]} for the floor quotient, or "
                          f"f32({sources[0]}) / f32({sources[1]}) for a float.")
        return _binary(BinOp.DIV, a, b, symbol)
    if symbol in ("//", "%"):
        if t.is_float:
            raise Refusal(f"{symbol} on {t.value}: Python's float {symbol} is not one IR "
                          "operation",
                          "Write math.floor(a / b) for the quotient, or a - b * "
                          "math.floor(a / b) for the remainder.")
        return floor_div(a, b) if symbol == "//" else modulo(a, b)
    raise Refusal(f"operator {symbol} is not supported", "See docs/kernels.md.")


def _opposite_signs(r: Value, b: Value) -> Value:
    """``r != 0 and (r < 0) != (b < 0)``: where the truncating and the floor results
    differ."""
    zero = _zero(r.dtype)
    nonzero = _binary(BinOp.NE, r, zero, "!=")
    differ = _binary(BinOp.NE, _binary(BinOp.LT, r, zero, "<"),
                     _binary(BinOp.LT, b, zero, "<"), "!=")
    return _binary(BinOp.LOGICAL_AND, nonzero, differ, "and")


def floor_div(a: Value, b: Value) -> Value:
    """Python's ``//``: the IR's truncating quotient, one less where the remainder is
    non-zero and the signs differ (unsigned: the quotient itself)."""
    q = _binary(BinOp.DIV, a, b, "//")
    if not a.dtype.is_signed:
        return q
    r = _binary(BinOp.REM, a, b, "%")
    fix = Value(Select(_opposite_signs(r, b).node, _one(a.dtype).node,
                       _zero(a.dtype).node), a.dtype)
    return _binary(BinOp.SUB, q, fix, "-")


def modulo(a: Value, b: Value) -> Value:
    """Python's ``%``: the IR's remainder (the dividend's sign) plus ``b`` where it is
    non-zero and the signs differ, so the result has the divisor's sign."""
    r = _binary(BinOp.REM, a, b, "%")
    if not a.dtype.is_signed:
        return r
    fix = Value(Select(_opposite_signs(r, b).node, b.node, _zero(a.dtype).node), a.dtype)
    return _binary(BinOp.ADD, r, fix, "+")


def power(x: Value, n: Value) -> Value:
    """``x ** n``: an int constant ``n`` from 0 to 16, ``n`` factors multiplied left to
    right (1 for 0): the builder's rule."""
    if not n.weak or isinstance(n.const, bool) or not isinstance(n.const, int) \
            or not 0 <= n.const <= MAX_POWER:
        raise Refusal(f"x ** {n.const if n.weak else 'a variable'}: ** takes an int constant "
                      f"exponent from 0 to {MAX_POWER}",
                      "Use math.pow(x, y) for floats, or a loop of multiplications.")
    x = settle(x)
    if x.dtype is DType.BOOL:
        raise Refusal("** on a bool", "Convert first: i32(flag).")
    result = _one(x.dtype) if n.const == 0 else x
    for _ in range(n.const - 1):
        result = _binary(BinOp.MUL, result, x, "*")
    return result


def compare(symbol: str, a: Value, b: Value, sources: tuple[str, str] = ("a", "b")) -> Value:
    return binop(symbol, a, b, sources)


def logical(symbol: str, a: Value, b: Value) -> Value:
    """``a and b`` / ``a or b`` on bools (both sides evaluated: they have no effects)."""
    if a.weak and b.weak:
        return Value(None, None, (a.const and b.const) if symbol == "and"
                     else (a.const or b.const))
    a, b = settle(a), settle(b)
    for side in (a, b):
        if side.dtype is not DType.BOOL:
            raise Refusal(f"`{symbol}` on a {side.dtype.value}: Python's `{symbol}` returns "
                          "one of its operands, which a kernel's types cannot hold",
                          "Compare explicitly: (x != 0) and (y != 0).")
    op = BinOp.LOGICAL_AND if symbol == "and" else BinOp.LOGICAL_OR
    return Value(Binary(op, a.node, b.node), DType.BOOL)


def unary(symbol: str, v: Value) -> Value:
    """``-v``, ``+v``, ``~v``, ``not v``."""
    if v.weak:
        folds = {"-": operator.neg, "+": operator.pos, "~": operator.invert,
                 "not": operator.not_}
        return Value(None, None, folds[symbol](v.const))
    t = v.dtype
    if symbol == "+":
        return v
    if symbol == "not":
        if t is not DType.BOOL:
            raise Refusal(f"not on a {t.value}", "Compare explicitly: x == 0.")
        return Value(Unary(UnOp.NOT, v.node), t)
    if symbol == "-":
        if not (t.is_signed or t.is_float):
            raise Refusal(f"-x on {t.value}: it has no negative values",
                          "Cast first: -i32(x), or write 0 - x for wrapping.")
        return Value(Unary(UnOp.NEG, v.node), t)
    if t is DType.BOOL or not t.is_int:
        raise Refusal(f"~ on {t.value}: Python's ~ is an int's bit flip",
                      "Use `not` on a bool; ~ on an integer.")
    return Value(Unary(UnOp.BIT_NOT, v.node), t)


def function(op: UnOp, v: Value, name: str) -> Value:
    """A float function of the IR (``math.sqrt``, ...) on a float."""
    v = settle(v) if not v.weak else settle(v, DType.F32) if not isinstance(
        v.const, bool) else settle(v)
    dtype = typerules.unop_result(op, v.dtype)
    if dtype is None:
        raise Refusal(f"{name} of a {v.dtype.value}",
                      f"Cast it first: {name}(f32(x)).")
    return Value(Unary(op, v.node), dtype)


def binary_function(op: BinOp, a: Value, b: Value, name: str) -> Value:
    """``min``, ``max``, ``math.pow``, ``math.atan2``."""
    a, b = _pair(a, b, ",", (f"{name}(a", "b)"))
    dtype = typerules.binop_result(op, a.dtype, b.dtype)
    if dtype is None:
        raise Refusal(f"{name} of {a.dtype.value}", "See docs/kernels.md for its types.")
    return Value(Binary(op, a.node, b.node), dtype)
