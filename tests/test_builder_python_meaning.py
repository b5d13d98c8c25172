"""The builder means what Python means (issue 35): ``+=`` on a ``let`` variable assigns
where it is written; a Python name rebound inside a ``with`` body is caught, never an
empty loop; literals that overflow are refused; a numpy scalar keeps its dtype in both
operand orders; ``**``, ``//``, ``buf[i, j]`` work or say why not; every Python
operation that needs a Python value says what to write instead."""

from __future__ import annotations

import math
import operator
import sys
import warnings

import numpy as np
import pytest

from vyre_core import ir
from vyre_core.errors import InvalidConfigError, ValidationError
from vyre_core.ir import Assign, Binary, BinOp, Cast, DType, If, Let, Lit, Load, Loop, Var, While
from vyre_reference import run

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)

ONES = np.ones(4, np.float32)


def kernel() -> tuple[ir.Kernel, ir.BufferRef, ir.BufferRef, ir.Val]:
    k = ir.Kernel(workgroup=(4,))
    x = k.read("x", ir.f32)
    o = k.output("o", ir.f32, count=4)
    return k, x, o, k.let("i", ir.global_id(0))


def refused(error: type[Exception], match: str, call) -> str:
    with pytest.raises(error, match=match) as info:
        call()
    assert "Fix:" in str(info.value)
    return str(info.value)


# -- augmented assignment assigns ------------------------------------------------------------

def test_plus_equals_in_a_loop_accumulates_every_pass():
    """The issue's trap: silently an empty loop, [1, 1, 1, 1] for ones."""
    k, x, o, i = kernel()
    acc = k.let("acc", ir.f32(0))
    with k.loop("j", 0, 4):
        acc += x[i]
    o[i] = acc
    assert run(k.build(), [ONES])[0].tolist() == [4.0] * 4


def test_plus_equals_with_the_loop_variable_reads_it_inside_the_loop():
    """With x[j] in the body the trap was V004 'j is not declared'."""
    k, x, o, i = kernel()
    acc = k.let("acc", ir.f32(0))
    with k.loop("j", 0, 4) as j:
        acc += x[j]
    o[i] = acc
    assert run(k.build(), [np.arange(4, dtype=np.float32)])[0].tolist() == [6.0] * 4


AUGMENTED = [
    (operator.iadd, BinOp.ADD), (operator.isub, BinOp.SUB), (operator.imul, BinOp.MUL),
    (operator.itruediv, BinOp.DIV), (operator.imod, BinOp.REM), (operator.iand, BinOp.AND),
    (operator.ior, BinOp.OR), (operator.ixor, BinOp.XOR), (operator.ilshift, BinOp.SHL),
    (operator.irshift, BinOp.SHR), (operator.ifloordiv, BinOp.DIV),
]


@pytest.mark.parametrize("fn, op", AUGMENTED, ids=lambda v: getattr(v, "__name__", v))
def test_every_augmented_assignment_assigns_the_variable_in_the_current_body(fn, op):
    k = ir.Kernel()
    v = k.let("v", ir.u32(7))
    with k.loop("j", 0, 4):
        same = fn(v, 3)
    assert same.node == v.node and same.var == "let"  # the variable, at its next version
    loop = k._blocks[0][-1]
    assert isinstance(loop, Loop)
    assert loop.body == (Assign("v", Binary(op, Var("v"), Lit.of(DType.U32, 3))),)
    k.build()


def test_power_assignment_multiplies_out():
    k = ir.Kernel()
    v = k.let("v", ir.f32(1.5))
    v **= 2
    assert k._blocks[0][-1] == Assign("v", Binary(BinOp.MUL, Var("v"), Var("v")))


def test_plus_equals_in_both_branches_assigns_in_each():
    k, x, o, i = kernel()
    v = k.let("v", ir.f32(0))
    with k.if_(i < 2):
        v += x[i]
    with k.else_():
        v -= x[i]
    o[i] = v
    assert run(k.build(), [ONES])[0].tolist() == [1.0, 1.0, -1.0, -1.0]


def test_plus_equals_on_an_expression_stays_an_expression():
    """Python's meaning: ``e += 1`` is ``e = e + 1`` when ``e`` is no variable."""
    k, x, _, i = kernel()
    e = x[i]
    before = list(k._blocks[0])
    e += 1
    assert isinstance(e.node, Binary) and k._blocks[0] == before


def test_plus_equals_on_a_loop_variable_is_refused():
    k = ir.Kernel()
    with k.loop("j", 0, 4) as j:
        msg = refused(TypeError, "loop variable 'j' is read-only",
                      lambda: operator.iadd(j, 1))
    assert "k.let" in msg


# -- rebinding a name inside a body is caught --------------------------------------------

def test_rebinding_an_accumulator_in_a_loop_is_refused_at_the_end_of_the_loop():
    k, x, _o, i = kernel()
    acc = k.let("acc", ir.f32(0))
    with pytest.raises(TypeError) as info, k.loop("j", 0, 4):
        acc = acc + x[i]
    msg = str(info.value)
    assert "rebinds the Python name 'acc'" in msg and "loop 'j'" in msg
    assert "test_builder_python_meaning.py:" in msg
    assert "Fix: assign the variable: acc += ..." in msg and "k.assign(acc, ...)" in msg


def test_rebinding_in_a_while_loop_is_refused():
    k, x, o, i = kernel()
    n = k.let("n", ir.u32(0))
    with pytest.raises(TypeError, match="rebinds the Python name 'n'"), k.while_(n < 3, 8):
        n = n + 1
        o[n] = x[i]


def test_a_value_rebound_in_a_branch_is_refused_where_it_is_used_after():
    k, x, o, i = kernel()
    v = k.let("v", ir.f32(0))
    with k.if_(i < 2):
        v = x[i] * 2
    msg = refused(TypeError, "inside the body of an if_", lambda: o.__setitem__(i, v))
    assert "after that body ended" in msg and "k.assign" in msg


def test_a_value_built_in_a_closed_body_is_refused_inside_a_new_expression_too():
    k, x, _o, i = kernel()
    with k.loop("j", 0, 4):
        t = x[i] * 2
    refused(TypeError, "after that body ended", lambda: t + 1)


def test_a_loop_variable_used_after_its_loop_is_refused_at_once():
    k, x, _o, _i = kernel()
    with k.loop("j", 0, 4) as j:
        pass
    msg = refused(TypeError, "loop variable 'j' is used at", lambda: x[j])
    assert "after its loop" in msg and "k.let" in msg


def test_a_variable_declared_in_a_body_is_refused_after_it():
    k, x, o, i = kernel()
    with k.if_(i < 2):
        v = k.let("v", x[i])
    refused(TypeError, "variable 'v', declared", lambda: o.__setitem__(i, v))
    refused(TypeError, "variable 'v', declared", lambda: k.assign(v, 1.0))


def test_values_from_outside_a_body_serve_inside_and_after_it():
    k, x, o, i = kernel()
    scaled = x[i] * 2
    acc = k.let("acc", ir.f32(0))
    with k.loop("j", 0, 4):
        step = scaled + 1   # built and used inside: fine
        acc += step
    o[i] = acc + scaled
    assert run(k.build(), [ONES])[0].tolist() == [14.0] * 4


def test_a_new_name_in_a_loop_reading_a_variable_is_not_a_rebinding():
    k, _x, o, _i = kernel()
    acc = k.let("acc", ir.f32(0))
    with k.loop("j", 0, 4) as j:
        doubled = acc * 2
        o[j] = doubled
        acc += 1
    k.build()


def test_rebinding_a_value_that_is_no_variable_in_a_loop_is_refused():
    """Silently [1, 2, 3, 4] for the prefix sum Python means, [1, 3, 6, 10]."""
    k, x, o, _i = kernel()
    acc = ir.f32(0)
    with pytest.raises(TypeError) as info, k.loop("j", 0, 4) as j:
        acc = acc + x[j]
        o[j] = acc
    msg = str(info.value)
    assert "rebinds the Python name 'acc'" in msg and "its value before the loop" in msg
    assert "Fix: declare it before the loop, acc = k.let('acc', ...)" in msg
    assert "acc += ..." in msg


def test_rebinding_an_expression_of_literals_in_a_while_loop_is_refused():
    k, _x, o, _i = kernel()
    n = k.let("n", ir.u32(0))
    scale = ir.f32(1)
    with pytest.raises(TypeError, match="rebinds the Python name 'scale'"), \
            k.while_(n < 4, 8):
        scale = scale * 2
        o[n] = scale
        n += 1


def test_a_new_name_or_a_name_rebound_to_a_value_from_before_is_no_rebinding():
    k, x, o, i = kernel()
    base = i * 4
    double = x[i] * 2
    v = x[i]
    w = x[i]
    with k.loop("j", 0, 4) as j:
        idx = base + j        # a new name
        o[idx % 4] = x[j]
        v = double            # rebound to a value built before the loop
        w = x[j] * 3          # rebound to an expression that does not read w
        o[j] = w
    with k.if_(i < 2):
        u = double
        u = u * 2             # an if_ body runs once: Python's meaning
        o[i] = u
    o[i] = v
    k.build()


def test_an_expression_built_before_plus_equals_is_refused_after_it():
    """Silently 7 (the kernel reads acc where t is stored), where Python means 5."""
    k = ir.Kernel(workgroup=(1,))
    o = k.output("o", ir.u32, count=2)
    acc = k.let("acc", ir.u32(0))
    t = acc * 2 + 5
    acc += 1
    line = f"test_builder_python_meaning.py:{_line() - 1}"
    msg = refused(TypeError, "reads variable 'acc'", lambda: o.__setitem__(0, t))
    assert f"assigned at {line}" in msg and "Fix: keep the value in a variable" in msg
    for use in (lambda: k.let("u", t), lambda: k.assign(acc, t), lambda: t + 1,
                lambda: k.if_(t > 1).__enter__()):
        refused(TypeError, "reads variable 'acc'", use)


def test_a_name_kept_before_plus_equals_is_refused_after_it():
    """Silently [1, 1], where Python means [0, 1]; k.let keeps the old value."""
    k = ir.Kernel(workgroup=(1,))
    o = k.output("o", ir.u32, count=2)
    acc = k.let("acc", ir.u32(0))
    old = acc
    kept = k.let("kept", acc)
    acc += 1
    refused(TypeError, "reads variable 'acc'", lambda: o.__setitem__(0, old))
    o[0] = kept
    o[1] = acc
    assert run(k.build(), [])[0].tolist() == [0, 1]


def test_k_assign_keeps_the_variable_usable_and_plus_equals_in_a_loop_too():
    k, x, o, i = kernel()
    acc = k.let("acc", ir.f32(0))
    total = k.let("total", ir.f32(0))
    # (the while condition reads a variable its body assigns)
    with k.while_(total < 100, 2), k.loop("j", 0, 4) as j:
        k.assign(acc, acc + x[j])
        total += x[j]
    o[i] = acc + total
    assert run(k.build(), [ONES])[0].tolist() == [16.0] * 4


def _line() -> int:
    return sys._getframe(1).f_lineno


# -- literals -------------------------------------------------------------------------------

@pytest.mark.parametrize("make, value", [(ir.f32, 1e40), (ir.f32, -3.5e38), (ir.f16, 70000.0),
                                         (ir.f16, 65520.0), (ir.f32, 2**200),
                                         (ir.f64, 10**400)])
def test_a_float_literal_that_rounds_to_infinity_is_refused(make, value):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (it was +inf with a numpy RuntimeWarning)
        refused(ValueError, "rounds to infinity", lambda: make(value))


def test_infinity_written_as_such_and_the_largest_finite_values_stay_literals():
    assert ir.f32(float("inf")).node.value == math.inf
    assert ir.f32(-math.inf).node.value == -math.inf
    assert ir.f16(65504.0).node.value == 65504.0
    assert ir.f32(3.4028234663852886e38).node.value == 3.4028234663852886e38


def test_a_float_that_overflows_the_other_operand_is_refused():
    _k, x, _, i = kernel()
    refused(ValueError, "rounds to infinity", lambda: x[i] * 1e40)


def test_a_constant_that_rounds_to_infinity_is_still_a_config_error():
    k = ir.Kernel()
    with pytest.raises(TypeError, match="rounds to infinity"):
        k.constant("C", ir.f32, 1e40)
    k.constant("D", ir.f16, 1.0)
    with pytest.raises(InvalidConfigError, match="rounds to infinity"):
        k.build().specialize(D=1e5)


# -- numpy scalars --------------------------------------------------------------------------

REFLECTED = [operator.add, operator.sub, operator.mul, operator.truediv, operator.mod,
             operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]


@pytest.mark.parametrize("fn", REFLECTED, ids=lambda f: f.__name__)
def test_a_numpy_scalar_keeps_its_dtype_in_both_operand_orders(fn):
    x = ir.Val(Var("x"), ir.f32)
    left, right = fn(np.float64(0.1), x), fn(x, np.float64(0.1))
    lits = [n for n in (left.node.lhs, left.node.rhs, right.node.lhs, right.node.rhs)
            if isinstance(n, Lit)]
    assert [lit.dtype for lit in lits] == [ir.f64, ir.f64]


def test_a_numpy_scalar_on_the_left_of_another_type_is_refused_as_on_the_right():
    """The issue's trap: np.float64(0.1) * x was silently an f32 literal."""
    k, x, o, i = kernel()
    o[i] = np.float64(0.1) * x[i]
    with pytest.raises(ValidationError) as info:
        k.build()
    assert [f["code"] for f in info.value.findings] == ["V007"]


def test_a_numpy_scalar_of_the_operands_type_works_on_either_side():
    k, x, o, i = kernel()
    o[i] = np.float32(2) * x[i] + x[i] * np.float32(1)
    assert run(k.build(), [ONES])[0].tolist() == [3.0] * 4


@pytest.mark.parametrize("fn, op", [(operator.and_, BinOp.AND), (operator.or_, BinOp.OR),
                                    (operator.xor, BinOp.XOR), (operator.lshift, BinOp.SHL),
                                    (operator.rshift, BinOp.SHR)])
def test_integer_numpy_scalars_on_the_left_keep_their_dtype(fn, op):
    v = ir.Val(Var("v"), ir.u32)
    built = fn(np.uint16(3), v)
    assert built.node.op is op and built.node.lhs == Lit.of(ir.u16, 3)


def test_a_python_int_shifted_by_a_value_is_refused_with_the_typed_spelling():
    v = ir.Val(Var("v"), ir.u32)
    refused(TypeError, r"ir\.u32\(1\) << value", lambda: 1 << v)
    refused(TypeError, r"ir\.u32\(8\) >> value", lambda: 8 >> v)


# -- **, // ---------------------------------------------------------------------------------

def test_power_by_a_small_int_multiplies_left_to_right():
    x = ir.Val(Var("x"), ir.f32)
    assert (x ** 0).node == Lit.of(ir.f32, 1.0)
    assert (x ** 1).node == Var("x")
    assert (x ** 3).node == Binary(BinOp.MUL, Binary(BinOp.MUL, Var("x"), Var("x")), Var("x"))
    assert (ir.Val(Var("n"), ir.i32) ** np.int32(2)).dtype is ir.i32


@pytest.mark.parametrize("exponent", [0.5, 2.0, -1, 17, True])
def test_power_by_anything_else_points_to_ir_pow(exponent):
    x = ir.Val(Var("x"), ir.f32)
    refused(TypeError, r"ir\.pow", lambda: x ** exponent)


def test_power_by_a_value_and_of_a_number_point_to_ir_pow():
    x = ir.Val(Var("x"), ir.f32)
    refused(TypeError, r"ir\.pow", lambda: x ** x)
    refused(TypeError, r"ir\.pow", lambda: 2 ** x)


def test_floor_division_of_unsigned_integers_is_the_irs_division():
    i = ir.global_id(0)
    assert (i // 2).node == Binary(BinOp.DIV, i.node, Lit.of(ir.u32, 2))
    assert (7 // i).node == Binary(BinOp.DIV, Lit.of(ir.u32, 7), i.node)
    assert (ir.Val(Var("b"), ir.u8) // 3).dtype is ir.u8


def test_floor_division_of_signed_integers_and_floats_is_refused_with_the_spelling():
    refused(TypeError, "a / b", lambda: ir.Val(Var("s"), ir.i32) // 2)
    refused(TypeError, r"ir\.floor\(a / b\)", lambda: ir.Val(Var("f"), ir.f32) // 2.0)


# -- shaped indexing ------------------------------------------------------------------------

def test_two_axis_index_is_row_major_in_numpy_order():
    k = ir.Kernel()
    m = k.read("m", ir.f32, shape=(3, 5))
    i, j = ir.global_id(1), ir.global_id(0)
    assert m[i, j].node == Load("m", Binary(BinOp.ADD, Binary(BinOp.MUL, i.node,
                                                              Lit.of(ir.u32, 5)), j.node))


def test_three_axis_index_and_store_through_it():
    k = ir.Kernel(workgroup=(1,))
    a = k.read("a", ir.u32, shape=(2, 3, 4))
    out = k.output("out", ir.u32, shape=(2, 3, 4))
    with k.loop("p", 0, 2) as p, k.loop("q", 0, 3) as q, k.loop("r", 0, 4) as r:
        out[p, q, r] = a[p, q, r] * 2
    data = np.arange(24, dtype=np.uint32)
    assert run(k.build(), [data], grid=(1,))[0].tolist() == (data * 2).tolist()


def test_a_tuple_index_of_the_wrong_length_or_an_unshaped_buffer_is_refused():
    k = ir.Kernel()
    m = k.read("m", ir.f32, shape=(3, 5))
    flat = k.read("flat", ir.f32)
    refused(TypeError, r"3 indices for buffer 'm' of shape \(3, 5\)", lambda: m[1, 2, 3])
    refused(TypeError, "declares no shape", lambda: flat[1, 2])
    refused(TypeError, "one element at a time", lambda: flat[1:3])


# -- Python operations that need a Python value ---------------------------------------------

def value() -> ir.Val:
    k = ir.Kernel()
    return k.read("x", ir.f32)[0]


@pytest.mark.parametrize("call, fix", [
    (float, r"v\.cast\(ir\.f32\)"), (int, r"v\.cast\(ir\.i32\)"), (round, r"ir\.round"),
    (math.floor, r"ir\.floor"), (math.ceil, r"ir\.ceil"), (math.trunc, r"ir\.trunc"),
    (range, "k.loop"), (iter, "k.loop"), (len, r"buf\.len"), (lambda v: v[0], r"buf\[i\]"),
    (lambda v: divmod(v, 2), "a / b and a % b"), (lambda v: 1 in v, "== and |"),
    (lambda v: v.shape, r"\.dtype"),
], ids=["float", "int", "round", "floor", "ceil", "trunc", "range", "iter", "len",
        "index", "divmod", "in", "attribute"])
def test_python_operations_on_a_value_say_what_to_write(call, fix):
    with pytest.raises((TypeError, AttributeError), match=f"Fix: .*{fix}"):
        call(value())


def test_python_operations_on_a_buffer_say_what_to_write():
    k = ir.Kernel()
    x = k.read("x", ir.f32)
    m = k.read("m", ir.f32, shape=(2, 3))
    refused(TypeError, r"x\.len", lambda: len(x))
    refused(TypeError, "k.loop", lambda: list(x))
    refused(AttributeError, "declares no shape", lambda: x.shape)
    refused(AttributeError, "no attribute 'size'", lambda: x.size)
    assert m.shape == (2, 3) and m.dtype is ir.f32 and m.name == "m"


@pytest.mark.parametrize("op", [
    lambda x: x * 2, lambda x: x ** 2, lambda x: 2 + x, lambda x: -x, lambda x: x < 1,
    lambda x: operator.ge(1, x), lambda x: x // 2, lambda x: x << 1,
], ids=["mul", "pow", "radd", "neg", "lt", "rge", "floordiv", "shift"])
def test_arithmetic_on_a_buffer_says_to_load_an_element(op):
    x = ir.Kernel().read("x", ir.f32)
    refused(TypeError, r"buffer 'x' used as a value. Fix: load an element with x\[index\]",
            lambda: op(x))


def test_a_shape_of_numpy_ints_is_taken_as_ints():
    k = ir.Kernel(workgroup=(1,))
    m = k.read("m", ir.u32, shape=(np.int64(2), np.int64(3)))
    o = k.output("o", ir.u32, count=1)
    o[0] = m[1, 1]
    assert m.shape == (2, 3) and type(m.shape[0]) is int
    assert run(k.build(), [np.arange(6, dtype=np.uint32)])[0].tolist() == [4]


@pytest.mark.parametrize("shape, error", [
    ((2, -3), ValueError), ((0, 3), ValueError), ((), ValueError), ((1, 2, 3, 4), ValueError),
    ((2, 1.5), TypeError), ((2, "3"), TypeError), ((True, 2), TypeError),
])
def test_a_bad_shape_is_refused_at_the_declaration(shape, error):
    refused(error, "buffer 'm': shape", lambda: ir.Kernel().read("m", ir.u32, shape=shape))


# -- ir.u32(value) casts; V011 once, with a Fix that works ---------------------------------

def test_calling_a_dtype_on_a_value_casts_it():
    s = ir.Val(Var("s"), ir.i32)
    assert ir.u32(s).node == Cast(ir.u32, Var("s")) == s.cast(ir.u32).node


def test_v011_is_reported_once_per_index_and_its_fix_works_when_followed():
    k, x, o, _ = kernel()
    s = k.let("s", ir.i32(1))
    o[s] = x[s]
    with pytest.raises(ValidationError) as info:
        k.build()
    assert [f["code"] for f in info.value.findings] == ["V011"]
    assert "'o', 'x'" in info.value.findings[0]["cause"]
    assert "i.cast(ir.u32)" in info.value.findings[0]["fix"]
    k, x, o, _ = kernel()
    s = k.let("s", ir.i32(1))
    o[ir.u32(s)] = x[s.cast(ir.u32)]
    k.build()


# -- precedence ------------------------------------------------------------------------------

def test_comparisons_joined_by_and_without_parentheses_name_the_precedence():
    k, _x, _o, i = kernel()
    y = k.let("y", ir.u32(1))
    with pytest.raises(TypeError) as info, k.if_(i < 4 & y < 4):
        pass
    msg = str(info.value)
    assert "x < (4 & y) < 4" in msg and "parentheses" in msg and "(x < 4) & (y < 4)" in msg
    assert "k.if_" in msg


def test_a_python_if_on_a_value_keeps_the_plain_fix():
    with pytest.raises(TypeError, match=r"Fix: use `with k\.if_") as info:
        bool(ir.global_id(0) < 3)
    assert "(4 & y)" not in str(info.value)


def test_the_builder_emits_the_nodes_it_says():
    """A while loop and an if built with ``+=`` hold exactly one Assign each."""
    k = ir.Kernel()
    n = k.let("n", ir.u32(0))
    with k.while_(n < 3, 8):
        n += 1
    with k.if_(n > 1):
        n -= 1
    while_, if_ = k._blocks[0][-2:]
    assert isinstance(while_, While) and isinstance(if_, If)
    assert [type(s) for s in while_.body + if_.then] == [Assign, Assign]
    assert isinstance(k._blocks[0][0], Let)
