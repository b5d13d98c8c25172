"""The math library's functions as IR values, the operations they compute, and the
library's version.

A function is what a backend runs in place of an IR operation of one operand type: a body
of statements over its parameters and the expression of its result. Programs keep the
operation itself (``unop.exp2``: their bytes and fingerprints do not change), and
``inline.expand`` writes the function out where the program uses it, before a backend
compiles it. The version is a digest of the library's code: it joins the pipeline key,
so a change of the library is never served from a pipeline compiled with the old one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from pathlib import Path
from typing import Any

import blake3

from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import Expr, Stmt, Var


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


def param(i: int) -> str:
    """The name a function's body reads its parameter ``i`` by."""
    return f"arg{i}"


def define(name: str, params: tuple[DType, ...], build: Callable[..., Any]) -> Function:
    """The function ``build`` writes: it is called with a kernel to emit ``let``s into
    and one value per parameter, and returns the result."""
    from vyre_core.ir.builder import Kernel  # (only where a function is built)
    from vyre_core.ir.values import Val, as_val

    k = Kernel()
    result = as_val(build(k, *(Val(Var(param(i)), t) for i, t in enumerate(params))))
    return Function(name, params, k.build(validate=False).body, result.node, result.dtype)


#: An IR operation of one operand type: its op id (``ir.ALL_OPS``: ``unop.exp2``) and the
#: type of its (first) operand.
Operation = tuple[str, DType]


#: Each operation the library computes: the module of ``vyre_core.mathlib`` and the name
#: of the function that writes its IR (imported only when a program uses one: the
#: builder stays out of a worker that runs none).
_WRITTEN_BY: dict[Operation, tuple[str, str]] = {
    ("unop.exp2", DType.F32): ("exp2", "exp2_f32"),
    ("unop.exp2", DType.F16): ("exp2", "exp2_f16"),
    ("unop.exp", DType.F32): ("exp", "exp_f32"),
    ("unop.exp", DType.F16): ("exp", "exp_f16"),
    ("unop.log2", DType.F32): ("log2", "log2_f32"),
    ("unop.log2", DType.F16): ("log2", "log2_f16"),
    ("unop.log", DType.F32): ("log", "log_f32"),
    ("unop.log", DType.F16): ("log", "log_f16"),
    ("unop.tanh", DType.F32): ("tanh", "tanh_f32"),
    ("unop.tanh", DType.F16): ("tanh", "tanh_f16"),
    ("unop.sin", DType.F32): ("trig", "sin_f32"),
    ("unop.sin", DType.F16): ("trig", "sin_f16"),
    ("unop.cos", DType.F32): ("trig", "cos_f32"),
    ("unop.cos", DType.F16): ("trig", "cos_f16"),
    ("unop.tan", DType.F32): ("tan", "tan_f32"),
    ("unop.tan", DType.F16): ("tan", "tan_f16"),

    ("binop.pow", DType.F32): ("pow", "pow_f32"),
    ("binop.pow", DType.F16): ("pow", "pow_f16"),
    ("binop.atan2", DType.F32): ("atan2", "atan2_f32"),
    ("binop.atan2", DType.F16): ("atan2", "atan2_f16"),
    ("unop.exp", DType.F64): ("exp_f64", "exp_f64"),
    ("unop.exp2", DType.F64): ("exp_f64", "exp2_f64"),
    ("unop.log", DType.F64): ("log_f64", "log_f64"),
    ("unop.log2", DType.F64): ("log_f64", "log2_f64"),
    ("unop.tanh", DType.F64): ("tanh_f64", "tanh_f64"),
    ("unop.sin", DType.F64): ("trig_f64", "sin_f64"),
    ("unop.cos", DType.F64): ("trig_f64", "cos_f64"),
    ("unop.tan", DType.F64): ("trig_f64", "tan_f64"),
    ("binop.atan2", DType.F64): ("atan2_f64", "atan2_f64"),
    ("binop.pow", DType.F64): ("pow_f64", "pow_f64"),
}
#: The op ids the library computes (for some operand type).
OPERATIONS = frozenset(op for op, _ in _WRITTEN_BY)


@cache
def functions() -> Mapping[Operation, Function]:
    """The operations the library computes, and the function each runs as."""
    return {(op, dtype): define(f"{module}.{name}", (dtype,) * _arity(op), getattr(
                import_module(f"vyre_core.mathlib.{module}"), name))
            for (op, dtype), (module, name) in _WRITTEN_BY.items()}


def _arity(op: str) -> int:
    """How many operands ``op`` takes (``binop.atan2``: two, of one type)."""
    return 2 if op.startswith("binop.") else 1


@cache
def version() -> str:
    """A digest of the library's code (every module of ``vyre_core.mathlib``): a change
    of any function changes it. Read from the files, so asking costs no function built."""
    digest = blake3.blake3(b"vyre-mathlib\x00")
    for module in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(module.name.encode() + b"\0" + module.read_bytes())
    return digest.hexdigest()[:32]
