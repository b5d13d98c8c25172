"""The type of an expression of a valid program, from the types of the variables in scope:
the one rule every pass that rewrites or lowers expressions reads (the validator, which
must also report what is ill-typed, has its own walk)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    Atomic,
    Binary,
    Bitcast,
    Buffer,
    BufLen,
    Cast,
    Expr,
    Fma,
    InvocationId,
    Lit,
    Load,
    Select,
    SpecConstant,
    SpecRef,
    Subgroup,
    Table,
    Unary,
    Var,
)
from vyre_core.ir.typerules import binop_result, subgroup_result, unop_result


def type_of(e: Expr, variable: Callable[[str], DType], buffers: Mapping[str, Buffer],
            constants: Mapping[str, SpecConstant] | None = None) -> DType:
    """``e``'s type; ``variable`` gives the type of a name in scope at ``e``."""
    def of(x: Expr) -> DType:
        return type_of(x, variable, buffers, constants)

    match e:
        case Lit(dtype=t) | Cast(dtype=t) | Bitcast(dtype=t) | Table(dtype=t):
            return t
        case Var(name):
            return variable(name)
        case SpecRef(name) if constants is not None:
            return constants[name].dtype
        case Load(buffer=b) | Atomic(buffer=b):
            return buffers[b].dtype
        case BufLen() | InvocationId():
            return DType.U32
        case Binary(op, lhs, rhs):
            return _known(binop_result(op, of(lhs), of(rhs)), e)
        case Unary(op, x):
            return _known(unop_result(op, of(x)), e)
        case Select(if_true=x) | Fma(a=x):
            return of(x)
        case Subgroup(op, _, value, lane):
            return _known(subgroup_result(op, None if value is None else of(value),
                                          None if lane is None else of(lane)), e)
    raise AssertionError(f"{e!r} is not an expression of a valid program")


def _known(t: DType | None, e: Expr) -> DType:
    if t is None:
        raise AssertionError(f"{e!r} is ill-typed (the program was not validated)")
    return t
