"""vyre's compute IR: build a kernel, get an immutable ``Program`` with a canonical byte
form, a fingerprint, validation and requirements. Semantics: docs/semantics.md."""

from vyre_core.ir.builder import (
    BufferRef,
    Kernel,
    Val,
    cast,
    ceil,
    cos,
    exp,
    floor,
    fma,
    global_id,
    lit,
    local_id,
    log,
    logical_and,
    logical_not,
    logical_or,
    max,
    min,
    popcount,
    select,
    sin,
    sqrt,
    workgroup_id,
)
from vyre_core.ir.dtypes import DType, bool_, f16, f32, f64, i32, u32
from vyre_core.ir.nodes import (
    Access,
    Assign,
    Atomic,
    AtomicOp,
    Barrier,
    Binary,
    BinOp,
    Block,
    Buffer,
    BufLen,
    Cast,
    Expr,
    Fma,
    IdKind,
    If,
    InvocationId,
    Let,
    Lit,
    Load,
    Loop,
    Return,
    Select,
    Stmt,
    Store,
    Unary,
    UnOp,
    Var,
)
from vyre_core.ir.program import Program
from vyre_core.ir.requirements import ALL_OPS, Requirements
from vyre_core.ir.validate import CODES, Finding

__all__ = [
    "ALL_OPS", "CODES", "Access", "Assign", "Atomic", "AtomicOp", "Barrier", "BinOp", "Binary",
    "Block", "BufLen", "Buffer", "BufferRef", "Cast", "DType", "Expr", "Finding", "Fma", "IdKind",
    "If", "InvocationId", "Kernel", "Let", "Lit", "Load", "Loop", "Program", "Requirements",
    "Return", "Select", "Stmt", "Store", "UnOp", "Unary", "Val", "Var", "bool_", "cast", "ceil",
    "cos", "exp", "f16", "f32", "f64", "floor", "fma", "global_id", "i32", "lit", "local_id",
    "log", "logical_and", "logical_not", "logical_or", "max", "min", "popcount", "select", "sin",
    "sqrt", "u32", "workgroup_id",
]
