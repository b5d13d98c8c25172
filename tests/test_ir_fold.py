"""Specialization folds what the chosen values decide (vyre_core/ir/fold.py): an ``if``
or a select on a constant keeps only its branch taken, so a backend sees the program a
user would have written for that value (``base = g``, not ``(g // step) * span + t``).
Only conditions that read a constant and are exact on every backend are decided: bool
logic and comparisons of integers of one type. Pure: no process."""

from __future__ import annotations

import numpy as np
import pytest

import vyre_core as vyre
from vyre_core import bool_, f32, i32
from vyre_core.ir.dtypes import DType
from vyre_core.ir.fold import substitute
from vyre_core.ir.nodes import (
    Binary,
    BinOp,
    Block,
    If,
    Lit,
    Load,
    Select,
    SpecRef,
    Store,
    Unary,
    UnOp,
    Var,
    walk,
)
from vyre_core.lib import passes

pytestmark = pytest.mark.fast


@vyre.kernel(workgroup=(64,))
def pick(x, out, *, FLAT: vyre.Constant[bool_] = False, MODE: vyre.Constant[i32] = 0,
         GAIN: vyre.Constant[f32] = 1.0):
    g = vyre.global_id(0)
    v = x[g] if FLAT else x[g // 2]
    if MODE == 2:
        v = v * 2.0
    if MODE < 1 and not FLAT:
        v = v + 1.0
    if GAIN > 1.0:
        v = v * GAIN
    if g < MODE:
        v = v - 1.0
    out[g] = v


def _program(**values):
    x, out = np.zeros(64, np.float32), np.zeros(64, np.float32)
    return pick.program(dim=64, args=(x, out)).specialize(values)


def _ops(program) -> list[BinOp]:
    return [n.op for n in walk(program.body) if isinstance(n, Binary)]


def test_a_bool_constant_keeps_the_select_branch_it_takes():
    flat, strided = _program(FLAT=True), _program(FLAT=False)
    assert BinOp.DIV not in _ops(flat) and BinOp.DIV in _ops(strided)
    for program in (flat, strided):
        assert not any(isinstance(n, Select) and isinstance(n.cond, Lit)
                       for n in walk(program.body))


def test_comparisons_and_logic_of_integer_constants_are_decided():
    def muls_and_adds(program):
        ops = _ops(program)
        return ops.count(BinOp.MUL), ops.count(BinOp.ADD)

    base = muls_and_adds(_program(MODE=1, FLAT=True))  # (neither if taken)
    assert muls_and_adds(_program(MODE=2, FLAT=True)) == (base[0] + 1, base[1])
    assert muls_and_adds(_program(MODE=0, FLAT=False))[1] == base[1] + 1
    assert muls_and_adds(_program(MODE=0, FLAT=True)) == base  # (not FLAT: false)
    for program in (_program(MODE=2), _program(MODE=0, FLAT=True)):
        decided = [n for n in walk(program.body) if isinstance(n, If | Select) and
                   isinstance(n.cond, Lit)]
        assert decided == []


def test_a_condition_the_values_do_not_decide_is_kept():
    """``g < MODE`` reads an id; ``GAIN > 1.0`` compares floats, which are left alone."""
    program = _program(MODE=3, GAIN=2.0)
    conds = [n.cond for n in walk(program.body) if isinstance(n, If)]
    assert any(isinstance(c, Binary) and c.op is BinOp.LT for c in conds)
    assert any(isinstance(c, Binary) and c.op is BinOp.GT and
               c.rhs == Lit.of(DType.F32, 1.0) for c in conds)
    assert not any(isinstance(n, SpecRef) for n in walk(program.body))


TAKEN, OTHER = (Store("a", Lit(DType.U32, 0), Lit(DType.U32, v)) for v in (1, 2))


@pytest.mark.parametrize("flat", [True, False])
def test_an_if_becomes_a_block_of_its_branch(flat):
    folded = substitute(If(SpecRef("FLAT"), (TAKEN,), (OTHER,)),
                        {"FLAT": Lit(DType.BOOL, int(flat))})
    assert folded == Block((TAKEN,) if flat else (OTHER,))


@pytest.mark.parametrize("op, a, b, want", [
    (BinOp.EQ, 2, 2, True), (BinOp.NE, 2, 2, False), (BinOp.LT, -1, 0, True),
    (BinOp.GE, -1, 0, False), (BinOp.LE, 3, 3, True), (BinOp.GT, 3, 3, False)])
def test_integer_comparisons_fold_to_their_value_in_each_type(op, a, b, want):
    for dtype in (DType.I32, DType.I64):
        lits = {"MODE": Lit.of(dtype, a)}
        for cond in (Binary(op, SpecRef("MODE"), Lit.of(dtype, b)),
                     Unary(UnOp.NOT, Unary(UnOp.NOT, Binary(op, SpecRef("MODE"),
                                                            Lit.of(dtype, b))))):
            assert substitute(If(cond, (TAKEN,), (OTHER,)), lits) == \
                Block((TAKEN,) if want else (OTHER,))
            select = Select(cond, Lit(DType.U32, 1), Lit(DType.U32, 2))
            assert substitute(Store("a", Lit(DType.U32, 0), select), lits).value == \
                Lit(DType.U32, 1 if want else 2)


def test_what_the_values_do_not_decide_is_substituted_and_kept():
    """Literals of two types; a condition that reads a variable; one the program wrote
    as a literal (its own business, as in a program without constants)."""
    lits = {"MODE": Lit.of(DType.I32, 2)}
    for cond, kept in [
            (Binary(BinOp.LT, SpecRef("MODE"), Lit.of(DType.U32, 3)),
             Binary(BinOp.LT, Lit.of(DType.I32, 2), Lit.of(DType.U32, 3))),
            (Binary(BinOp.LOGICAL_AND, Var("c"), Binary(BinOp.EQ, SpecRef("MODE"),
                                                        Lit.of(DType.I32, 2))),
             Binary(BinOp.LOGICAL_AND, Var("c"), Binary(BinOp.EQ, Lit.of(DType.I32, 2),
                                                        Lit.of(DType.I32, 2)))),
            (Lit(DType.BOOL, 1), Lit(DType.BOOL, 1))]:
        assert substitute(If(cond, (TAKEN,), (OTHER,)), lits) == If(kept, (TAKEN,), (OTHER,))


@pytest.mark.parametrize("name", ["sum_pass", "max_pass", "arg_first", "arg_next"])
def test_libs_passes_neither_divide_nor_take_a_remainder(name):
    """A pass's grid is ``(parts * inner, blocks, outer)``, so it indexes ``x[start + g +
    j * stride]`` with ``start`` and ``stride`` the same in every lane of a row: no
    division (an argument's first pass divides once, for the place it returns, never for an
    index), consecutive from lane to lane, which the cpu backend proves inside ``x``."""
    kernel = getattr(passes, name)
    x, out, at = np.zeros(1000, np.float32), np.zeros(4, np.float32), np.zeros(4, np.int32)
    sizes = (1000, 4, 1, 0, 1000, 4, 250)
    args = {"sum_pass": (x, out), "max_pass": (x, out), "arg_first": (x, out, at),
            "arg_next": (x, at, out, at)}[name] + sizes
    program = kernel.program(dim=(4, 1, 1), args=args)
    if program.constants:  # (the argument passes: argmax's order, argmin's)
        program = program.specialize({"GREATER": name == "arg_first"})
    ops = [n.op for n in walk(program.body) if isinstance(n, Binary)]
    assert ops.count(BinOp.DIV) == (1 if name == "arg_first" else 0)
    assert BinOp.REM not in ops or name == "arg_first"  # (the floor division's sign)
    for load in (n for n in walk(program.body) if isinstance(n, Load) and n.buffer == "x"):
        assert not {BinOp.DIV, BinOp.REM} & {n.op for n in walk((load.index,))
                                             if isinstance(n, Binary)}
