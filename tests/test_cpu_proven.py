"""The cpu backend's proven version of a plain kernel (vyre_cpu/ranges.py): written on
assumptions (every index inside its buffer, no u32/i32 index arithmetic that wraps),
checked once per dispatch. Where they hold and where they fail, the bytes are the
reference's: the same program runs with a row length that keeps every access inside
and with one that sends some past the end (dropped stores, loads of 0), and with ids
whose index arithmetic wraps below 0."""

from __future__ import annotations

import numpy as np
import pytest
import vyre_cpu.backend
from vyre_cpu import codegen, plain
from vyre_cpu.ranges import Ranges

import vyre_core as vyre
from vyre_core.config import DispatchConfig
from vyre_core.ir import (
    Access,
    Binary,
    BinOp,
    Buffer,
    BufLen,
    DType,
    IdKind,
    If,
    InvocationId,
    Let,
    Lit,
    Load,
    Program,
    Return,
    Store,
    Var,
)
from vyre_core.ir.exprtypes import type_of
from vyre_core.kernels.values import Value, floor_div, modulo
from vyre_workers.backend_host import BackendHost

U32, F32 = DType.U32, DType.F32
GX, GY = InvocationId(IdKind.GLOBAL, 0), InvocationId(IdKind.GLOBAL, 1)


def _add(a, b):
    return Binary(BinOp.ADD, a, b)


def rows(shift: int) -> Program:
    """``out[i * n + j] = a[i * n + j + shift]`` for ``j < n``, ``n`` a uniform: which
    accesses lie inside depends on ``n`` and the buffers' lengths, known only at run."""
    n = Load("n", Lit(U32, 0))
    index = _add(Binary(BinOp.MUL, GX, n), GY)
    shifted = Binary(BinOp.SUB, index, Lit(U32, -shift & 0xFFFFFFFF)) if shift < 0 else \
        _add(index, Lit(U32, shift))
    return Program((Buffer("a", 0, F32, Access.READ), Buffer("n", 1, U32, Access.UNIFORM, 1),
                    Buffer("out", 2, F32, Access.OUTPUT, 64)), (4, 4), (
        If(Binary(BinOp.LT, GY, n), (Store("out", index, Load("a", shifted)),)),
    )).check()


@pytest.fixture(scope="module")
def host():
    with BackendHost(vyre_cpu.backend) as host:
        yield host


@pytest.mark.fast
def test_a_row_major_kernel_gets_a_proven_version_without_bounds_checks():
    source = codegen.generate(rows(1)).source
    proven = source.split("def kernel(")[1].split("def fallback(")[0]
    assert "load_in(" in proven and "store_f32_in(" in proven
    assert "load(b0" not in proven and "store_f32(" not in proven
    fallback = source.split("def fallback(")[1].split("def kernel_serial(")[0]
    assert "load(b0" in fallback and "store_f32(" in fallback and "proven" not in fallback


@pytest.mark.parametrize("shift", [1, 0, -1])
@pytest.mark.parametrize("n, length", [(8, 65), (8, 64), (9, 80), (7, 64), (8, 20)])
def test_the_proven_version_gives_the_reference_bytes_whether_its_assumptions_hold_or_not(
        host, n, length, shift):
    """(8, 65) keeps every access inside; (8, 64) puts the last load one past the end;
    (9, 80) stores past ``out``; ``shift=-1`` reads ``a[0 - 1]``, which wraps to 2**32-1
    (a load of 0) in u32."""
    from vyre_reference import run

    program = rows(shift)
    inputs = [np.arange(1, length + 1, dtype=np.float32), np.array([n], np.uint32)]
    want, = run(program, inputs, grid=(2, 2, 1))
    got, = host.dispatch(program, inputs, DispatchConfig(grid_override=(2, 2, 1)))
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("length, needed", [(65, False), (64, True)])
def test_the_checked_version_is_compiled_only_for_a_launch_whose_assumptions_fail(
        tmp_path, monkeypatch, length, needed):
    """Fails on main before this commit (both versions were one function, compiled
    together)."""
    from vyre_cpu import compiler

    from vyre_reference import run

    monkeypatch.setenv(compiler.ENV, str(tmp_path))  # (nothing compiled before)
    monkeypatch.setattr(compiler, "_loaded", compiler.collections.OrderedDict())
    program = rows(1)
    inputs = [np.arange(1, length + 1, dtype=np.float32), np.array([8], np.uint32)]
    config = DispatchConfig(grid_override=(2, 2, 1))
    pipeline = vyre_cpu.backend.Pipeline(program, config)
    got, = pipeline.dispatch(inputs, config)
    assert got.tobytes() == run(program, inputs, grid=(2, 2, 1))[0].tobytes()
    assert bool(pipeline.compiled._fallback._serial.signatures) is needed


def shifted_by(alias: bool) -> Program:
    """``if i + s < len(a): out[i] = a[i + s]``, ``s`` a uniform; with ``alias`` the guard
    reads ``t = i`` rather than ``i``. Past the guard every load lies inside ``a``, though
    the grid (64 ids) runs past ``len(a) - s``."""
    s = Load("s", Lit(U32, 0))
    guarded = Var("t") if alias else GX
    return Program((Buffer("a", 0, F32, Access.READ), Buffer("s", 1, U32, Access.UNIFORM, 1),
                    Buffer("out", 2, F32, Access.OUTPUT, 64)), (64,), (
        Let("t", GX),
        If(Binary(BinOp.LT, _add(guarded, s), BufLen("a")),
           (Store("out", GX, Load("a", _add(GX, s))),)),
    )).check()


@pytest.mark.parametrize("alias", [False, True])
def test_a_guard_on_a_sum_bounds_its_terms_and_the_variables_that_hold_them(
        tmp_path, monkeypatch, alias):
    """``i + s < n`` gives ``i <= n - s - 1`` (and so ``t = i``'s, and ``i``'s through
    ``t``), so ``a[i + s]`` under it is proven inside ``a`` for every launch: the checked
    version is never compiled. Fails before session 22 (only a guard on a variable or an id
    itself narrowed its range, and only that variable's)."""
    from vyre_cpu import compiler

    from vyre_reference import run

    monkeypatch.setenv(compiler.ENV, str(tmp_path))
    monkeypatch.setattr(compiler, "_loaded", compiler.collections.OrderedDict())
    program = shifted_by(alias)
    inputs = [np.arange(1, 41, dtype=np.float32), np.array([3], np.uint32)]
    config = DispatchConfig(grid_override=(1, 1, 1))
    pipeline = vyre_cpu.backend.Pipeline(program, config)
    got, = pipeline.dispatch(inputs, config)
    assert got.tobytes() == run(program, inputs, grid=(1, 1, 1))[0].tobytes()
    assert not pipeline.compiled._fallback._serial.signatures


@pytest.mark.parametrize("y_length, needed", [(1000, False), (900, True)])
def test_a_kernel_at_the_global_id_compiles_its_checked_version_only_for_a_short_buffer(
        tmp_path, monkeypatch, y_length, needed):
    """saxpy over 1,000 elements in workgroups of 256: the last workgroup is ragged, but
    its ids from ``len(x)`` on run nothing (the guard ``i < len(x)``), so every id that
    runs lies inside x, y and out, and the version without checks runs alone. Where y is
    shorter than x, some ids pass its end: the version with checks is compiled then, and
    reads 0 there, as the reference does. Fails before this commit (the two versions were
    one function, compiled together: about 40% of such a kernel's compile time)."""
    from vyre_cpu import compiler

    from vyre_examples.saxpy import inputs as saxpy_inputs
    from vyre_examples.saxpy import program as saxpy
    from vyre_reference import run

    monkeypatch.setenv(compiler.ENV, str(tmp_path))
    monkeypatch.setattr(compiler, "_loaded", compiler.collections.OrderedDict())
    program = saxpy(1000)
    x, y, a = saxpy_inputs(1000)
    inputs = [x, y[:y_length], a]
    config = DispatchConfig(grid_override=(4, 1, 1))
    pipeline = vyre_cpu.backend.Pipeline(program, config)
    got, = pipeline.dispatch(inputs, config)
    assert got.tobytes() == run(program, inputs, grid=(4, 1, 1))[0].tobytes()
    assert bool(pipeline.compiled._fallback._serial.signatures) is needed


@pytest.mark.fast
def test_the_launch_bound_is_the_guard_every_statement_of_the_body_is_behind():
    """``plain.launch_bound``: the ``n`` past which invocations run nothing, read from
    vyre.kernel's launch guard (``if gid >= n or ...: return`` first) or from lets of the
    id and then one ``if gid < n`` holding the rest; None for any other body."""
    n, gy = BufLen("a"), Load("s", Lit(U32, 1))
    store = Store("out", GX, Load("a", GX))
    guard = If(Binary(BinOp.GE, GX, n), (Return(),))
    either = If(Binary(BinOp.LOGICAL_OR, Binary(BinOp.GE, GY, gy), Binary(BinOp.GE, GX, n)),
                (Return(),))
    under = If(Binary(BinOp.LT, Var("i"), n), (store,))
    assert plain.launch_bound((guard, store)) == n
    assert plain.launch_bound((either, store)) == n
    assert plain.launch_bound((Let("i", GX), under)) == n
    assert plain.launch_bound((If(Binary(BinOp.LT, GX, n), (store,)),)) == n
    for body in [(store, guard), (Let("i", GX), under, store),
                 (Let("i", GX), If(under.cond, (store,), (store,))),
                 (Let("i", GY), under), (store, Let("i", GX), under),
                 (Let("i", GX), If(Binary(BinOp.LE, Var("i"), n), (store,))),
                 (If(Binary(BinOp.GE, GY, gy), (Return(),)), store), ()]:
        assert plain.launch_bound(body) is None, body


@vyre.kernel
def blend(x, y, out, a: vyre.f32):
    i = vyre.global_id(0)
    v = x[i] * a + y[i]
    if v > 1.0:
        v = v - 1.0
    out[i] = v * v + x[i]


@pytest.mark.parametrize("dim", [1, 63, 64, 1000])
def test_a_launchs_proven_loop_stops_at_dim_with_no_branch_per_id(host, dim):
    """vyre.kernel's launch guard (``if gid >= dim: return``) bounds the proven flat
    loop instead of being tested in it for every id: LLVM vectorises the loop (this
    kernel at 4 Mi elements: 6.0-8.7 ms -> 2.3-2.6 ms on one thread), and the ids past
    ``dim`` (the last workgroup's) still run nothing. Fails before this commit (the
    guard was the loop body's first statement)."""
    from vyre_core.example import Example
    from vyre_reference import run

    rng = np.random.default_rng(dim)
    x, y = rng.random(dim, dtype=np.float32), rng.random(dim, dtype=np.float32)
    example = Example.of_kernel(blend, dim, (x, y, np.full(dim, 7, np.float32), 2.0))
    plan = host.plan(example.program, example.inputs, example.config)
    source = codegen.generate(plan.program).source
    proven = source.split("def kernel(")[1].split("def fallback(")[0]
    assert "for _once" not in proven and "returned" not in proven, proven
    assert "min2((gx * 64), np.int64(" in proven, proven
    got, = host.dispatch(plan.program, plan.inputs, DispatchConfig(grid_override=plan.grid))
    want, = run(plan.program, plan.inputs, grid=plan.grid)
    assert got.tobytes() == want.tobytes()


# -- quotients and remainders (issue 39, "no bounds checks where a range is proven") --------

I32 = DType.I32


def _ranges(dtype: DType = I32, **known: tuple[int, int]) -> Ranges:
    """``Ranges`` over variables of ``dtype`` (each its own kernel name), ``known`` bound,
    every bound kept as its source."""
    found = Ranges((64, 1, 1), lambda e: type_of(e, lambda name: dtype, {}), lambda n: n,
                   lambda e: None, lambda buffer: None, lambda code: code)
    for name, (lo, hi) in known.items():
        found.bind(name, (repr(float(lo)), repr(float(hi))))
    return found


def _value(code: str) -> float:
    return eval(code, {"np": np, "min2": min, "max2": max})  # (runtime's, on floats)


def _hold(ranges: Ranges) -> bool:
    """Whether every assumption made holds: the proven version would run."""
    return all(_value(a) for a in ranges.assumptions)


def _least(ranges: Ranges, name: str) -> float:
    return _value(ranges.lookup(name)[0])


def _v(name: str, dtype: DType = I32) -> Value:
    return Value(Var(name), dtype)


@pytest.mark.fast
def test_a_remainder_or_quotient_above_zero_bounds_its_dividend_from_below():
    """``x % q > 0`` gives ``x >= 1`` (a remainder has its dividend's sign and no greater
    magnitude), ``x / q >= t`` for ``t >= 1`` gives ``x >= t * q`` (q's least), and so
    lib.cumsum's guard, ``(g // inner) % chunks > 0`` (Python's floor operators), gives
    ``g >= inner``: its read of ``scanned[g - inner]`` is inside. Fails before this
    commit (no range of a quotient, a remainder or the floor operators' selects)."""
    for cond, least in ((Binary(BinOp.GT, Binary(BinOp.REM, Var("x"), Var("q")), Lit(I32, 0)), 1),
                        (Binary(BinOp.GE, Binary(BinOp.DIV, Var("x"), Var("q")), Lit(I32, 2)), 6),
                        (Binary(BinOp.GT, Binary(BinOp.DIV, Var("x"), Var("q")), Lit(I32, 2)), 9)):
        ranges = _ranges(x=(0, 100), q=(3, 5))
        ranges.push()
        ranges.refine(cond, True)
        assert _least(ranges, "x") == least and _hold(ranges), cond
    ranges = _ranges(g=(0, 4095), inner=(4, 4), chunks=(8, 8))
    guard = modulo(floor_div(_v("g"), _v("inner")), _v("chunks")).node
    ranges.push()
    ranges.refine(Binary(BinOp.GT, guard, Lit(I32, 0)), True)
    behind = ranges.of(Binary(BinOp.SUB, Var("g"), Var("inner")))
    assert _least(ranges, "g") == 4 and _value(behind[0]) == 0 and _hold(ranges)


@pytest.mark.fast
def test_where_a_dividend_may_be_negative_or_a_divisor_zero_no_bound_is_claimed():
    """The negative cases: ``-4 % 2 >= 0``, ``-1 % 3 > -1``, ``-2 / 3 >= 0``, Python's
    ``-1 % 3 == 2 > 0`` and u32 ``x / 0 == 4294967295 >= 1`` hold with ``x < 0`` (or any
    ``x``), so none of them narrows ``x``; or, where the analysis needs an assumption for
    its answer, that assumption fails (the checked version runs)."""
    rem = lambda a, b: Binary(BinOp.REM, a, b)  # noqa: E731
    div = lambda a, b: Binary(BinOp.DIV, a, b)  # noqa: E731
    x, q, y = Var("x"), Var("q"), Var("y")
    for cond in (Binary(BinOp.GE, rem(x, q), Lit(I32, 0)), Binary(BinOp.GT, rem(x, q), y),
                 Binary(BinOp.GE, div(x, q), Lit(I32, 0)),
                 Binary(BinOp.GT, modulo(_v("x"), _v("q")).node, Lit(I32, 0))):
        ranges = _ranges(x=(-10, 10), q=(3, 3), y=(-1, 5))
        ranges.push()
        ranges.refine(cond, True)
        assert not (_hold(ranges) and _least(ranges, "x") > -10), cond
    ranges = _ranges(DType.U32, x=(0, 100), q=(0, 4))
    ranges.push()
    ranges.refine(Binary(BinOp.GE, div(x, q), Lit(DType.U32, 1)), True)
    assert not (_hold(ranges) and _least(ranges, "x") > 0)


def _div(x: int, q: int) -> int:
    """The IR's ``div`` on i32 (docs/semantics.md): toward 0, ``x / 0 == -1``."""
    return -1 if q == 0 else abs(x) // abs(q) * (1 if (x < 0) == (q < 0) else -1)


def _rem(x: int, q: int) -> int:
    """The IR's ``rem``: the dividend's sign, ``x % 0 == 0``."""
    return 0 if q == 0 else x - q * _div(x, q)


@pytest.mark.fast
def test_the_range_of_a_quotient_or_a_remainder_holds_every_value():
    """Every i32 quotient and remainder of a box of operands (signs mixed, divisors of 0)
    lies in the range ``Ranges`` gives it (in a guard: ``Ranges.guarding``), wherever its
    assumptions hold."""
    checked = 0
    boxes = [(-7, 7), (0, 9), (-9, -2), (5, 5)]
    divisors = [(1, 3), (-3, 3), (0, 0), (2, 2), (-4, -1), (0, 5)]
    for (xl, xh) in boxes:
        for (ql, qh) in divisors:
            for op, rule in ((BinOp.DIV, _div), (BinOp.REM, _rem)):
                ranges = _ranges(x=(xl, xh), q=(ql, qh))
                ranges.guarding += 1
                found = ranges.of(Binary(op, Var("x"), Var("q")))
                if found is None or not _hold(ranges):
                    continue
                lo, hi = map(_value, found)
                got = {rule(a, b) for a in range(xl, xh + 1) for b in range(ql, qh + 1)}
                assert lo <= min(got) and max(got) <= hi, (op, (xl, xh), (ql, qh))
                checked += 1
    assert checked >= 30  # (every remainder, and each quotient by a divisor from 1 up)


@vyre.kernel
def behind(x, out, shift: vyre.i32, q: vyre.i32):
    g = vyre.global_id(0)
    i = g - shift
    if i % q > 0:
        out[g] = x[i - 1]


@pytest.mark.parametrize("shift", [0, 5])
def test_a_guard_by_pythons_modulo_of_a_dividend_that_may_be_negative_stays_checked(
        host, shift):
    """``i % q > 0`` with ``i = g - shift``: Python's modulo is positive for ``i < 0``
    (``-1 % 3 == 2``), so ``x[i - 1]`` is not inside for every id that passes the guard
    where ``shift > 0`` (the u32 index wraps past ``x``: a load of 0); the proven version's
    assumptions fail there and the bytes are the reference's either way."""
    from vyre_core.example import Example
    from vyre_reference import run

    dim = 64
    x = np.arange(1, dim + 1, dtype=np.float32)
    example = Example.of_kernel(behind, dim, (x, np.zeros(dim, np.float32), shift, 3))
    plan = host.plan(example.program, example.inputs, example.config)
    got, = host.dispatch(plan.program, plan.inputs, DispatchConfig(grid_override=plan.grid))
    want, = run(plan.program, plan.inputs, grid=plan.grid)
    assert got.tobytes() == want.tobytes()


@pytest.mark.fast
def test_a_quotient_outside_a_guard_has_no_range_so_an_index_of_one_stays_checked():
    """lib's reductions along an axis index ``(g // step) * span + g % step`` plus a tail
    under a guard on ``g % step``: inside by a relation ranges lose, so a range there
    would fail its assumption in every dispatch and send the whole launch to the checked
    version (it ran proven with that access checked). Only a guard reads quotients."""
    ranges = _ranges(x=(0, 100), q=(3, 5))
    assert ranges.of(Binary(BinOp.DIV, Var("x"), Var("q"))) is None
    assert ranges.of(modulo(_v("x"), _v("q")).node) is None and not ranges.assumptions
