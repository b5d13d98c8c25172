"""What a backend must support to run a program; the input to routing."""

from __future__ import annotations

from dataclasses import dataclass

from vyre_core.ir.dtypes import NEWER_DTYPES, DType
from vyre_core.ir.nodes import (
    ONE,
    Access,
    Assign,
    Atomic,
    AtomicOp,
    Barrier,
    Binary,
    BinOp,
    Bitcast,
    Block,
    Break,
    BufLen,
    Cast,
    Continue,
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
    SpecRef,
    Store,
    Subgroup,
    SubgroupOp,
    Table,
    Unary,
    UnOp,
    Var,
    While,
    walk,
)
from vyre_core.ir.specialize import specialize

_NODE_OPS = {
    Let: "stmt.let", Assign: "stmt.assign", Store: "stmt.store", If: "stmt.if",
    Loop: "stmt.loop", Return: "stmt.return", Barrier: "stmt.barrier", Block: "stmt.block",
    While: "stmt.while", Break: "stmt.break", Continue: "stmt.continue",
    Lit: "expr.literal", Var: "expr.var", Load: "expr.load", BufLen: "expr.buffer_len",
    Select: "expr.select", Cast: "expr.cast", Fma: "expr.fma", Bitcast: "expr.bitcast",
    Table: "expr.table",
    SpecRef: "expr.literal",  # (a constant runs as the literal of its chosen value)
}

#: Every operation id of the IR; a backend that runs all of them runs every program.
ALL_OPS: frozenset[str] = frozenset(
    [*_NODE_OPS.values(), "stmt.loop_step"]
    + [f"id.{k.value}" for k in IdKind]
    + [f"binop.{op.value}" for op in BinOp]
    + [f"unop.{op.value}" for op in UnOp]
    + [f"atomic.{op.value}" for op in AtomicOp]
    + [f"subgroup.{op.value}" for op in SubgroupOp]
    + [f"dtype.{t.value}" for t in NEWER_DTYPES]
)

#: Ops the IR gained after the contract (major 1) was frozen. A backend runs them only if
#: it names them in ``vyre_supported_ops``; the default claim (``DEFAULT_OPS``) leaves them
#: out, so a plugin written before they existed is never routed a program it would misread
#: (a loop's step it ignores, an op it does not know).
NEWER_OPS: frozenset[str] = frozenset(
    [f"unop.{op.value}" for op in (UnOp.CLZ, UnOp.CTZ, UnOp.BIT_REVERSE, UnOp.ROUND,
                                   UnOp.TRUNC, UnOp.ISNAN, UnOp.ISINF, UnOp.TAN, UnOp.TANH,
                                   UnOp.EXP2, UnOp.LOG2)]
    + [f"binop.{op.value}" for op in (BinOp.ROTL, BinOp.ROTR, BinOp.MULHI, BinOp.ADD_SAT,
                                      BinOp.SUB_SAT, BinOp.POW, BinOp.ATAN2)]
    + ["stmt.while", "stmt.break", "stmt.continue", "stmt.loop_step", "expr.bitcast",
       "expr.table"]
    + [f"subgroup.{op.value}" for op in SubgroupOp]
    + [f"dtype.{t.value}" for t in NEWER_DTYPES]
)
#: What a backend that does not implement ``vyre_supported_ops`` is taken to run.
DEFAULT_OPS: frozenset[str] = ALL_OPS - NEWER_OPS

FEATURES = ("atomics", "barriers", "workgroup_memory", "f16", "f64", "subgroups")


@dataclass(frozen=True)
class Requirements:
    ops: frozenset[str]
    dtypes: frozenset[DType]
    features: frozenset[str]
    workgroup_size: tuple[int, int, int]
    invocations_per_workgroup: int
    largest_buffer_bytes: int          # over storage buffers with a declared count
    workgroup_memory_bytes: int
    loop_trip_bound: int | None        # largest static trip count; None when not static
    largest_buffer: str = ""           # the name of that buffer ("": none has a count)
    subgroup_size: int | None = None   # the subgroups its subgroup operations run over


def _op_id(node) -> str:
    match node:
        case InvocationId(kind=k):
            return f"id.{k.value}"
        case Binary(op=op):
            return f"binop.{op.value}"
        case Unary(op=op):
            return f"unop.{op.value}"
        case Loop(step=step) if step != ONE:
            return "stmt.loop_step"
        case Atomic(op=op):
            return f"atomic.{op.value}"
        case Subgroup(op=op):
            return f"subgroup.{op.value}"
    return _NODE_OPS[type(node)]


def requirements_of(program) -> Requirements:
    """What running ``program`` needs; a program with constants is weighed as it runs
    with their defaults (each choice of values is checked again when it is made)."""
    if program.constants:
        program = specialize(program)
    ops: set[str] = set()
    dtypes = {b.dtype for b in program.buffers}
    features: set[str] = set()
    trip: int | None = 0
    subgroup_size: int | None = None  # (one per program: V034)
    for node in walk(program.body):
        ops.add(_op_id(node))
        match node:
            case Lit(dtype=t) | Cast(dtype=t) | Bitcast(dtype=t) | Table(dtype=t):
                dtypes.add(t)
            case Atomic():
                features.add("atomics")
            case Barrier():
                features.add("barriers")
            case Subgroup(size=size):
                features.add("subgroups")
                subgroup_size = size
            case Loop(start=Lit() as s, end=Lit() as e, step=Lit() as step) \
                    if trip is not None and step.bits:  # (a step of 0 is V031's)
                trip = max(trip, -(-max(0, e.bits - s.bits) // step.bits))
            case Loop() | While():  # (a while loop's bound is a ceiling, rarely its count)
                trip = None
    workgroup = [b for b in program.buffers if b.access is Access.WORKGROUP]
    if workgroup:
        features.add("workgroup_memory")
    features |= {t.value for t in dtypes if t in (DType.F16, DType.F64)}
    ops |= {f"dtype.{t.value}" for t in dtypes if t in NEWER_DTYPES}
    sized = [(b.count * b.dtype.storage_bytes, b.name) for b in program.buffers
             if b.count is not None and b.access is not Access.WORKGROUP]
    largest_bytes, largest = max(sized, key=lambda s: s[0], default=(0, ""))
    return Requirements(
        ops=frozenset(ops),
        dtypes=frozenset(dtypes),
        features=frozenset(features),
        workgroup_size=program.workgroup,
        invocations_per_workgroup=program.invocations_per_workgroup,
        largest_buffer=largest,
        largest_buffer_bytes=largest_bytes,
        workgroup_memory_bytes=sum(b.count * b.dtype.storage_bytes for b in workgroup
                                   if b.count is not None),
        loop_trip_bound=trip,
        subgroup_size=subgroup_size,
    )
