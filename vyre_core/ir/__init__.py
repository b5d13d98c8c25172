"""vyre's compute IR: build a kernel, get an immutable ``Program`` with a canonical byte
form, a fingerprint, validation and requirements. Semantics: docs/semantics.md.

Importing it is lazy (PEP 562): ``Program.from_wire`` in a worker never loads the builder.
"""

import importlib
from typing import Any

_DEFINED_IN = {  # module -> the public names it defines
    "vyre_core.ir.builder": ("Kernel",),
    "vyre_core.ir.values": ("BufferRef", "Val", "bitcast", "cast", "lit"),
    "vyre_core.ir.expressions": (
        "ceil", "cos", "exp", "floor", "fma", "global_id", "local_id", "log", "logical_and",
        "logical_not", "logical_or", "max", "min", "popcount", "select", "sin", "sqrt",
        "workgroup_id", "round", "trunc", "isnan", "isinf", "clz", "ctz", "bit_reverse",
        "rotl", "rotr", "mulhi", "add_sat", "sub_sat", "tan", "tanh", "exp2", "log2", "pow",
        "atan2", "table",
    ),
    "vyre_core.ir.dtypes": ("DType", "bool_", "f16", "f32", "f64", "i32", "u32", "u8", "u16",
                            "i8", "i16", "u64", "i64"),
    "vyre_core.ir.nodes": (
        "Access", "Assign", "Atomic", "AtomicOp", "Barrier", "BinOp", "Binary", "Bitcast",
        "Block", "Break", "BufLen", "Buffer", "Cast", "Continue", "Expr", "Fma", "IdKind",
        "If", "InvocationId", "Let", "Lit", "Load", "Loop", "Return", "Select",
        "SpecConstant", "SpecRef", "Stmt", "Store", "Subgroup", "SubgroupOp", "Table", "UnOp",
        "Unary", "Var", "While",
    ),
    "vyre_core.ir.program": ("Program",),
    "vyre_core.ir.requirements": ("ALL_OPS", "DEFAULT_OPS", "NEWER_OPS", "Requirements"),
    "vyre_core.ir.codes": ("CODES",),
    "vyre_core.ir.validate": ("Finding",),
}
_LAZY = {name: module for module, names in _DEFINED_IN.items() for name in names}

__all__ = [
    "ALL_OPS",
    "CODES",
    "DEFAULT_OPS",
    "NEWER_OPS",
    "Access",
    "Assign",
    "Atomic",
    "AtomicOp",
    "Barrier",
    "BinOp",
    "Binary",
    "Bitcast",
    "Block",
    "Break",
    "BufLen",
    "Buffer",
    "BufferRef",
    "Cast",
    "Continue",
    "DType",
    "Expr",
    "Finding",
    "Fma",
    "IdKind",
    "If",
    "InvocationId",
    "Kernel",
    "Let",
    "Lit",
    "Load",
    "Loop",
    "Program",
    "Requirements",
    "Return",
    "Select",
    "SpecConstant",
    "SpecRef",
    "Stmt",
    "Store",
    "Subgroup",
    "SubgroupOp",
    "Table",
    "UnOp",
    "Unary",
    "Val",
    "Var",
    "While",
    "add_sat",
    "atan2",
    "bit_reverse",
    "bitcast",
    "bool_",
    "cast",
    "ceil",
    "clz",
    "cos",
    "ctz",
    "exp",
    "exp2",
    "f16",
    "f32",
    "f64",
    "floor",
    "fma",
    "global_id",
    "i8",
    "i16",
    "i32",
    "i64",
    "isinf",
    "isnan",
    "lit",
    "local_id",
    "log",
    "log2",
    "logical_and",
    "logical_not",
    "logical_or",
    "max",
    "min",
    "mulhi",
    "popcount",
    "pow",
    "rotl",
    "rotr",
    "round",
    "select",
    "sin",
    "sqrt",
    "sub_sat",
    "table",
    "tan",
    "tanh",
    "trunc",
    "u8",
    "u16",
    "u32",
    "u64",
    "workgroup_id",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'vyre_core.ir' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    if module == "vyre_core.ir.dtypes":  # a dtype called makes a builder literal (ir.f32(1.5))
        importlib.import_module("vyre_core.ir.builder")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
