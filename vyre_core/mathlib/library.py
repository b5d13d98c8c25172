"""The math library's functions as IR values, the operations they compute, and the
library's version.

A function is what a backend runs in place of an IR operation of one operand type: a body
of statements over its parameters and the expression of its result. Programs keep the
operation itself (``unop.exp2``: their bytes and fingerprints do not change), and
``inline.expand`` writes the function out where the program uses it, before a backend
compiles it. The version is a digest of every function's canonical bytes: it joins the
pipeline key, so a change of the library is never served from a pipeline compiled with
the old one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache

import blake3

from vyre_core.ir import Program
from vyre_core.ir.builder import Kernel, Val, as_val
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import Expr, Let, Stmt, Var
from vyre_core.mathlib import exp, exp2, log2


@dataclass(frozen=True)
class Function:
    """One function of the library: ``body`` reads parameter ``i`` as ``Var(param(i))``
    and ends with ``result``, of type ``dtype``; it has no buffers, barriers or returns,
    so it can be written out at any statement of any program."""

    name: str
    params: tuple[DType, ...]
    body: tuple[Stmt, ...]
    result: Expr
    dtype: DType

    def to_wire(self) -> bytes:
        """Canonical bytes: the body and a last ``let`` of the result, as a program's."""
        return Program((), (1, 1, 1), (*self.body, Let("result", self.result))).to_wire()


def param(i: int) -> str:
    """The name a function's body reads its parameter ``i`` by."""
    return f"arg{i}"


def define(name: str, params: tuple[DType, ...], build: Callable[..., Val]) -> Function:
    """The function ``build`` writes: it is called with a kernel to emit ``let``s into
    and one value per parameter, and returns the result."""
    k = Kernel()
    result = as_val(build(k, *(Val(Var(param(i)), t) for i, t in enumerate(params))))
    return Function(name, params, k.build(validate=False).body, result.node, result.dtype)


#: An IR operation of one operand type: its op id (``ir.ALL_OPS``: ``unop.exp2``) and the
#: type of its (first) operand.
Operation = tuple[str, DType]


@cache
def functions() -> Mapping[Operation, Function]:
    """The operations the library computes, and the function each runs as."""
    return {
        ("unop.exp2", DType.F32): define("exp2.f32", (DType.F32,), exp2.exp2_f32),
        ("unop.exp2", DType.F16): define("exp2.f16", (DType.F16,), exp2.exp2_f16),
        ("unop.exp", DType.F32): define("exp.f32", (DType.F32,), exp.exp_f32),
        ("unop.exp", DType.F16): define("exp.f16", (DType.F16,), exp.exp_f16),
        ("unop.log2", DType.F32): define("log2.f32", (DType.F32,), log2.log2_f32),
        ("unop.log2", DType.F16): define("log2.f16", (DType.F16,), log2.log2_f16),
    }


@cache
def version() -> str:
    """A digest of the library's functions: equal for equal code, whoever built it."""
    digest = blake3.blake3(b"vyre-mathlib\x00")
    for (op, dtype), fn in sorted(functions().items(), key=lambda item: (item[0][0],
                                                                           item[0][1].value)):
        digest.update(f"{op}:{dtype.value}\x00".encode())
        digest.update(fn.to_wire())
    return digest.hexdigest()[:32]
