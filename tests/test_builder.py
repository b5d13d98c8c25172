"""The builder: operators build the intended nodes, Python literals take the other
operand's type, statements nest, and ``requirements()`` reports exactly what a program
needs."""

from __future__ import annotations

import operator

import numpy as np
import pytest
from ir_strategies import every_node_program

from vyre_core import ir
from vyre_core.errors import ValidationError
from vyre_core.ir import (
    ALL_OPS,
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
    DType,
    Fma,
    IdKind,
    If,
    InvocationId,
    Let,
    Lit,
    Load,
    Loop,
    Program,
    Return,
    Select,
    Store,
    Unary,
    UnOp,
    Var,
)
from vyre_examples.saxpy import program as saxpy

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)

GID = InvocationId(IdKind.GLOBAL, 0)
LID = InvocationId(IdKind.LOCAL, 0)
F32_ONE = 0x3F800000


def u32_val() -> ir.Val:
    return ir.global_id(0)


def typed(dtype: DType, name: str = "v") -> ir.Val:
    return ir.Val(Var(name), dtype)


# -- operators --------------------------------------------------------------------------

def test_adding_int_to_u32_builds_binary_add_with_u32_literal():
    v = u32_val() + 1
    assert v.node == Binary(BinOp.ADD, GID, Lit(DType.U32, 1))
    assert v.dtype is DType.U32


def test_reflected_operator_keeps_operand_order():
    v = 10 - u32_val()
    assert v.node == Binary(BinOp.SUB, Lit(DType.U32, 10), GID)
    assert v.dtype is DType.U32


BINARY_OPERATORS = [
    (operator.add, BinOp.ADD), (operator.sub, BinOp.SUB), (operator.mul, BinOp.MUL),
    (operator.truediv, BinOp.DIV), (operator.mod, BinOp.REM), (operator.and_, BinOp.AND),
    (operator.or_, BinOp.OR), (operator.xor, BinOp.XOR), (operator.lshift, BinOp.SHL),
    (operator.rshift, BinOp.SHR), (operator.eq, BinOp.EQ), (operator.ne, BinOp.NE),
    (operator.lt, BinOp.LT), (operator.le, BinOp.LE), (operator.gt, BinOp.GT),
    (operator.ge, BinOp.GE),
]


@pytest.mark.parametrize(("fn", "op"), BINARY_OPERATORS, ids=[o.value for _, o in BINARY_OPERATORS])
def test_python_operator_builds_its_binop(fn, op):
    a, b = typed(DType.I32, "a"), typed(DType.I32, "b")
    v = fn(a, b)
    assert isinstance(v, ir.Val)
    assert v.node == Binary(op, Var("a"), Var("b"))
    if op in (BinOp.EQ, BinOp.NE, BinOp.LT, BinOp.LE, BinOp.GT, BinOp.GE):
        assert v.dtype is DType.BOOL
    elif op in (BinOp.SHL, BinOp.SHR):
        assert v.dtype is None  # i32 shift amount: refused by the validator (V007)
    else:
        assert v.dtype is DType.I32


REFLECTED = [p for p in BINARY_OPERATORS if p[1] in (
    BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.DIV, BinOp.REM, BinOp.AND, BinOp.OR, BinOp.XOR)]


@pytest.mark.parametrize(("fn", "op"), REFLECTED, ids=[o.value for _, o in REFLECTED])
def test_reflected_python_operator_builds_its_binop_with_literal_on_the_left(fn, op):
    v = fn(3, typed(DType.I32, "b"))
    assert v.node == Binary(op, Lit(DType.I32, 3), Var("b"))
    assert v.dtype is DType.I32


@pytest.mark.parametrize(("fn", "op"), [
    (operator.lt, BinOp.GT), (operator.le, BinOp.GE), (operator.gt, BinOp.LT),
    (operator.ge, BinOp.LE), (operator.eq, BinOp.EQ), (operator.ne, BinOp.NE),
])
def test_comparison_with_literal_on_the_left_is_mirrored(fn, op):
    # Python evaluates ``3 < b`` as ``b > 3``: same meaning, operands swapped.
    v = fn(3, typed(DType.I32, "b"))
    assert v.node == Binary(op, Var("b"), Lit(DType.I32, 3))
    assert v.dtype is DType.BOOL


def test_equality_builds_an_expression_not_a_python_bool():
    v = u32_val() == 3
    assert isinstance(v, ir.Val)
    assert v.node == Binary(BinOp.EQ, GID, Lit(DType.U32, 3))
    assert v.dtype is DType.BOOL


@pytest.mark.parametrize(("dtype", "bits"), [
    (DType.F32, F32_ONE), (DType.F16, 0x3C00), (DType.F64, 0x3FF0000000000000),
    (DType.I32, 1), (DType.U32, 1),
])
def test_int_literal_takes_the_other_operands_type(dtype, bits):
    v = typed(dtype) + 1
    assert v.node == Binary(BinOp.ADD, Var("v"), Lit(dtype, bits))
    assert v.dtype is dtype


def test_float_literal_with_f32_operand_is_an_f32_literal():
    v = typed(DType.F32) * 1.5
    assert v.node == Binary(BinOp.MUL, Var("v"), Lit(DType.F32, 0x3FC00000))


def test_negative_int_literal_with_i32_operand_is_twos_complement():
    v = typed(DType.I32) + -1
    assert v.node.rhs == Lit(DType.I32, 0xFFFFFFFF)


@pytest.mark.parametrize("dtype", [DType.U32, DType.I32])
@pytest.mark.parametrize("reflected", [False, True])
def test_float_literal_with_int_operand_raises_type_error_with_fix(dtype, reflected):
    with pytest.raises(TypeError, match="Fix:"):
        _ = (1.5 + typed(dtype)) if reflected else (typed(dtype) + 1.5)


def test_bool_literal_with_bool_operand_is_a_bool_literal():
    v = typed(DType.BOOL) & True
    assert v.node == Binary(BinOp.AND, Var("v"), Lit(DType.BOOL, 1))
    assert v.dtype is DType.BOOL


@pytest.mark.parametrize("fn", [operator.lshift, operator.rshift])
@pytest.mark.parametrize("dtype", [DType.U32, DType.I32])
def test_shift_amount_literal_is_u32_whatever_the_shifted_type(fn, dtype):
    v = fn(typed(dtype), 3)
    assert v.node.rhs == Lit(DType.U32, 3)
    assert v.dtype is dtype


def test_shift_by_u32_value_keeps_the_shifted_type():
    v = typed(DType.I32) << u32_val()
    assert v.node == Binary(BinOp.SHL, Var("v"), GID)
    assert v.dtype is DType.I32


def test_invert_on_bool_is_logical_not():
    v = ~typed(DType.BOOL)
    assert v.node == Unary(UnOp.NOT, Var("v"))
    assert v.dtype is DType.BOOL


@pytest.mark.parametrize("dtype", [DType.U32, DType.I32])
def test_invert_on_int_is_bit_not(dtype):
    v = ~typed(dtype)
    assert v.node == Unary(UnOp.BIT_NOT, Var("v"))
    assert v.dtype is dtype


def test_invert_of_a_comparison_is_logical_not():
    v = ~(u32_val() < 4)
    assert v.node == Unary(UnOp.NOT, Binary(BinOp.LT, GID, Lit(DType.U32, 4)))


def test_negation_and_abs_build_unary_nodes():
    assert (-typed(DType.I32)).node == Unary(UnOp.NEG, Var("v"))
    assert abs(typed(DType.F32)).node == Unary(UnOp.ABS, Var("v"))


@pytest.mark.parametrize(("fn", "op"), [
    (ir.sqrt, UnOp.SQRT), (ir.exp, UnOp.EXP), (ir.log, UnOp.LOG), (ir.sin, UnOp.SIN),
    (ir.cos, UnOp.COS), (ir.floor, UnOp.FLOOR), (ir.ceil, UnOp.CEIL),
])
def test_float_functions_build_their_unop(fn, op):
    v = fn(typed(DType.F32))
    assert v.node == Unary(op, Var("v"))
    assert v.dtype is DType.F32


def test_popcount_min_max_logical_helpers():
    assert ir.popcount(typed(DType.I32)).node == Unary(UnOp.POPCOUNT, Var("v"))
    assert ir.min(u32_val(), 3).node == Binary(BinOp.MIN, GID, Lit(DType.U32, 3))
    assert ir.max(3, u32_val()).node == Binary(BinOp.MAX, Lit(DType.U32, 3), GID)
    b = typed(DType.BOOL)
    assert ir.logical_and(b, True).node == Binary(BinOp.LOGICAL_AND, Var("v"), Lit(DType.BOOL, 1))
    assert ir.logical_or(b, b).node == Binary(BinOp.LOGICAL_OR, Var("v"), Var("v"))
    assert ir.logical_not(b).node == Unary(UnOp.NOT, Var("v"))


def test_cast_select_fma_build_their_nodes():
    assert u32_val().cast(ir.f32).node == Cast(DType.F32, GID)
    assert ir.cast(1, ir.i32).node == Cast(DType.I32, Lit(DType.U32, 1))
    s = ir.select(u32_val() < 2, typed(DType.F32), 0.5)
    assert s.node == Select(Binary(BinOp.LT, GID, Lit(DType.U32, 2)), Var("v"),
                            Lit(DType.F32, 0x3F000000))
    assert s.dtype is DType.F32
    f = ir.fma(typed(DType.F64), 2, 1.0)
    assert f.node == Fma(Var("v"), Lit(DType.F64, 0x4000000000000000),
                         Lit(DType.F64, 0x3FF0000000000000))
    assert f.dtype is DType.F64


def test_invocation_ids_are_u32_on_the_given_axis():
    assert ir.global_id(2).node == InvocationId(IdKind.GLOBAL, 2)
    assert ir.local_id(1).node == InvocationId(IdKind.LOCAL, 1)
    assert ir.workgroup_id().node == InvocationId(IdKind.WORKGROUP, 0)
    assert {ir.global_id().dtype, ir.local_id().dtype, ir.workgroup_id().dtype} == {DType.U32}


# -- literals ---------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "lit"), [
    (True, Lit(DType.BOOL, 1)), (False, Lit(DType.BOOL, 0)), (7, Lit(DType.U32, 7)),
    (-3, Lit(DType.I32, 0xFFFFFFFD)), (1.0, Lit(DType.F32, F32_ONE)),
    (-0.0, Lit(DType.F32, 0x80000000)), (float("inf"), Lit(DType.F32, 0x7F800000)),
])
def test_untyped_literal_defaults(value, lit):
    v = ir.lit(value)
    assert v.node == lit
    assert v.dtype is lit.dtype


@pytest.mark.parametrize(("make", "lit"), [
    (lambda: ir.u32(5), Lit(DType.U32, 5)), (lambda: ir.i32(-1), Lit(DType.I32, 0xFFFFFFFF)),
    (lambda: ir.f32(-0.0), Lit(DType.F32, 0x80000000)),
    (lambda: ir.f16(1.0), Lit(DType.F16, 0x3C00)),
    (lambda: ir.f64(-0.0), Lit(DType.F64, 1 << 63)), (lambda: ir.bool_(True), Lit(DType.BOOL, 1)),
    (lambda: ir.u32(np.uint32(5)), Lit(DType.U32, 5)), (lambda: ir.f32(np.float64(0.1)),
                                                        Lit(DType.F32, 0x3DCCCCCD)),
    (lambda: ir.lit(2, ir.f32), Lit(DType.F32, 0x40000000)),
], ids=["u32", "i32", "f32-neg-zero", "f16", "f64-neg-zero", "bool", "np-u32", "np-f64-to-f32",
        "lit-int-as-f32"])
def test_typed_literal_constructors(make, lit):
    v = make()
    assert v.node == lit
    assert v.dtype is lit.dtype


@pytest.mark.parametrize("make", [lambda: ir.lit(True, ir.u32), lambda: ir.lit(1, ir.bool_)],
                         ids=["bool-as-u32", "int-as-bool"])
def test_bool_and_number_literals_do_not_mix(make):
    with pytest.raises(TypeError, match="Fix:"):
        make()


@pytest.mark.parametrize("make", [lambda: ir.u32(2**32), lambda: ir.u32(-1),
                                  lambda: ir.i32(2**31), lambda: u32_val() + 2**32])
def test_out_of_range_int_literal_is_refused(make):
    with pytest.raises(ValueError, match="does not fit"):
        make()


# -- truth value and misuse -----------------------------------------------------------------

def test_bool_of_a_value_raises_type_error_with_fix():
    with pytest.raises(TypeError, match=r"Fix: use `with k\.if_"):
        bool(u32_val() < 3)


def test_python_if_on_a_value_raises_type_error_with_fix():
    with pytest.raises(TypeError, match="Fix:"):
        if u32_val() < 3:
            pass


def test_chained_comparison_raises_instead_of_silently_dropping_a_side():
    with pytest.raises(TypeError, match="Fix:"):
        _ = 0 < u32_val() < 3


def test_values_are_unhashable():
    with pytest.raises(TypeError):
        hash(u32_val())


def test_using_a_buffer_as_a_value_raises_type_error_with_fix():
    k = ir.Kernel()
    buf = k.read("data", ir.u32)
    with pytest.raises(TypeError, match="Fix: load an element"):
        _ = u32_val() + buf


# -- statements ---------------------------------------------------------------------------

def test_buffers_get_bindings_in_declaration_order():
    k = ir.Kernel()
    k.read("a", ir.f32)
    k.output("b", ir.u32, 8)
    k.uniform("c", ir.i32)
    k.workgroup_buffer("d", ir.f16, 16)
    k.read_write("e", ir.bool_, 3)
    k.buffer("f", ir.f64, "read")
    p = k.build()
    assert p.buffers == (
        Buffer("a", 0, DType.F32, Access.READ, None),
        Buffer("b", 1, DType.U32, Access.OUTPUT, 8),
        Buffer("c", 2, DType.I32, Access.UNIFORM, 1),
        Buffer("d", 3, DType.F16, Access.WORKGROUP, 16),
        Buffer("e", 4, DType.BOOL, Access.READ_WRITE, 3),
        Buffer("f", 5, DType.F64, Access.READ, None),
    )
    assert [b.name for b in p.inputs] == ["a", "c", "e", "f"]
    assert [b.name for b in p.outputs] == ["b", "e"]


def test_explicit_binding_is_kept():
    k = ir.Kernel()
    k.buffer("a", ir.u32, "read", binding=7)
    k.buffer("b", ir.u32, "read")
    assert [b.binding for b in k.build().buffers] == [7, 1]


def test_loads_stores_and_lengths_build_their_nodes():
    k = ir.Kernel()
    src = k.read("src", ir.f32)
    out = k.output("out", ir.f32, 4)
    assert src[2].node == Load("src", Lit(DType.U32, 2))
    assert src[2].dtype is DType.F32
    assert src.len.node == BufLen("src")
    assert src.len.dtype is DType.U32
    out[ir.global_id()] = 1  # the int takes the buffer's type
    assert k.build().body == (Store("out", GID, Lit(DType.F32, F32_ONE)),)


def test_let_assign_if_else_loop_block_return_barrier_nest_as_written():
    k = ir.Kernel(workgroup=(4, 2))
    out = k.output("out", ir.u32, 8)
    x = k.let("x", 0)
    with k.if_(ir.local_id() < 2):
        k.assign(x, 5)
    with k.else_():
        with k.loop("i", 0, 3) as i:
            k.assign(x, x + i)
        k.ret()
    with k.block():
        k.barrier()
        out[0] = x
    p = k.build(validate=False)  # (the barrier after a non-uniform return is V016)
    assert p.workgroup == (4, 2, 1)
    assert p.body == (
        Let("x", Lit(DType.U32, 0)),
        If(Binary(BinOp.LT, LID, Lit(DType.U32, 2)),
           (Assign("x", Lit(DType.U32, 5)),),
           (Loop("i", Lit(DType.U32, 0), Lit(DType.U32, 3),
                 (Assign("x", Binary(BinOp.ADD, Var("x"), Var("i"))),)),
            Return())),
        Block((Barrier(), Store("out", Lit(DType.U32, 0), Var("x")))),
    )


def test_let_with_dtype_types_the_literal():
    k = ir.Kernel()
    v = k.let("h", 1, ir.f16)
    assert v.dtype is DType.F16
    assert k.build().body == (Let("h", Lit(DType.F16, 0x3C00)),)


def test_atomic_helpers_emit_a_let_of_the_atomic_and_return_its_variable():
    k = ir.Kernel()
    acc = k.read_write("acc", ir.i32, 4)
    old = acc.atomic_add(1, -2)
    acc.atomic_max(0, old, name="m")
    acc.atomic("compare_exchange", 2, 7, comparand=3, name="c")
    assert old.node == Var("_atomic1")
    assert old.dtype is DType.I32
    assert k.build().body == (
        Let("_atomic1", Atomic(AtomicOp.ADD, "acc", Lit(DType.U32, 1),
                               Lit(DType.I32, 0xFFFFFFFE))),
        Let("m", Atomic(AtomicOp.MAX, "acc", Lit(DType.U32, 0), Var("_atomic1"))),
        Let("c", Atomic(AtomicOp.COMPARE_EXCHANGE, "acc", Lit(DType.U32, 2),
                        Lit(DType.I32, 7), Lit(DType.I32, 3))),
    )


def test_else_without_a_preceding_if_raises_with_fix():
    k = ir.Kernel()
    with pytest.raises(SyntaxError, match="Fix:"), k.else_():
        pass


def test_else_after_a_non_if_statement_raises():
    k = ir.Kernel()
    k.barrier()
    with pytest.raises(SyntaxError, match="Fix:"), k.else_():
        pass


def test_second_else_on_the_same_if_raises():
    k = ir.Kernel()
    with k.if_(ir.lit(True)):
        k.barrier()
    with k.else_():
        k.barrier()
    with pytest.raises(SyntaxError, match="Fix:"), k.else_():
        pass


def test_assign_to_a_non_variable_raises_with_fix():
    k = ir.Kernel()
    with pytest.raises(TypeError, match="Fix:"):
        k.assign(u32_val(), 1)


def test_build_inside_an_open_block_raises():
    k = ir.Kernel()
    with pytest.raises(RuntimeError), k.if_(ir.lit(True)):
        k.build()


def test_build_raises_validation_error_for_an_invalid_program():
    k = ir.Kernel()
    src = k.read("src", ir.u32)
    src[0] = 1                                   # V006: store into a read buffer
    k.let("f", ir.f32(1.0) + ir.u32(1))          # V007: mixed types
    with pytest.raises(ValidationError) as info:
        k.build()
    assert [f["code"] for f in info.value.findings] == ["V006", "V007"]
    assert "Fix: " + ir.CODES["V006"] in str(info.value)


def test_build_without_validation_returns_the_invalid_program():
    k = ir.Kernel()
    k.read("src", ir.u32)[0] = 1
    p = k.build(validate=False)
    assert [f.code for f in p.validate()] == ["V006"]


def test_built_program_is_immutable_and_compares_by_content():
    def make():
        k = ir.Kernel()
        k.output("o", ir.u32, 2)[ir.global_id()] = 3
        return k.build()
    a, b = make(), make()
    assert a == b
    assert hash(a) == hash(b)
    with pytest.raises(AttributeError):
        a.workgroup = (1, 1, 1)


# -- requirements ----------------------------------------------------------------------------

def test_requirements_of_saxpy():
    r = saxpy(1000).requirements()
    assert r.ops == frozenset({
        "stmt.let", "id.global", "stmt.if", "binop.lt", "expr.var", "expr.buffer_len",
        "stmt.store", "binop.add", "binop.mul", "expr.load", "expr.literal"})
    assert r.dtypes == frozenset({DType.F32, DType.U32})
    assert r.features == frozenset()
    assert r.workgroup_size == (256, 1, 1)
    assert r.invocations_per_workgroup == 256
    assert r.largest_buffer_bytes == 4000
    assert r.workgroup_memory_bytes == 0
    assert r.loop_trip_bound == 0


def _reduction() -> Program:
    k = ir.Kernel(workgroup=(8, 4))
    src = k.read("src", ir.u32)
    total = k.read_write("total", ir.u32, count=1)
    scratch = k.workgroup_buffer("scratch", ir.u32, 32)
    k.workgroup_buffer("hist", ir.i32, 16)
    lid = k.let("lid", ir.local_id(0) + ir.local_id(1) * 8)
    scratch[lid] = src[ir.global_id(0)]
    k.barrier()
    with k.loop("s", 0, 5):
        k.barrier()
    with k.loop("t", 10, 3):
        pass
    with k.if_(lid == 0):
        total.atomic_add(0, scratch[0])
    return k.build()


def test_requirements_of_a_workgroup_reduction():
    r = _reduction().requirements()
    assert r.ops == frozenset({
        "stmt.let", "binop.add", "binop.mul", "id.local", "expr.literal", "stmt.store",
        "expr.var", "expr.load", "id.global", "stmt.barrier", "stmt.loop", "stmt.if",
        "binop.eq", "atomic.add"})
    assert r.dtypes == frozenset({DType.U32, DType.I32})
    assert r.features == frozenset({"atomics", "barriers", "workgroup_memory"})
    assert r.workgroup_size == (8, 4, 1)
    assert r.invocations_per_workgroup == 32
    assert r.largest_buffer_bytes == 4             # only storage buffers count, not scratch
    assert r.workgroup_memory_bytes == 128 + 64    # scratch + hist (16 x i32)
    assert r.loop_trip_bound == 5                  # [0, 5); [10, 3) runs 0 times


def test_requirements_of_f16_f64_and_bool_buffers():
    k = ir.Kernel(workgroup=(2, 3, 4))
    h = k.read("h", ir.f16, count=10)
    d = k.output("d", ir.f64, count=3)
    flags = k.output("flags", ir.bool_, count=7)
    d[0] = h[0].cast(ir.f64)
    flags[0] = h[1] < h[2]
    r = k.build().requirements()
    assert r.ops == frozenset({"stmt.store", "expr.literal", "expr.cast", "expr.load",
                               "binop.lt"})
    assert r.dtypes == frozenset({DType.F16, DType.F64, DType.BOOL, DType.U32})
    assert r.features == frozenset({"f16", "f64"})
    assert r.workgroup_size == (2, 3, 4)
    assert r.invocations_per_workgroup == 24
    assert r.largest_buffer_bytes == 28            # 7 bools stored as u32 words
    assert r.workgroup_memory_bytes == 0
    assert r.loop_trip_bound == 0


def test_f16_feature_comes_from_a_cast_or_literal_too():
    k = ir.Kernel()
    out = k.output("out", ir.u32, 1)
    out[0] = k.let("h", ir.u32(3).cast(ir.f16)).cast(ir.u32)
    assert k.build().requirements().features == frozenset({"f16"})
    k = ir.Kernel()
    k.let("d", ir.f64(1.0))
    r = k.build().requirements()
    assert r.features == frozenset({"f64"})
    assert r.dtypes == frozenset({DType.F64})


def test_loop_trip_bound_is_the_largest_literal_trip_count():
    k = ir.Kernel()
    with k.loop("i", 2, 7):
        pass
    with k.loop("j", 0, 3):
        pass
    assert k.build().requirements().loop_trip_bound == 5


def test_loop_trip_bound_is_none_when_any_bound_is_not_a_literal():
    k = ir.Kernel()
    buf = k.read("buf", ir.u32)
    with k.loop("i", 0, 4):
        pass
    with k.loop("j", 0, buf.len):
        pass
    assert k.build().requirements().loop_trip_bound is None
    k = ir.Kernel()
    with k.loop("i", ir.u32(1) + 1, 4):  # a constant expression is still not a literal
        pass
    assert k.build().requirements().loop_trip_bound is None


def test_requirements_of_an_empty_program():
    r = Program((), (1,), ()).requirements()
    assert (r.ops, r.dtypes, r.features) == (frozenset(), frozenset(), frozenset())
    assert (r.workgroup_size, r.invocations_per_workgroup) == ((1, 1, 1), 1)
    assert (r.largest_buffer_bytes, r.workgroup_memory_bytes, r.loop_trip_bound) == (0, 0, 0)


def test_a_program_using_every_node_requires_exactly_all_ops():
    r = every_node_program().requirements()
    assert r.ops == ALL_OPS
    assert r.dtypes == frozenset(DType)
    assert r.features == frozenset({"atomics", "barriers", "workgroup_memory", "f16", "f64",
                                     "subgroups"})
    assert r.subgroup_size == 8


# -- numpy scalars ---------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "dtype"), [
    (np.uint32(5), DType.U32), (np.int64(5), DType.U32), (np.int32(-3), DType.I32),
    (np.bool_(True), DType.BOOL),
], ids=["np.uint32", "np.int64", "np.int32-negative", "np.bool_"])
def test_untyped_numpy_scalar_literal_keeps_its_kind(value, dtype):
    """Values never change type implicitly: a numpy integer is an int (u32, or i32 when
    negative; its own type when it is a vyre dtype) and ``np.bool_`` is bool."""
    v = ir.lit(value)
    assert v.dtype is dtype
    k = ir.Kernel()
    assert k.let("n", value).dtype is dtype


def test_let_with_a_dtype_that_differs_from_its_expression_is_refused():
    k = ir.Kernel(workgroup=(1,))
    x = k.read("x", ir.u32)
    with pytest.raises(TypeError, match=r"let 'a' is declared f32 but its value is u32\. "
                                        r"Fix: convert it, e\.g\. value\.cast\(ir\.f32\)"):
        k.let("a", x[0], ir.f32)
    assert k.let("b", x[0], ir.u32).dtype is ir.u32
    assert k.let("c", 3, ir.f32).dtype is ir.f32  # a Python number takes the dtype


def test_a_number_out_of_the_other_operands_range_says_how_to_fix_it():
    k = ir.Kernel(workgroup=(1,))
    x = k.read("x", ir.u32)
    with pytest.raises(ValueError, match=r"-1 does not fit in u32 .* Fix: .*\.cast\(ir\.i32\)"):
        x[0] + (-1)
