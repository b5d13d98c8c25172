"""A ``@vyre.kernel`` as a sequence step (``SequenceBuilder.step(kernel, bind, dim=,
shapes=)``): parameters bound to sequence buffers by name, scalars given as numbers or
bound to one-element buffers (a loop's iteration number too), shaped arrays' extents from
``shapes=``; run on every backend with exact bytes, and each refusal with its Fix."""

from __future__ import annotations

import numpy as np
import pytest
from kernels import blur

import vyre_core as vyre
from vyre_core import f32, i32, ir, u32
from vyre_core.errors import InvalidSequenceError
from vyre_core.sequence.nodes import Role


@vyre.kernel
def saxpy(a: f32, x: vyre.Array[f32], y: vyre.Array[f32], out: vyre.Array[f32]):
    i = vyre.global_id(0)
    if i < len(x):
        out[i] = a * x[i] + y[i]


@vyre.kernel
def add_signed(k: i32, x: vyre.Array[i32]):
    i = vyre.global_id(0)
    if i < len(x):
        x[i] += k * (i + 1) - 1


@vyre.kernel
def add_unsigned(k: u32, x: vyre.Array[u32]):
    i = vyre.global_id(0)
    if i < len(x):
        x[i] = x[i] * 3 + k


@vyre.kernel
def scale(x, out, factor):                  # unannotated: typed from the sequence
    i = vyre.global_id(0)
    if i < len(x):
        out[i] = x[i] * factor


N = 100
ROWS, COLS = 5, 7


def _sequence() -> vyre.Sequence:
    """saxpy with a number, a loop whose number two kernels read (i32 and u32), a blur
    with shapes, and an unannotated kernel typed by its buffers."""
    b = vyre.SequenceBuilder()
    b.input("x", ir.f32, N)
    b.input("y", ir.f32, N)
    b.transient("t", ir.f32, N)
    b.step(saxpy, {"a": 2.5, "out": "t"}, dim=N)
    b.input("v", ir.i32, 6)
    b.input("w", ir.u32, 6)
    with b.loop(times=4) as k:
        b.step(add_signed, {"k": k, "x": "v"}, dim=6)
        b.step(add_unsigned, {"k": k, "x": "w"}, dim=6)
    b.input("img", ir.f32, ROWS * COLS)
    b.transient("smooth", ir.f32, ROWS * COLS)
    b.step(blur, {"out": "smooth"}, dim=(ROWS, COLS),
           shapes={"img": (ROWS, COLS), "out": (ROWS, COLS)})
    b.transient("half", ir.f32, N)
    b.step(scale, {"x": "t", "out": "half", "factor": 0.5}, dim=N)
    return b.build(returns=["t", "v", "w", "smooth", "half"])


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.standard_normal(N).astype(np.float32),
            rng.standard_normal(N).astype(np.float32),
            np.arange(6, dtype=np.int32) - 3, np.arange(6, dtype=np.uint32),
            rng.standard_normal(ROWS * COLS).astype(np.float32)]


def _expected(x, y, v, w, img) -> list[np.ndarray]:
    t = np.float32(2.5) * x + y
    v, w = v.copy(), w.copy()
    ids = np.arange(1, 7, dtype=np.int32)
    for k in range(4):
        v += k * ids - 1
        w = w * np.uint32(3) + np.uint32(k)
    image = img.reshape(ROWS, COLS)
    smooth = np.zeros_like(image)
    for r in range(1, ROWS - 1):
        for c in range(1, COLS - 1):
            acc = np.float32(0)
            for dr in range(-1, 2):
                for dc in range(-1, 2):
                    acc = np.float32(acc + image[r + dr, c + dc])
            smooth[r, c] = acc / np.float32(9)
    return [t, v, w, smooth.reshape(-1), t * np.float32(0.5)]


@pytest.mark.fast
def test_a_kernel_step_runs_the_kernels_own_program_bound_by_name():
    seq = _sequence()
    steps = [s for _, s in seq.steps()]
    x = np.zeros(N, np.float32)
    assert steps[0].program == saxpy.program(dim=N, args=(2.5, x, x, x))
    assert steps[0].bindings == ("step0_a", "x", "y", "t", "step0_launch")
    assert np.frombuffer(seq.buffer("step0_launch").data, np.uint32).tolist() == [N]
    assert seq.buffer("step0_a").role is Role.CONSTANT
    assert np.frombuffer(seq.buffer("step0_a").data, np.float32).tolist() == [2.5]
    # the loop's number is a u32[1]; the i32 scalar reads it through a cast
    signed = steps[1].program.buffer("k")
    assert (signed.dtype, signed.access, signed.count) == (ir.u32, ir.Access.UNIFORM, 1)
    assert steps[1].bindings == ("iteration_0", "v", "step1_launch")
    # the blur's extents and the step's dim: a constant of the sequence, bound to its
    # hidden launch buffer
    launch = steps[3].program.inputs[-1].name
    assert steps[3].bindings[-1] == "step3_launch" and launch == "launch"
    assert np.frombuffer(seq.buffer("step3_launch").data, np.uint32).tolist() == \
        [ROWS, COLS, ROWS, COLS, ROWS, COLS]
    assert [b.dtype for b in steps[4].program.inputs] == [ir.f32, ir.f32, ir.f32, ir.u32]


@pytest.mark.fast
def test_same_sequence_same_fingerprint():
    assert _sequence().fingerprint() == _sequence().fingerprint()


@pytest.mark.processes
@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_kernel_steps_give_exact_bytes_on_every_backend(backend):
    seq, inputs = _sequence(), _inputs()
    with vyre.Driver() as drv:
        out = drv.dispatch(seq, inputs, backend=backend)
    for got, want in zip(out, _expected(*inputs), strict=True):
        assert got.tobytes() == want.tobytes()


def _builder() -> vyre.SequenceBuilder:
    b = vyre.SequenceBuilder()
    b.input("x", ir.f32, 8)
    b.input("y", ir.f32, 8)
    b.transient("out", ir.f32, 8)
    return b


def _refusal(step) -> InvalidSequenceError:
    b = _builder()
    with pytest.raises(InvalidSequenceError) as err:
        step(b)
    return err.value


REFUSALS = {
    "no dim": (lambda b: b.step(saxpy, {"a": 1.0}),
               "kernel 'saxpy' in a step needs dim=", "Pass dim=n"),
    "scalar without a value": (lambda b: b.step(saxpy, dim=8),
                               "scalar parameter 'a' has no value",
                               "Give it one in bind: bind={'a': 2.0}"),
    "array bound to nothing": (lambda b: b.step(saxpy, {"a": 1.0, "out": "z"}, dim=8),
                               "parameter 'out' is bound to 'z', which the sequence does "
                               "not declare", "Declare every buffer"),
    "array of no buffer": (lambda b: b.step(blur, dim=(2, 4)),
                           "parameter 'img' is bound to no sequence buffer",
                           "Bind it: bind={'img': 'buffer'}"),
    "wrong dtype": (lambda b: b.step(add_signed, {"k": 1, "x": "y"}, dim=8),
                    "parameter 'x' (Array[i32]) is bound to input 'y' (f32[8])",
                    "Bind it to a buffer of dtype i32."),
    "scalar of a wrong buffer": (lambda b: b.step(saxpy, {"a": "x"}, dim=8),
                                 "parameter 'a' (f32) is bound to input 'x' (f32[8])",
                                 "Bind it to a buffer of dtype f32 and one element, or give"),
    "number for an array": (lambda b: b.step(saxpy, {"a": 1.0, "x": 3.0}, dim=8),
                            "parameter 'x' is bound to a float", "Bind an array parameter"),
    "number that does not fit": (lambda b: b.step(add_unsigned, {"k": -1, "x": "x"}, dim=8),
                                 "parameter 'k': -1 does not fit in u32", "Use a value"),
    "unknown parameter": (lambda b: b.step(saxpy, {"a": 1.0, "z": "x"}, dim=8),
                          "bind names ['z'], which kernel 'saxpy' does not have",
                          "Key bind by the kernel's parameter names."),
    "shaped without shapes": (lambda b: b.step(blur, {"img": "x"}, dim=(2, 4)),
                              "a shaped array, and shapes= does not give its shape",
                              "Pass its extents, numpy's order: shapes={'img': (rows, cols)}"),
    "shapes of another size": (lambda b: b.step(blur, {"img": "x"}, dim=(2, 4),
                                                shapes={"img": (3, 3), "out": (2, 4)}),
                               "shapes gives (3, 3), not 2 extents whose product is 8",
                               "Pass shapes={'img': (rows, cols)} with rows * cols == 8."),
    "shapes for a flat array": (lambda b: b.step(saxpy, {"a": 1.0}, dim=8,
                                                 shapes={"x": (2, 4)}),
                                "shapes names 'x', which is not a shaped array",
                                "Give shapes= only"),
    "shapes for a program": (lambda b: b.step(saxpy.program(dim=8, args=(
        1.0, *(np.zeros(8, np.float32),) * 3)), {"a": "x"}, dim=8, shapes={"x": (2, 4)}),
        "step() got shapes= for a Program", "shapes= gives a @vyre.kernel"),
    "bad dim": (lambda b: b.step(saxpy, {"a": 1.0}, dim=(1, 2, 3, 4)),
                "dim=(1, 2, 3, 4) is not 1 to 3 invocation counts", "Pass dim=n"),
    "a number bound to a program": (lambda b: b.step(saxpy.program(dim=8, args=(
        1.0, *(np.zeros(8, np.float32),) * 3)), {"a": 1.0}, dim=8),
        "bind gives a program buffer a value", "Bind each program buffer"),
}


@pytest.mark.fast
@pytest.mark.parametrize("case", REFUSALS)
def test_kernel_step_refusals_say_why_and_how_to_fix(case):
    step, cause, fix = REFUSALS[case]
    err = _refusal(step)
    assert cause in err.cause, err.cause
    assert err.fix.startswith(fix), err.fix


@pytest.mark.fast
def test_an_iteration_number_outside_i32_u32_scalars_is_refused():
    @vyre.kernel
    def as_float(k: f32, x: vyre.Array[f32]):
        x[0] = k

    b = _builder()
    with b.loop(times=2) as k, pytest.raises(InvalidSequenceError) as err:
        b.step(as_float, {"k": k}, dim=1)
    assert "parameter 'k' (f32) is bound to iteration 'iteration_0' (u32[1])" in err.value.cause
    assert err.value.fix.startswith("Bind it to a buffer of dtype f32 and one element")



@vyre.kernel
def shifted(x: vyre.Array[f32], out: vyre.Array[f32]):
    i = vyre.global_id(0)
    if i < len(x) - 1:
        out[i + 1] = x[i] + f32(1.0)


def _in_place() -> vyre.Sequence:
    """Transients written step after step: ``saxpy`` into ``t``, ``shifted`` from ``t``
    into ``u`` (which keeps its zero at 0), then ``saxpy`` of ``u`` into ``t`` again."""
    b = vyre.SequenceBuilder()
    b.input("x", ir.f32, N)
    b.input("y", ir.f32, N)
    b.transient("t", ir.f32, N)
    b.transient("u", ir.f32, N)
    b.step(saxpy, {"a": 2.0, "out": "t"}, dim=N)
    b.step(shifted, {"x": "t", "out": "u"}, dim=N)
    b.step(saxpy, {"a": 0.5, "x": "u", "out": "t"}, dim=N)
    return b.build(returns=["t", "u"])


@pytest.mark.fast
def test_a_step_may_write_a_transient_in_place_never_an_input():
    from vyre_core.sequence import run

    seq = _in_place()
    x, y = np.arange(N, dtype=np.float32), np.ones(N, np.float32)
    arrays = run._initial_arrays(seq, {"x": x, "y": y}, {})
    (_, first), (_, second), (_, third) = seq.steps()
    assert run._in_place(first, arrays)[0] is arrays["t"]
    assert run._in_place(second, arrays)[0] is arrays["u"]
    assert run._in_place(third, arrays)[0] is arrays["t"]
    assert arrays.owned("t") and arrays.owned("u")
    assert not arrays.owned("x") and not arrays.owned("y")


@pytest.mark.processes
def test_transients_written_in_place_give_the_references_bytes():
    x, y = np.arange(N, dtype=np.float32) / np.float32(3), np.ones(N, np.float32)
    t = np.float32(2.0) * x + y
    u = np.zeros(N, np.float32)
    u[1:] = t[:-1] + np.float32(1.0)
    t2 = np.float32(0.5) * u + y
    with vyre.Driver() as drv:
        for backend in ("reference", "cpu", "wgpu"):
            for _ in range(2):  # (a second run starts from zeros again)
                got_t, got_u = drv.dispatch(_in_place(), [x, y], backend=backend)
                assert got_t.tobytes() == t2.tobytes(), backend
                assert got_u.tobytes() == u.tobytes(), backend
