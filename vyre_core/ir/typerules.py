"""The typing rules of the IR, in one place: the validator enforces them and the
builder uses them to type literals. ``None`` means "not allowed"."""

from __future__ import annotations

from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import SUBGROUP_LANE_OPS, AtomicOp, BinOp, SubgroupOp, UnOp

ARITH = {BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.DIV, BinOp.REM, BinOp.MIN, BinOp.MAX}
BITWISE = {BinOp.AND, BinOp.OR, BinOp.XOR}
SHIFTS = {BinOp.SHL, BinOp.SHR, BinOp.ROTL, BinOp.ROTR}  # (the count is always u32)
INTEGER_ONLY = {BinOp.MULHI, BinOp.ADD_SAT, BinOp.SUB_SAT}
FLOAT_ONLY = {BinOp.POW, BinOp.ATAN2}
EQUALITY = {BinOp.EQ, BinOp.NE}
ORDERING = {BinOp.LT, BinOp.LE, BinOp.GT, BinOp.GE}
LOGICAL = {BinOp.LOGICAL_AND, BinOp.LOGICAL_OR}
ATOMIC_DTYPES = (DType.U32, DType.I32)


def binop_result(op: BinOp, lhs: DType, rhs: DType) -> DType | None:
    if op in SHIFTS:
        return lhs if lhs.is_int and rhs is DType.U32 else None
    if lhs is not rhs:
        return None
    if op in ARITH:
        return lhs if lhs.is_numeric else None
    if op in INTEGER_ONLY:
        return lhs if lhs.is_int else None
    if op in FLOAT_ONLY:
        return lhs if lhs.is_float else None
    if op in BITWISE:
        return lhs if lhs.is_int or lhs is DType.BOOL else None
    if op in EQUALITY:
        return DType.BOOL
    if op in ORDERING:
        return DType.BOOL if lhs.is_numeric else None
    return DType.BOOL if lhs is DType.BOOL else None  # LOGICAL


def unop_result(op: UnOp, operand: DType) -> DType | None:
    if op in (UnOp.ISNAN, UnOp.ISINF):
        return DType.BOOL if operand.is_float else None
    allowed = {
        UnOp.NEG: operand.is_signed or operand.is_float,
        UnOp.BIT_NOT: operand.is_int,
        UnOp.NOT: operand is DType.BOOL,
        UnOp.ABS: operand.is_numeric,
        UnOp.POPCOUNT: operand.is_int,
        UnOp.CLZ: operand.is_int,
        UnOp.CTZ: operand.is_int,
        UnOp.BIT_REVERSE: operand.is_int,
    }.get(op, operand.is_float)  # the float-only functions
    return operand if allowed else None


def cast_allowed(src: DType, dst: DType) -> bool:
    """Every scalar cast is defined except float -> bool, whose NaN truthiness is ambiguous."""
    return not (src.is_float and dst is DType.BOOL)


def bitcast_allowed(src: DType, dst: DType) -> bool:
    """A bitcast reads bits as a type of the same width: f16/u16/i16, f32/u32/i32,
    f64/u64/i64, u8/i8. bool has no bits of its own (it is stored as a u32 word)."""
    return DType.BOOL not in (src, dst) and src.bits == dst.bits


def fma_result(a: DType, b: DType, c: DType) -> DType | None:
    return a if a.is_float and a is b is c else None


#: The types a lane's value may be moved in (its bits, unchanged).
SHUFFLE_DTYPES = (DType.U32, DType.I32, DType.F32)


def subgroup_result(op: SubgroupOp, value: DType | None, lane: DType | None) -> DType | None:
    """Integers for the reductions and scans (exact whatever the order lanes combine in:
    a float sum's bytes would depend on the hardware's order); 32-bit values to move;
    bool to ballot, into a u32 of lane bits; nothing to elect."""
    if (op in SUBGROUP_LANE_OPS) != (lane is not None) or (lane not in (None, DType.U32)):
        return None
    if op is SubgroupOp.ELECT:
        return DType.BOOL if value is None else None
    if op is SubgroupOp.BALLOT:
        return DType.U32 if value is DType.BOOL else None
    if op in SUBGROUP_LANE_OPS:
        return value if value in SHUFFLE_DTYPES else None
    return value if value in ATOMIC_DTYPES else None


def atomic_result(op: AtomicOp, buffer: DType, value: DType,
                  comparand: DType | None) -> DType | None:
    if buffer not in ATOMIC_DTYPES or value is not buffer:
        return None
    if (op is AtomicOp.COMPARE_EXCHANGE) != (comparand is not None):
        return None
    if comparand is not None and comparand is not buffer:
        return None
    return buffer
