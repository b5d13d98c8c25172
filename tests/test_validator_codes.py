"""Every validator code: a small program that triggers it, how it is reported, and the
uniformity rules for barriers."""

from __future__ import annotations

from collections import OrderedDict

import pytest

from vyre_core import deprecations, ir
from vyre_core.deprecations import Deprecation
from vyre_core.errors import ValidationError
from vyre_core.ir import (
    CODES,
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
    Buffer,
    BufLen,
    Cast,
    Continue,
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
    SpecConstant,
    SpecRef,
    Store,
    Subgroup,
    SubgroupOp,
    Table,
    Unary,
    UnOp,
    Var,
    While,
)
from vyre_core.ir import validate as validate_module

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)

U1 = Lit(DType.U32, 1)
U0 = Lit(DType.U32, 0)
GID = InvocationId(IdKind.GLOBAL, 0)
OUT = Buffer("out", 0, DType.U32, Access.OUTPUT, 64)


def codes(p: Program) -> list[str]:
    return [f.code for f in p.validate()]


def program(*body, buffers=(OUT,), workgroup=(64,), constants=()) -> Program:
    return Program(tuple(buffers), workgroup, tuple(body), tuple(constants))


def constant(name: str, default: int, low: int | None = None, high: int | None = None,
             dtype: DType = DType.U32) -> SpecConstant:
    lit = lambda v: None if v is None else Lit.of(dtype, v)  # noqa: E731
    return SpecConstant(name, lit(default), lit(low), lit(high))


# -- one trigger per code ----------------------------------------------------------------
# Each returns a program whose ONLY findings are of that code.

def v001_duplicate_buffer_name() -> Program:
    k = ir.Kernel()
    k.read("a", ir.u32)
    k.read("a", ir.u32)
    return k.build(validate=False)


def v002_duplicate_binding() -> Program:
    k = ir.Kernel()
    k.buffer("a", ir.u32, "read", binding=3)
    k.buffer("b", ir.u32, "read", binding=3)
    return k.build(validate=False)


def v003_unknown_buffer() -> Program:
    return program(Store("out", U0, Load("missing", U0)))


def v004_undeclared_variable() -> Program:
    return program(Store("out", U0, Var("nowhere")))


def v005_shadowed_loop_variable() -> Program:
    k = ir.Kernel()
    with k.loop("i", 0, 4):
        k.let("i", 7)
    return k.build(validate=False)


def v006_store_into_read_buffer() -> Program:
    k = ir.Kernel()
    src = k.read("src", ir.u32)
    src[0] = 1
    return k.build(validate=False)


def v007_mixed_operand_types() -> Program:
    return program(Let("x", Binary(BinOp.ADD, U1, Lit(DType.F32, 0))))


def v008_store_of_wrong_type() -> Program:
    return program(Store("out", U0, Lit(DType.F32, 0x3F800000)))


def v009_select_condition_not_bool() -> Program:
    return program(Let("x", Select(U1, U0, U1)))


def v010_float_to_bool_cast() -> Program:
    return program(Let("b", Cast(DType.BOOL, Lit(DType.F32, 0x7FC00000))))


def v011_float_index() -> Program:
    return program(Store("out", Lit(DType.F32, 0), U1))


def v012_signed_loop_bound() -> Program:
    return program(Loop("i", U0, Lit(DType.I32, 4), ()))


def v013_zero_workgroup_axis() -> Program:
    return program(workgroup=(64, 0, 1))


def v014_output_without_count() -> Program:
    return program(buffers=(Buffer("out", 0, DType.U32, Access.OUTPUT, None),))


def v015_statement_after_return() -> Program:
    return program(Return(), Store("out", U0, U1))


def v016_barrier_under_local_id_if() -> Program:
    k = ir.Kernel()
    with k.if_(ir.local_id(0) < 4):
        k.barrier()
    return k.build(validate=False)


def v017_atomic_on_float_buffer() -> Program:
    acc = Buffer("acc", 0, DType.F32, Access.READ_WRITE, 1)
    return program(Let("old", Atomic(AtomicOp.ADD, "acc", U0, Lit(DType.F32, 0))),
                   buffers=(acc,))


def v018_atomic_on_read_buffer() -> Program:
    src = Buffer("src", 0, DType.U32, Access.READ, None)
    return program(Let("old", Atomic(AtomicOp.ADD, "src", U0, U1)), buffers=(src,))


def v019_if_condition_not_bool() -> Program:
    return program(If(U1, (), ()))


def v020_assign_to_loop_variable() -> Program:
    return program(Loop("i", U0, Lit(DType.U32, 4), (Assign("i", U0),)))


def v021_bad_variable_name() -> Program:
    return program(Let("not-a-name", U1))


def v022_atomic_inside_store() -> Program:
    return program(Store("out", U0, Atomic(AtomicOp.ADD, "out", U0, U1)))


def v023_literal_bits_out_of_range() -> Program:
    return program(Let("x", Lit(DType.U32, 2**32)))


def v024_binding_out_of_range() -> Program:
    return Program((Buffer("out", 2**32, DType.U32, Access.OUTPUT, 4),), (1,), ())


def v025_too_many_buffers() -> Program:
    return Program(tuple(Buffer(f"b{i}", i, DType.U32, Access.OUTPUT, 4) for i in range(65)),
                   (1,), ())


def v026_block_over_the_wire_limit() -> Program:
    """70,000 statements in one block: the wire form's list limit is 65,536."""
    store = Store("out", Lit(DType.U32, 0), Lit(DType.U32, 1))
    return Program((Buffer("out", 0, DType.U32, Access.OUTPUT, 1),), (1,), (store,) * 70_000)


def v027_undeclared_constant() -> Program:
    return program(Let("x", SpecRef("TILE")), constants=(constant("TILES", 1),))


def v028_constant_declared_twice() -> Program:
    return program(constants=(constant("K", 1), constant("K", 2)))


def v029_op_past_its_removal() -> Program:
    """(With REGISTRY below in force: floor removed.)"""
    return program(Let("x", Unary(UnOp.FLOOR, Lit.of(DType.F32, 2.5))), workgroup=(29,))


def v030_break_outside_a_loop() -> Program:
    return program(If(Lit(DType.BOOL, 1), (Break(),), ()))


def v031_loop_step_of_zero() -> Program:
    return program(Loop("i", U0, U1, (), U0))


def v032_while_bound_of_zero() -> Program:
    return program(While(Lit(DType.BOOL, 1), (), 0))


def v033_shape_that_is_not_the_count() -> Program:
    return program(buffers=(Buffer("out", 0, DType.U32, Access.OUTPUT, 64, (8, 9)),))


GID_VALUE = Subgroup(SubgroupOp.ADD, 8, GID)


def v034_subgroup_size_not_a_power_of_two() -> Program:
    return program(Let("s", Subgroup(SubgroupOp.ADD, 6, GID)), workgroup=(6,))


def v035_subgroup_op_under_a_non_uniform_if() -> Program:
    return program(If(Binary(BinOp.LT, GID, U1), (Let("s", GID_VALUE),), ()))


def v036_loop_variable_used_after_its_loop() -> Program:
    return program(Loop("j", U0, U1, ()), Store("out", Var("j"), U1))


def v037_bitcast_between_two_widths() -> Program:
    return program(Let("b", Bitcast(DType.U16, Lit(DType.F32, 0))))


def v038_table_of_no_values() -> Program:
    return program(Let("t", Table(DType.F32, (), U0)))


#: Deprecations in force while a trigger is validated (none in vyre reaches removal).
REGISTRY = {"V029": (Deprecation("op", "unop.floor", "0.0.1", "0.1.0", "Use trunc."),)}

TRIGGERS = {
    "V001": v001_duplicate_buffer_name,
    "V002": v002_duplicate_binding,
    "V003": v003_unknown_buffer,
    "V004": v004_undeclared_variable,
    "V005": v005_shadowed_loop_variable,
    "V006": v006_store_into_read_buffer,
    "V007": v007_mixed_operand_types,
    "V008": v008_store_of_wrong_type,
    "V009": v009_select_condition_not_bool,
    "V010": v010_float_to_bool_cast,
    "V011": v011_float_index,
    "V012": v012_signed_loop_bound,
    "V013": v013_zero_workgroup_axis,
    "V014": v014_output_without_count,
    "V015": v015_statement_after_return,
    "V016": v016_barrier_under_local_id_if,
    "V017": v017_atomic_on_float_buffer,
    "V018": v018_atomic_on_read_buffer,
    "V019": v019_if_condition_not_bool,
    "V020": v020_assign_to_loop_variable,
    "V021": v021_bad_variable_name,
    "V022": v022_atomic_inside_store,
    "V023": v023_literal_bits_out_of_range,
    "V024": v024_binding_out_of_range,
    "V025": v025_too_many_buffers,
    "V026": v026_block_over_the_wire_limit,
    "V027": v027_undeclared_constant,
    "V028": v028_constant_declared_twice,
    "V029": v029_op_past_its_removal,
    "V030": v030_break_outside_a_loop,
    "V031": v031_loop_step_of_zero,
    "V032": v032_while_bound_of_zero,
    "V033": v033_shape_that_is_not_the_count,
    "V034": v034_subgroup_size_not_a_power_of_two,
    "V035": v035_subgroup_op_under_a_non_uniform_if,
    "V036": v036_loop_variable_used_after_its_loop,
    "V037": v037_bitcast_between_two_widths,
    "V038": v038_table_of_no_values,
}

# More triggers, reported with the same code (different rules under one code).
MORE_TRIGGERS = {
    "V027-no-constants-at-all": ("V027", lambda: program(Let("x", SpecRef("K")))),
    "V028-default-below-low": ("V028", lambda: program(constants=(constant("K", 1, 2, 8),))),
    "V028-default-above-high": ("V028", lambda: program(constants=(constant("K", 9, 2, 8),))),
    "V028-low-above-high": ("V028", lambda: program(constants=(constant("K", 5, 8, 2),))),
    "V028-nan-default-in-a-range": ("V028", lambda: program(constants=(
        constant("F", float("nan"), 0.0, 1.0, DType.F32),))),
    "V028-mixed-types": ("V028", lambda: program(constants=(
        SpecConstant("K", Lit.of(DType.U32, 1), Lit.of(DType.I32, 0)),))),
    "V021-constant-name": ("V021", lambda: program(constants=(constant("no-name", 1),))),
    "V023-constant-bits": ("V023", lambda: program(constants=(
        SpecConstant("K", Lit(DType.U32, 2**32)),))),
    "V003-store": ("V003", lambda: program(Store("missing", U0, U1))),
    "V003-buffer-len": ("V003", lambda: program(Let("n", BufLen("missing")))),
    "V003-atomic": ("V003", lambda: program(Let("a", Atomic(AtomicOp.ADD, "nope", U0, U1)))),
    "V004-assign": ("V004", lambda: program(Assign("nowhere", U1))),
    "V004-let-uses-itself": ("V004", lambda: program(Let("x", Var("x")))),
    "V004-out-of-scope": ("V004", lambda: program(Block((Let("x", U1),)),
                                                  Store("out", U0, Var("x")))),
    "V037-bool-to-u32": ("V037", lambda: program(Let("b", Bitcast(DType.U32, Lit(DType.BOOL, 1))))),
    "V037-u8-to-bool": ("V037", lambda: program(Let("b", Bitcast(DType.BOOL, Lit(DType.U8, 1))))),
    "V037-f64-to-u32": ("V037", lambda: program(Let("b", Bitcast(DType.U32, Lit(DType.F64, 0))))),
    "V038-bool": ("V038", lambda: program(Let("t", Table(DType.BOOL, (1,), U0)))),
    "V038-too-many": ("V038", lambda: program(Let("t", Table(DType.U8, (0,) * 1025, U0)))),
    "V038-bits-past-the-width": ("V038", lambda: program(Let("t", Table(DType.U8, (256,), U0)))),
    "V038-signed-index": ("V038", lambda: program(Let("t", Table(DType.U32, (1,),
                                                                 Lit(DType.I32, 0))))),
    "V036-loop-var-after-loop": ("V036", lambda: program(Loop("i", U0, U1, ()),
                                                         Store("out", U0, Var("i")))),
    "V005-let-twice": ("V005", lambda: program(Let("x", U1), Let("x", U0))),
    "V005-inner-block": ("V005", lambda: program(Let("x", U1), Block((Let("x", U0),)))),
    "V006-uniform": ("V006", lambda: program(
        Store("u", U0, U1), buffers=(Buffer("u", 0, DType.U32, Access.UNIFORM, 1),))),
    "V007-shift-by-i32": ("V007", lambda: program(
        Let("x", Binary(BinOp.SHL, U1, Lit(DType.I32, 1))))),
    "V007-lt-on-bool": ("V007", lambda: program(
        Let("x", Binary(BinOp.LT, Lit(DType.BOOL, 1), Lit(DType.BOOL, 0))))),
    "V007-and-on-float": ("V007", lambda: program(
        Let("x", Binary(BinOp.AND, Lit(DType.F32, 0), Lit(DType.F32, 0))))),
    "V007-logical-and-on-u32": ("V007", lambda: program(
        Let("x", Binary(BinOp.LOGICAL_AND, U1, U1)))),
    "V008-assign": ("V008", lambda: program(Let("x", U1), Assign("x", Lit(DType.I32, 1)))),
    "V009-branch-types": ("V009", lambda: program(
        Let("x", Select(Lit(DType.BOOL, 1), U1, Lit(DType.I32, 1))))),
    "V010-sqrt-u32": ("V010", lambda: program(Let("x", Unary(UnOp.SQRT, U1)))),
    "V010-neg-u32": ("V010", lambda: program(Let("x", Unary(UnOp.NEG, U1)))),
    "V010-not-u32": ("V010", lambda: program(Let("x", Unary(UnOp.NOT, U1)))),
    "V010-popcount-f32": ("V010", lambda: program(
        Let("x", Unary(UnOp.POPCOUNT, Lit(DType.F32, 0))))),
    "V010-fma-u32": ("V010", lambda: program(Let("x", Fma(U1, U1, U1)))),
    "V010-f16-to-bool": ("V010", lambda: program(Let("b", Cast(DType.BOOL, Lit(DType.F16, 0))))),
    "V011-i32-index": ("V011", lambda: program(Let("x", Load("out", Lit(DType.I32, 0))))),
    "V012-f32-start": ("V012", lambda: program(Loop("i", Lit(DType.F32, 0), U1, ()))),
    "V014-zero-count": ("V014", lambda: program(
        buffers=(Buffer("r", 0, DType.U32, Access.READ, 0),))),
    "V014-uniform": ("V014", lambda: program(
        buffers=(Buffer("u", 0, DType.U32, Access.UNIFORM, None),))),
    "V014-workgroup": ("V014", lambda: program(
        buffers=(Buffer("w", 0, DType.U32, Access.WORKGROUP, None),))),
    "V015-in-if": ("V015", lambda: program(If(Lit(DType.BOOL, 1), (Return(), Barrier()), ()))),
    "V017-cmpxchg-without-comparand": ("V017", lambda: program(
        Let("a", Atomic(AtomicOp.COMPARE_EXCHANGE, "out", U0, U1)))),
    "V017-comparand-on-add": ("V017", lambda: program(
        Let("a", Atomic(AtomicOp.ADD, "out", U0, U1, U1)))),
    "V017-value-type": ("V017", lambda: program(
        Let("a", Atomic(AtomicOp.MAX, "out", U0, Lit(DType.I32, 1))))),
    "V018-uniform": ("V018", lambda: program(
        Let("a", Atomic(AtomicOp.OR, "u", U0, U1)),
        buffers=(Buffer("u", 0, DType.U32, Access.UNIFORM, 1),))),
    "V019-f32": ("V019", lambda: program(If(Lit(DType.F32, 0), (), ()))),
    "V019-while-u32": ("V019", lambda: program(While(U1, (), 4))),
    "V015-after-break": ("V015", lambda: program(Loop("i", U0, U1, (Break(), Barrier())))),
    "V015-after-continue": ("V015", lambda: program(
        While(Lit(DType.BOOL, 1), (Continue(), Store("out", U0, U1)), 2))),
    "V030-continue-at-top": ("V030", lambda: program(Continue())),
    "V030-in-a-block-after-a-loop": ("V030", lambda: program(
        Loop("i", U0, U1, ()), Block((Break(),)))),
    "V031-i32-step": ("V031", lambda: program(Loop("i", U0, U1, (), Lit(DType.I32, 1)))),
    "V031-run-time-step": ("V031", lambda: program(Let("s", U1), Loop("i", U0, U1, (), Var("s")))),
    "V031-constant-without-a-low-bound": ("V031", lambda: program(
        Loop("i", U0, U1, (), SpecRef("K")), constants=(constant("K", 2),))),
    "V031-constant-that-may-be-0": ("V031", lambda: program(
        Loop("i", U0, U1, (), SpecRef("K")), constants=(constant("K", 2, 0, 4),))),
    "V034-two-sizes": ("V034", lambda: program(
        Let("a", GID_VALUE), Let("b", Subgroup(SubgroupOp.ADD, 4, GID)))),
    "V034-not-dividing-the-workgroup": ("V034", lambda: program(
        Let("a", GID_VALUE), workgroup=(12,))),
    "V034-over-128": ("V034", lambda: program(
        Let("a", Subgroup(SubgroupOp.ADD, 256, GID)), workgroup=(256,))),
    "V034-ballot-over-32-lanes": ("V034", lambda: program(
        Let("a", Subgroup(SubgroupOp.BALLOT, 64, Lit(DType.BOOL, 1))))),
    "V035-after-a-non-uniform-return": ("V035", lambda: program(
        If(Binary(BinOp.LT, GID, U1), (Return(),), ()), Let("s", GID_VALUE))),
    "V035-in-a-loop-of-per-invocation-bounds": ("V035", lambda: program(
        Loop("i", U0, GID, (Let("s", GID_VALUE),)))),
    "V035-in-a-loop-some-invocations-leave": ("V035", lambda: program(
        Loop("i", U0, U1, (If(Binary(BinOp.LT, GID, U1), (Break(),), ()),
                           Let("s", GID_VALUE))))),
    "V035-in-a-while-condition": ("V035", lambda: program(
        While(Binary(BinOp.EQ, GID_VALUE, U0), (), 4))),
    "V035-broadcast-from-a-per-invocation-lane": ("V035", lambda: program(
        Let("s", Subgroup(SubgroupOp.BROADCAST, 8, GID, GID)))),
    "V010-subgroup-add-of-f32": ("V010", lambda: program(
        Let("s", Subgroup(SubgroupOp.ADD, 8, Lit(DType.F32, 0))))),
    "V010-subgroup-shuffle-without-a-lane": ("V010", lambda: program(
        Let("s", Subgroup(SubgroupOp.SHUFFLE, 8, GID)))),
    "V010-subgroup-elect-of-a-value": ("V010", lambda: program(
        Let("s", Subgroup(SubgroupOp.ELECT, 8, GID)))),
    "V010-subgroup-ballot-of-u32": ("V010", lambda: program(
        Let("s", Subgroup(SubgroupOp.BALLOT, 8, GID)))),
    "V033-no-count": ("V033", lambda: program(
        buffers=(Buffer("x", 0, DType.U32, Access.READ, None, (4,)),))),
    "V033-four-axes": ("V033", lambda: program(
        buffers=(Buffer("out", 0, DType.U32, Access.OUTPUT, 64, (2, 2, 4, 4)),))),
    "V033-no-axes": ("V033", lambda: program(
        buffers=(Buffer("out", 0, DType.U32, Access.OUTPUT, 64, ()),))),
    "V033-zero-axis": ("V033", lambda: program(
        buffers=(Buffer("out", 0, DType.U32, Access.OUTPUT, 64, (0, 64)),))),
    "V033-a-list": ("V033", lambda: program(
        buffers=(Buffer("out", 0, DType.U32, Access.OUTPUT, 64, [8, 8]),))),
    "V032-over-u32": ("V032", lambda: program(While(Lit(DType.BOOL, 1), (), 2**32))),
    "V032-not-an-int": ("V032", lambda: program(While(Lit(DType.BOOL, 1), (), 2.0))),
    "V021-buffer-name": ("V021", lambda: program(
        buffers=(Buffer("9lives", 0, DType.U32, Access.READ, None),))),
    "V021-65-chars": ("V021", lambda: program(Let("x" * 65, U1))),
    "V021-loop-var": ("V021", lambda: program(Loop("i j", U0, U1, ()))),
    "V022-in-let-expression": ("V022", lambda: program(
        Let("x", Binary(BinOp.ADD, Atomic(AtomicOp.ADD, "out", U0, U1), U1)))),
    "V022-if-condition": ("V022", lambda: program(
        If(Binary(BinOp.EQ, Atomic(AtomicOp.ADD, "out", U0, U1), U0), (), ()))),
    "V022-assign": ("V022", lambda: program(Let("x", U0),
                                            Assign("x", Atomic(AtomicOp.ADD, "out", U0, U1)))),
    "V022-atomic-index": ("V022", lambda: program(
        Let("x", Atomic(AtomicOp.ADD, "out", Atomic(AtomicOp.ADD, "out", U0, U1), U1)))),
    "V023-axis-3": ("V023", lambda: program(Let("x", InvocationId(IdKind.LOCAL, 3)))),
    "V023-bool-bits-2": ("V023", lambda: program(Let("x", Lit(DType.BOOL, 2)))),
    "V023-negative-bits": ("V023", lambda: program(Let("x", Lit(DType.I32, -1)))),
    "V023-f16-bits": ("V023", lambda: program(Let("x", Lit(DType.F16, 2**16)))),
}


@pytest.mark.parametrize("code", sorted(CODES))
def test_every_validator_code_has_a_trigger_program(code):
    assert code in TRIGGERS, f"{code} has no test program: add one to TRIGGERS"


def test_codes_are_numbered_densely_from_v001_each_with_a_fix():
    assert list(CODES) == [f"V{i:03d}" for i in range(1, len(CODES) + 1)]
    assert all(fix.strip() for fix in CODES.values())


@pytest.fixture
def registry_for_code(request, monkeypatch):
    """The deprecations ``REGISTRY`` names for the test's code, and an empty validation
    cache (a verdict depends on them)."""
    code = request.getfixturevalue("code")
    if code in REGISTRY:
        monkeypatch.setattr(deprecations, "DEPRECATIONS", REGISTRY[code])
        monkeypatch.setattr(validate_module, "_CACHE", OrderedDict())


def _assert_reported(code: str, p: Program, only: bool = True) -> None:
    found = codes(p)
    assert code in found
    if only:
        assert set(found) == {code}, found
    with pytest.raises(ValidationError) as info:
        p.check()
    message = str(info.value)
    assert f"{code}: " in message
    assert f"Fix: {CODES[code]}" in message
    assert code in [f["code"] for f in info.value.findings]
    assert all(f["fix"] == CODES[f["code"]] for f in info.value.findings)


@pytest.mark.parametrize("code", sorted(TRIGGERS))
@pytest.mark.usefixtures("registry_for_code")
def test_trigger_program_reports_its_code_with_the_fix_text(code):
    _assert_reported(code, TRIGGERS[code]())


@pytest.mark.parametrize("case", sorted(MORE_TRIGGERS))
def test_more_trigger_programs_report_their_code(case):
    code, make = MORE_TRIGGERS[case]
    _assert_reported(code, make())


def test_finding_message_reads_code_cause_location_and_fix():
    (finding,) = v019_if_condition_not_bool().validate()
    assert finding.code == "V019"
    assert finding.where == "body[0]"
    assert finding.message == (f"V019: if condition has type u32, not bool (at body[0]). "
                               f"Fix: {CODES['V019']}")
    assert finding.to_dict() == {"code": "V019", "cause": "if condition has type u32, not bool",
                                 "where": "body[0]", "fix": CODES["V019"]}


def test_kernel_build_raises_validation_error_naming_the_code():
    k = ir.Kernel()
    k.read("a", ir.u32)
    k.read("a", ir.u32)
    with pytest.raises(ValidationError, match="V001: "):
        k.build()


# -- reporting ------------------------------------------------------------------------------

def test_three_different_errors_are_reported_together():
    p = program(
        Store("missing", U0, U1),                                 # V003
        Let("x", Binary(BinOp.ADD, U1, Lit(DType.F32, 0))),       # V007
        If(U1, (), ()),                                           # V019
        workgroup=(0,),                                           # V013
    )
    assert sorted(codes(p)) == ["V003", "V007", "V013", "V019"]
    with pytest.raises(ValidationError) as info:
        p.check()
    message = str(info.value)
    for code in ("V003", "V007", "V013", "V019"):
        assert f"{code}: " in message
        assert f"Fix: {CODES[code]}" in message
    assert "4 validation finding(s)" in message
    assert [f["code"] for f in info.value.findings] == codes(p)


def test_findings_are_in_program_order_with_locations():
    p = program(Let("x", Var("a")), If(Lit(DType.BOOL, 1), (Let("y", Var("b")),), ()))
    found = p.validate()
    assert [(f.code, f.where) for f in found] == [("V004", "body[0]"),
                                                  ("V004", "body[1].then[0]")]


def _valid_program() -> Program:
    k = ir.Kernel(workgroup=(16, 2))
    src = k.read("src", ir.f32)
    total = k.read_write("total", ir.i32, count=1)
    scratch = k.workgroup_buffer("scratch", ir.f32, 32)
    out = k.output("out", ir.f32, count=64)
    lid = k.let("lid", ir.local_id(0) + ir.local_id(1) * 16)
    gid = k.let("gid", ir.global_id(0))
    with k.if_(gid < src.len):
        scratch[lid] = ir.sqrt(abs(src[gid]))
    k.barrier()
    with k.loop("i", 0, 4):
        k.barrier()
        acc = k.let("acc", ir.f32(0.0))
        with k.loop("j", 0, lid):
            k.assign(acc, ir.fma(acc, 2.0, scratch[ir.global_id(1)]))
        out[gid] = ir.select(acc != acc, 0.0, acc)
    with k.if_(ir.workgroup_id(0) == 0):
        k.barrier()
    total.atomic_add(0, ir.cast(lid, ir.i32))
    total.atomic("compare_exchange", 0, 5, comparand=-1)
    return k.build(validate=False)


def test_valid_program_has_no_findings_and_check_returns_it():
    p = _valid_program()
    assert p.validate() == []
    assert p.check() is p


def test_validation_result_is_cached_by_fingerprint(monkeypatch):
    p = v019_if_condition_not_bool()
    first = p.validate()
    key = p.fingerprint()
    assert key in validate_module._CACHE
    assert list(validate_module._CACHE[key]) == first

    class Exploding:
        def __init__(self, *_):
            raise AssertionError("validator re-ran instead of using the cache")

    monkeypatch.setattr(validate_module, "_Validator", Exploding)
    again = v019_if_condition_not_bool()  # a different but equal Program object
    assert again is not p
    assert again.validate() == first
    assert p.validate() == first


def test_returned_findings_list_is_a_copy_of_the_cache():
    p = v015_statement_after_return()
    found = p.validate()
    found.clear()
    assert codes(p) == ["V015"]


# -- barriers and uniformity ------------------------------------------------------------

class _K:
    """A kernel with a uniform buffer ``params`` and a read buffer ``data``."""

    def __init__(self) -> None:
        self.k = ir.Kernel(workgroup=(8,))
        self.out = self.k.output("out", ir.u32, 8)
        self.params = self.k.uniform("params", ir.u32, 4)
        self.data = self.k.read("data", ir.u32)


def _barrier_kernel(build) -> Program:
    kk = _K()
    build(kk)
    return kk.k.build(validate=False)


def _if_barrier(cond_of):
    def build(kk):
        with kk.k.if_(cond_of(kk)):
            kk.k.barrier()
    return build


def _let_then_if(kk, value):
    v = kk.k.let("v", value)
    with kk.k.if_(v < 4):
        kk.k.barrier()


def _reassigned_then_if(kk):
    v = kk.k.let("v", ir.workgroup_id(0))
    kk.k.assign(v, ir.local_id(0))
    with kk.k.if_(v < 4):
        kk.k.barrier()


def _else_barrier(kk, cond):
    with kk.k.if_(cond):
        kk.out[0] = 1
    with kk.k.else_():
        kk.k.barrier()


def _nested_barrier(kk):
    k = kk.k
    with k.if_(ir.local_id(0) < 4), k.block(), k.if_(ir.workgroup_id(0) < 2):
        k.barrier()


def _loop_barrier(kk, start, end):
    with kk.k.loop("i", start, end):
        kk.k.barrier()


def _loop_if_barrier(kk):
    with kk.k.loop("i", 0, 4) as i, kk.k.if_(i == 2):
        kk.k.barrier()


def _uniform_return_then_barrier(kk):
    with kk.k.if_(ir.workgroup_id(0) > 3):
        kk.k.ret()
    kk.k.barrier()


def _barrier_then_return(kk):
    kk.k.barrier()
    with kk.k.if_(ir.local_id(0) > 3):
        kk.k.ret()


def _return_then_barrier(kk):
    with kk.k.if_(ir.local_id(0) > 3):
        kk.k.ret()
    kk.k.barrier()


def _loop_barrier_early_return(kk):
    with kk.k.loop("i", 0, 4) as i:
        kk.k.barrier()
        with kk.k.if_(ir.local_id(0) == i):
            kk.k.ret()


def _loop_in_if(kk):
    with kk.k.if_(ir.global_id(0) < 4), kk.k.loop("i", 0, 4):
        kk.k.barrier()


def _while_barrier(cond):
    def build(kk):
        with kk.k.while_(cond(kk), max_trips=8):
            kk.k.barrier()
    return build


def _loop_barrier_then_break(kk):
    """A break every invocation takes (not under an if): the loop stays uniform."""
    with kk.k.loop("i", 0, 4, step=2):
        kk.k.barrier()
        kk.k.break_()


def _loop_barrier_branching(jump: str, cond):
    def build(kk):
        with kk.k.loop("i", 0, 4) as i:
            kk.k.barrier()
            with kk.k.if_(cond(i)):
                getattr(kk.k, jump)()
    return build


def _while_barrier_nested_break(kk):
    """A break under a non-uniform if in a loop nested in the while: that loop's own."""
    with kk.k.while_(kk.params[0] == 1, max_trips=8):
        kk.k.barrier()
        with kk.k.loop("i", 0, 4), kk.k.if_(ir.local_id(0) == 1):
            kk.k.break_()


def _barrier_after_a_loop_with_breaks(kk):
    with kk.k.loop("i", 0, 4), kk.k.if_(ir.local_id(0) == 1):
        kk.k.break_()
    kk.k.barrier()


def _tree_reduction(first, step):
    """The workgroup tree reduction: ``s`` halves each pass of a while on ``s > 0``."""
    def build(kk):
        k = kk.k
        tile = k.workgroup_buffer("tile", ir.u32, 8)
        s = k.let("s", first(kk))
        with k.while_(s > 0, max_trips=8):
            with k.if_(ir.local_id(0) < s):
                tile[ir.local_id(0)] = tile[ir.local_id(0)] + tile[ir.local_id(0) + s]
            k.barrier()
            k.assign(s, step(kk, s))
    return build


def _assigned_then_if(cond, value):
    """``v`` is declared uniform, then assigned ``value`` under an if on ``cond``."""
    def build(kk):
        v = kk.k.let("v", ir.workgroup_id(0) * 0)
        with kk.k.if_(cond(kk)):
            kk.k.assign(v, value(kk, v))
        with kk.k.if_(v < 4):
            kk.k.barrier()
    return build


def _carried_through_two_locals(second):
    """``a`` takes ``b``'s value before ``b`` is assigned ``second`` in the same pass: ``a``
    is as uniform as ``second`` (the rule's fixed point, one name at a time)."""
    def build(kk):
        k = kk.k
        a = k.let("a", ir.workgroup_id(0))
        b = k.let("b", ir.workgroup_id(0))
        with k.loop("i", 0, 4):
            with k.if_(a < 4):
                k.barrier()
            k.assign(a, b)
            k.assign(b, second(kk))
    return build


UNIFORM_BARRIERS = {
    "while-uniform-condition": _while_barrier(lambda kk: kk.params[0] == 1),
    "loop-with-an-unconditional-break": _loop_barrier_then_break,
    "while-with-a-nested-loop's-break": _while_barrier_nested_break,
    "after-a-loop-some-invocations-left": _barrier_after_a_loop_with_breaks,
    "top-level": lambda kk: kk.k.barrier(),
    "if-workgroup-id": _if_barrier(lambda kk: ir.workgroup_id(0) < 4),
    "if-buffer-len": _if_barrier(lambda kk: kk.data.len > 4),
    "if-uniform-load": _if_barrier(lambda kk: kk.params[0] == 1),
    "if-uniform-load-at-uniform-index": _if_barrier(
        lambda kk: kk.params[ir.workgroup_id(2) % 4] == 1),
    "if-literal": _if_barrier(lambda kk: ir.lit(True)),
    "if-uniform-let": lambda kk: _let_then_if(kk, ir.workgroup_id(1) * 2),
    "else-branch-of-uniform-if": lambda kk: _else_barrier(kk, ir.workgroup_id(0) == 0),
    "loop-literal-bounds": lambda kk: _loop_barrier(kk, 0, 16),
    "loop-uniform-bounds": lambda kk: _loop_barrier(kk, ir.workgroup_id(0), kk.params[1]),
    "if-on-uniform-loop-var": _loop_if_barrier,
    "after-uniform-return": _uniform_return_then_barrier,
    "before-non-uniform-return": _barrier_then_return,
    "while-halving-a-uniform-let": _tree_reduction(lambda kk: ir.lit(4, ir.u32),
                                                   lambda kk, s: s // 2),
    "while-shifting-a-let-of-uniform-values": _tree_reduction(
        lambda kk: kk.params[0] + kk.data.len, lambda kk, s: s >> 1),
    "reassigned-from-uniform-values": _assigned_then_if(
        lambda kk: ir.lit(True), lambda kk, v: v * 2 + kk.params[1] + ir.workgroup_id(0)),
    "reassigned-under-uniform-if": _assigned_then_if(
        lambda kk: ir.workgroup_id(0) == 0, lambda kk, v: ir.lit(1, ir.u32)),
    "carried-through-two-uniform-locals": _carried_through_two_locals(
        lambda kk: kk.params[2]),
}

NON_UNIFORM_BARRIERS = {
    "while-local-id-condition": _while_barrier(lambda kk: ir.local_id(0) < 4),
    "loop-with-a-branching-break": _loop_barrier_branching(
        "break_", lambda i: ir.local_id(0) == i),
    "loop-with-a-branching-continue": _loop_barrier_branching(
        "continue_", lambda i: ir.local_id(0) == i),
    "if-local-id": _if_barrier(lambda kk: ir.local_id(0) < 4),
    "if-global-id": _if_barrier(lambda kk: ir.global_id(0) < 4),
    "if-load-from-read-buffer": _if_barrier(lambda kk: kk.data[0] == 1),
    "if-uniform-load-at-local-index": _if_barrier(lambda kk: kk.params[ir.local_id(0)] == 1),
    "if-let-of-local-id": lambda kk: _let_then_if(kk, ir.local_id(0)),
    "if-reassigned-uniform-let": _reassigned_then_if,
    "else-branch-of-non-uniform-if": lambda kk: _else_barrier(kk, ir.local_id(0) == 0),
    "nested-under-non-uniform-if": _nested_barrier,
    "after-non-uniform-return": _return_then_barrier,
    "loop-bound-from-global-id": lambda kk: _loop_barrier(kk, 0, ir.global_id(0)),
    "loop-start-from-local-id": lambda kk: _loop_barrier(kk, ir.local_id(0), 8),
    "loop-with-early-return": _loop_barrier_early_return,
    "uniform-loop-inside-non-uniform-if": _loop_in_if,
    "while-halving-a-let-of-local-id": _tree_reduction(lambda kk: ir.local_id(0),
                                                       lambda kk, s: s // 2),
    "while-carrying-local-id": _tree_reduction(lambda kk: ir.lit(4, ir.u32),
                                               lambda kk, s: s - ir.local_id(0)),
    "reassigned-under-non-uniform-if": _assigned_then_if(
        lambda kk: ir.local_id(0) == 0, lambda kk, v: ir.lit(1, ir.u32)),
    "reassigned-from-a-read-buffer": _assigned_then_if(
        lambda kk: ir.lit(True), lambda kk, v: kk.data[0]),
    "reassigned-from-a-uniform-load-at-local-index": _assigned_then_if(
        lambda kk: ir.lit(True), lambda kk, v: kk.params[ir.local_id(0) % 4]),
    "carried-through-two-locals-from-global-id": _carried_through_two_locals(
        lambda kk: ir.global_id(0)),
}


@pytest.mark.parametrize("case", sorted(UNIFORM_BARRIERS))
def test_barrier_in_uniform_control_flow_is_accepted(case):
    assert codes(_barrier_kernel(UNIFORM_BARRIERS[case])) == []


@pytest.mark.parametrize("case", sorted(NON_UNIFORM_BARRIERS))
def test_barrier_in_non_uniform_control_flow_is_v016(case):
    found = codes(_barrier_kernel(NON_UNIFORM_BARRIERS[case]))
    assert found == ["V016"]


def test_barrier_inside_if_local_id_lt_4_is_v016():
    assert codes(v016_barrier_under_local_id_if()) == ["V016"]


def test_barrier_inside_if_workgroup_id_lt_4_is_fine():
    k = ir.Kernel()
    with k.if_(ir.workgroup_id(0) < 4):
        k.barrier()
    assert codes(k.build(validate=False)) == []


def test_barrier_after_early_return_inside_non_uniform_if_is_v016():
    k = ir.Kernel()
    with k.if_(ir.local_id(0) >= 4):
        k.ret()
    k.barrier()
    found = k.build(validate=False).validate()
    assert [f.code for f in found] == ["V016"]
    assert "return" in found[0].cause


def test_barrier_inside_loop_with_literal_bounds_is_fine():
    k = ir.Kernel()
    with k.loop("i", 0, 8):
        k.barrier()
    assert codes(k.build(validate=False)) == []


def test_barrier_inside_loop_with_bounds_from_global_id_is_v016():
    k = ir.Kernel()
    with k.loop("i", 0, ir.global_id(0)):
        k.barrier()
    assert codes(k.build(validate=False)) == ["V016"]


# -- other rules named in the brief ------------------------------------------------------

def test_atomic_as_store_value_is_v022():
    k = ir.Kernel()
    out = k.output("out", ir.u32, 4)
    out[0] = ir.Val(Atomic(AtomicOp.ADD, "out", U1, U1), ir.u32)
    assert codes(k.build(validate=False)) == ["V022"]


def test_atomic_as_whole_let_initializer_is_fine():
    k = ir.Kernel()
    out = k.output("out", ir.u32, 4)
    old = out.atomic_add(1, 1)
    out[0] = old
    assert codes(k.build(validate=False)) == []


def test_shadowing_a_loop_variable_is_v005():
    assert codes(v005_shadowed_loop_variable()) == ["V005"]


def test_nested_loops_reusing_the_variable_name_is_v005():
    k = ir.Kernel()
    with k.loop("i", 0, 2), k.loop("i", 0, 2):
        pass
    assert codes(k.build(validate=False)) == ["V005"]


def test_sibling_loops_may_reuse_the_variable_name():
    k = ir.Kernel()
    with k.loop("i", 0, 2):
        pass
    with k.loop("i", 0, 2):
        pass
    assert codes(k.build(validate=False)) == []


def test_assigning_a_loop_variable_is_v020():
    k = ir.Kernel()
    with k.loop("i", 0, 4) as i:
        k.assign(i, i + 1)
    assert codes(k.build(validate=False)) == ["V020"]


def test_float_to_bool_cast_is_v010_for_every_float_type():
    for t in (ir.f16, ir.f32, ir.f64):
        assert codes(program(Let("b", Cast(DType.BOOL, Lit(t, 0))))) == ["V010"]


def test_every_other_cast_is_allowed():
    lets = [Let(f"c{i}_{j}", Cast(dst, Lit(src, 0)))
            for i, src in enumerate(DType) for j, dst in enumerate(DType)
            if not (src.is_float and dst is DType.BOOL)]
    assert codes(program(*lets)) == []


# -- regressions -----------------------------------------------------------------------

def test_barrier_before_non_uniform_return_in_nested_loop_of_uniform_loop_is_v016():
    """A return under a loop with non-uniform bounds diverges later iterations just like
    one under an ``if``:

        loop i in [0, 4):          # uniform bounds
            barrier                # iteration 2: only invocations with local_id == 0 get here
            loop j in [0, local_id(0)):
                return

    Invocations with local_id > 0 return during iteration 1, so the barrier of iteration 2
    is reached by only part of the workgroup (deadlock / undefined on GPUs)."""
    k = ir.Kernel()
    with k.loop("i", 0, 4):
        k.barrier()
        with k.loop("j", 0, ir.local_id(0)):
            k.ret()
    assert codes(k.build(validate=False)) == ["V016"]


def test_negative_buffer_count_is_v014():
    """A count must be 1..2**32-1 (a negative one would not survive the wire form)."""
    p = program(buffers=(Buffer("out", 0, DType.U32, Access.OUTPUT, -1),))
    assert codes(p) == ["V014"]


def test_the_documented_code_table_matches_the_validator():
    """docs/validator-codes.md lists every code with exactly the Fix the validator prints."""
    from pathlib import Path

    doc = (Path(__file__).parent.parent / "docs" / "validator-codes.md").read_text()
    rows = [line.split(" | ") for line in doc.splitlines() if line.startswith("| V")]
    assert {r[0].removeprefix("| "): r[2].removesuffix(" |") for r in rows} == CODES
