"""Which expressions have the same value in every invocation of a workgroup: the rule
V016 checks barriers against, and the one a backend may rely on to run a loop once for a
whole workgroup (vyre-cpu's lockstep kernels)."""

from __future__ import annotations

from collections.abc import Container, Mapping

from vyre_core.ir.nodes import (
    Access,
    Atomic,
    Binary,
    Buffer,
    BufLen,
    Cast,
    Expr,
    Fma,
    IdKind,
    InvocationId,
    Lit,
    Load,
    Select,
    SpecRef,
    Unary,
    Var,
)


def is_uniform(e: Expr, uniform_vars: Container[str], buffers: Mapping[str, Buffer]) -> bool:
    """Conservatively: literals, constants, buffer lengths, workgroup ids, the variables the caller
    knows to be uniform, and loads of uniform buffers at uniform indices, combined."""
    match e:
        case Lit() | BufLen() | SpecRef():
            return True
        case InvocationId(kind):
            return kind is IdKind.WORKGROUP
        case Var(name):
            return name in uniform_vars
        case Load(buffer, index):
            buf = buffers.get(buffer)
            return buf is not None and buf.access is Access.UNIFORM and \
                is_uniform(index, uniform_vars, buffers)
        case Atomic():
            return False
        case Binary(_, a, b):
            return is_uniform(a, uniform_vars, buffers) and is_uniform(b, uniform_vars, buffers)
        case Unary(_, a) | Cast(_, a):
            return is_uniform(a, uniform_vars, buffers)
        case Select(a, b, c) | Fma(a, b, c):
            return all(is_uniform(x, uniform_vars, buffers) for x in (a, b, c))
    return False
