"""vyre_core.mathlib.inline: a library function written out where a program uses its
operation, wherever that is (nested in another call, an ``if`` condition, a loop bound, a
``while`` condition evaluated every pass), with fresh names whatever the program's own
are, only for the operand type it is defined for; the expanded program is valid and gives
what the function computes, on the reference here and on cpu and wgpu. A toy library
stands in for the real one (its functions are ordinary IR: what matters here is where
they land), so the values are checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from vyre_core import Driver, ir
from vyre_core.ir.builder import Kernel
from vyre_core.ir.values import Val
from vyre_core.mathlib import library
from vyre_core.mathlib.inline import expand
from vyre_core.mathlib.library import define
from vyre_reference import run

F32, U32 = ir.f32, ir.u32
N = 64
X = np.linspace(-3.0, 20.0, N, dtype=np.float32)


def affine(k: Kernel, x: Val) -> Val:
    """``2x + 1``, through a variable of its own."""
    twice = k.let(k.fresh_name("t"), x * 2.0)
    return twice + 1.0


def looped(k: Kernel, x: Val) -> Val:
    """``x + 0 + 1 + 2``, then less 10 where that passes 10: a loop, an assignment and an
    ``if`` inside the function (names ``acc`` and ``i`` the program also uses)."""
    acc = k.let("acc", x)
    with k.loop("i", 0, 3) as i:
        acc += i.cast(F32)
    with k.if_(acc > 10.0):
        k.assign(acc, acc - 10.0)
    return acc * 1.0


def model_looped(x: np.ndarray) -> np.ndarray:
    acc = x
    for i in range(3):
        acc = (acc + np.float32(i)).astype(np.float32)
    return np.where(acc > 10, acc - np.float32(10.0), acc).astype(np.float32)


#: exp2 on f32 is ``affine``, exp on f32 ``looped``; nothing for f16.
TOY = {("unop.exp2", F32): define("affine", (F32,), affine),
       ("unop.exp", F32): define("looped", (F32,), looped)}


def one_output(body) -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    x, out = k.read("x", F32), k.output("out", F32, N)
    i = k.let("i", ir.global_id())
    body(k, k.let("acc", x[i]), out, i)
    return k.build()


def nested(k, x, out, i):
    out[i] = ir.exp2(ir.exp2(x)) + ir.exp(x) * ir.exp2(x + 1.0)


def in_if(k, x, out, i):
    out[i] = 0.0
    with k.if_(ir.exp2(x) > 9.0):
        out[i] = ir.exp(x)


def in_loop_bounds(k, x, out, i):
    total = k.let("total", 0.0)
    with k.loop("j", ir.cast(ir.max(x, 0.0), U32), ir.cast(ir.exp2(ir.max(x, 0.0)), U32)) as j:
        total += j.cast(F32)
    out[i] = total


def in_while(k, x, out, i):
    """Passes while ``exp2(y) = 2y + 1 < 30``, ``y`` up by 1 a pass, one pass skipped
    by ``continue`` (it must still re-test), at most 12."""
    y, n = k.let("y", x), k.let("n", 0.0)
    with k.while_(ir.exp2(y) < 30.0, max_trips=12):
        y += 1.0
        with k.if_(y == 5.0):
            k.continue_()
        n += 1.0
    out[i] = n * 100.0 + y


def model_while(x: np.ndarray) -> np.ndarray:
    one, out = np.float32(1.0), []
    for y in x:
        n, trips = np.float32(0.0), 0
        while trips < 12 and model_exp2(y) < 30:
            trips += 1
            y = y + one
            if y == 5:
                continue
            n = n + one
        out.append(n * np.float32(100.0) + y)
    return np.asarray(out, np.float32)


def model_exp2(x: np.ndarray) -> np.ndarray:
    return (x * np.float32(2.0) + np.float32(1.0)).astype(np.float32)


CASES = {
    "nested": (nested, lambda x: model_exp2(model_exp2(x)) + model_looped(x)
               * model_exp2(x + np.float32(1.0))),
    "in_if": (in_if, lambda x: np.where(model_exp2(x) > 9, model_looped(x), 0).astype(
        np.float32)),
    "in_loop_bounds": (in_loop_bounds, lambda x: np.asarray(
        [sum(range(int(max(v, 0)), int(max(2 * max(v, 0) + 1, 0)))) for v in x], np.float32)),
    "in_while": (in_while, model_while),
}


@pytest.mark.fast
@pytest.mark.parametrize("case", list(CASES))
def test_a_call_anywhere_is_written_out_and_computes_the_function(case):
    body, model = CASES[case]
    program = one_output(body)
    expanded = expand(program, TOY)
    expanded.check()
    assert not expanded.requirements().ops & {"unop.exp2", "unop.exp"}
    assert run(expanded, [X])[0].tobytes() == model(X).tobytes()


@pytest.mark.fast
def test_a_uniform_while_condition_stays_uniform():
    """A ``while`` whose condition (a call) is the same in every invocation may hold a
    barrier; written out, the loop keeps that shape, so it is still valid (a ``break``
    under an ``if`` would make every pass after it diverge, by the uniformity rules)."""
    k = ir.Kernel(workgroup=(64,))
    x, u, out = k.read("x", F32), k.uniform("u", F32), k.output("out", F32, N)
    shared = k.workgroup_buffer("shared", F32, 64)
    i = k.let("i", ir.global_id())
    y, n = k.let("y", u[0]), k.let("n", 0.0)
    with k.while_(ir.exp2(y) < 30.0, max_trips=12):
        shared[ir.local_id()] = x[i]
        k.barrier()
        y += 1.0
        n += 1.0
    out[i] = n
    program = k.build()
    expanded = expand(program, TOY)
    expanded.check()
    # y from 1 and 20: passes while 2y + 1 < 30, at most 12
    for start, passes in ((1.0, 12.0), (20.0, 0.0), (10.0, 5.0)):
        got = run(expanded, [X, np.array([start], np.float32)])[0]
        assert got.tobytes() == np.full(N, passes, np.float32).tobytes(), start


@pytest.mark.fast
def test_fresh_names_never_meet_the_programs_own():
    """The program already uses the names the inliner would pick first (``_math1``) and
    the function's parameter and local names (``arg0``, ``acc``, ``i``)."""
    def clash(k, x, out, i):
        taken = k.let("_math1", x + 1.0)
        arg0 = k.let("arg0", x * 3.0)
        out[i] = ir.exp(taken) + ir.exp2(arg0) + taken

    expanded = expand(one_output(clash), TOY)
    expanded.check()
    x1 = X + np.float32(1.0)
    want = model_looped(x1) + model_exp2(X * np.float32(3.0)) + x1
    assert run(expanded, [X])[0].tobytes() == want.tobytes()


@pytest.mark.fast
def test_only_the_operand_type_a_function_is_defined_for_is_replaced():
    k = ir.Kernel(workgroup=(64,))
    x, out = k.read("x", ir.f16), k.output("out", ir.f16, N)
    i = k.let("i", ir.global_id())
    out[i] = ir.exp2(x[i])
    program = k.build()
    assert expand(program, TOY) is program  # (f16 has no function in TOY)


@pytest.mark.fast
def test_a_program_without_the_librarys_operations_is_returned_as_it_is():
    program = one_output(lambda k, x, out, i: out.__setitem__(i, x * 2.0))
    assert expand(program, TOY) is program
    assert expand(program) is program


@pytest.mark.fast
def test_the_library_version_follows_its_code(monkeypatch):
    """The version is a digest of the library's source files: the same each time it is
    read, another when any of them changes (what the pipeline key needs)."""
    from pathlib import Path

    before = library.version.__wrapped__()
    assert before == library.version.__wrapped__() == library.version()
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: real(self) + (
        b"# changed" if self.name == "exp2.py" else b""))
    assert library.version.__wrapped__() != before


@pytest.fixture(scope="module")
def driver():
    with Driver() as drv:
        yield drv


@pytest.mark.parametrize("backend", ["cpu", "wgpu"])
def test_expanded_programs_give_the_references_bytes_on_every_backend(driver, backend):
    for case, (body, _) in CASES.items():
        expanded = expand(one_output(body), TOY)
        want = driver.dispatch(expanded, [X], backend="reference")
        got = driver.dispatch(expanded, [X], backend=backend)
        assert got[0].tobytes() == want[0].tobytes(), f"{case} on {backend}"
