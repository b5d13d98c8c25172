"""The integer bit ops (clz, ctz, bit_reverse, rotl, rotr, mulhi, add_sat, sub_sat) and
the exact float ops (round, trunc, isnan, isinf): typed by the validator, and the same
bytes on every backend over random and edge values (every f16 included). The corpus
holds the hand-worked tables; this sweeps what a table cannot."""

from __future__ import annotations

import numpy as np
import pytest

from vyre_core import Driver, ir
from vyre_core.errors import UnsupportedFeatureError, ValidationError

INT_OPS = {
    "clz": lambda a, b, s: ir.clz(a), "ctz": lambda a, b, s: ir.ctz(a),
    "bit_reverse": lambda a, b, s: ir.bit_reverse(a), "rotl": lambda a, b, s: ir.rotl(a, s),
    "rotr": lambda a, b, s: ir.rotr(a, s), "mulhi": lambda a, b, s: ir.mulhi(a, b),
    "add_sat": lambda a, b, s: ir.add_sat(a, b), "sub_sat": lambda a, b, s: ir.sub_sat(a, b),
}
FLOAT_OPS = {"round": ir.round, "trunc": ir.trunc, "isnan": ir.isnan, "isinf": ir.isinf}
N = 4096


def int_program(dtype: ir.DType) -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    a, b, s = k.read("a", dtype), k.read("b", dtype), k.read("s", ir.u32)
    outs = {name: k.output(name, dtype, N) for name in INT_OPS}
    i = k.let("i", ir.global_id())
    for name, op in INT_OPS.items():
        outs[name][i] = op(a[i], b[i], s[i])
    return k.build()


def float_program(dtype: ir.DType, ops: list[str], n: int = N) -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", dtype)
    outs = {name: k.output(name, ir.bool_ if name.startswith("is") else dtype, n)
            for name in ops}
    i = k.let("i", ir.global_id())
    with k.if_(i < x.len):
        for name in ops:
            outs[name][i] = FLOAT_OPS[name](x[i])
    return k.build()


def int_inputs(dtype: ir.DType) -> list[np.ndarray]:
    rng = np.random.default_rng(16)
    edges = np.array([0, 1, 2, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFF, 0xFFFFFFFE,
                      0x10000, 0xFFFF, 31, 32, 33], np.uint32)
    a = rng.integers(0, 2**32, N, dtype=np.uint32)
    b = rng.integers(0, 2**32, N, dtype=np.uint32)
    a[:edges.size * edges.size] = np.repeat(edges, edges.size)  # every edge pair
    b[:edges.size * edges.size] = np.tile(edges, edges.size)
    b[-256:] = a[-256:]  # (a value with itself: squares, x - x)
    s = rng.integers(0, 2**32, N, dtype=np.uint32)
    s[:64] = np.arange(64)
    return [a.view(dtype.storage_np), b.view(dtype.storage_np), s]


def float_inputs(dtype: ir.DType) -> np.ndarray:
    """Every class of value: random bit patterns (NaNs, infinities, subnormals, huge ones)
    and values around the ties; every f16."""
    if dtype is ir.f16:
        return np.arange(2**16, dtype=np.uint16).view(np.float16)
    rng = np.random.default_rng(17)
    bits = np.dtype(dtype.storage_np).itemsize * 8
    width = np.uint32 if bits == 32 else np.uint64
    raw = rng.integers(0, 2**bits, N, dtype=width).view(dtype.storage_np)
    ties = (np.arange(-600, 600) / 4).astype(dtype.storage_np)  # n/4: halves and quarters
    raw[:ties.size] = ties
    raw[ties.size:ties.size + 4] = [np.inf, -np.inf, np.nan, -0.0]
    return raw


# -- typing -----------------------------------------------------------------------------

@pytest.mark.fast
def test_each_op_has_its_types():
    k = ir.Kernel()
    f, u = k.read("f", ir.f32), k.read("u", ir.u32)
    assert ir.isnan(f[0]).dtype is ir.bool_ and ir.round(f[0]).dtype is ir.f32
    assert ir.clz(u[0]).dtype is ir.u32 and ir.rotl(u[0], 3).dtype is ir.u32
    assert ir.mulhi(u[0].cast(ir.i32), -1).dtype is ir.i32


@pytest.mark.fast
@pytest.mark.parametrize(("make", "code"), [
    (lambda f, u: ir.clz(f), "V010"), (lambda f, u: ir.round(u), "V010"),
    (lambda f, u: ir.isnan(u), "V010"), (lambda f, u: ir.mulhi(f, f), "V007"),
    (lambda f, u: ir.add_sat(f, f), "V007"), (lambda f, u: ir.rotl(u, u.cast(ir.i32)), "V007"),
    (lambda f, u: ir.sub_sat(u, u.cast(ir.i32)), "V007"),
])
def test_an_op_on_a_type_it_lacks_is_refused(make, code):
    k = ir.Kernel()
    f, u = k.read("f", ir.f32), k.read("u", ir.u32)
    out = k.output("out", ir.u32, 1)
    k.let("x", make(f[0], u[0]))
    out[0] = u[0]
    with pytest.raises(ValidationError) as caught:
        k.build()
    assert [f["code"] for f in caught.value.findings] == [code]


# -- every backend, the same bytes ------------------------------------------------------

@pytest.fixture(scope="module")
def driver():
    with Driver() as drv:
        yield drv


@pytest.mark.parametrize("dtype", [ir.u32, ir.i32], ids=str)
def test_integer_ops_give_the_reference_bytes_on_every_backend(driver, dtype):
    program, inputs = int_program(dtype), int_inputs(dtype)
    expected = driver.dispatch(program, inputs, backend="reference")
    for backend in ("cpu", "wgpu"):
        got = driver.dispatch(program, inputs, backend=backend)
        for name, want, have in zip(INT_OPS, expected, got, strict=True):
            bad = np.flatnonzero(want != have)
            assert bad.size == 0, (f"{backend} {name}: first differs at a={inputs[0][bad[0]]} "
                                   f"b={inputs[1][bad[0]]} s={inputs[2][bad[0]]}: "
                                   f"{have[bad[0]]} != {want[bad[0]]}")


@pytest.mark.parametrize("dtype", [ir.f32, ir.f16, ir.f64], ids=str)
def test_float_ops_give_the_reference_bytes_on_every_backend(driver, dtype):
    x = float_inputs(dtype)
    for ops in (["round", "trunc", "isnan"], ["isinf"]):
        program = float_program(dtype, ops, len(x))
        expected = driver.dispatch(program, [x], backend="reference")
        for backend in ("cpu", "wgpu"):
            try:
                got = driver.dispatch(program, [x], backend=backend)
            except UnsupportedFeatureError as exc:  # (wgpu: f64 isinf, and only that)
                assert (backend, dtype, ops) == ("wgpu", ir.f64, ["isinf"]), exc
                continue
            for name, want, have in zip(ops, expected, got, strict=True):
                bits = f"u{want.itemsize}"  # (compared as bits: -0.0, NaN)
                bad = np.flatnonzero(want.view(bits) != have.view(bits))
                assert bad.size == 0, (f"{backend} {name}({x[bad[0]]!r}) = {have[bad[0]]!r}, "
                                       f"the reference says {want[bad[0]]!r}")


def test_ties_round_to_even_with_the_sign_of_zero_kept(driver):
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, -0.25, 4503599627370495.5], np.float64)
    for backend in ("reference", "cpu", "wgpu"):
        rounded, truncated, _ = driver.dispatch(
            float_program(ir.f64, ["round", "trunc", "isnan"]), [x], backend=backend)
        assert rounded[:len(x)].tobytes() == np.array(
            [0.0, 2.0, 2.0, -0.0, -2.0, -0.0, 4503599627370496.0]).tobytes(), backend
        assert truncated[:len(x)].tobytes() == np.array(
            [0.0, 1.0, 2.0, -0.0, -2.0, -0.0, 4503599627370495.0]).tobytes(), backend


# -- the bool results in every position (a let, a cast, logic, a lockstep kernel) ----------

def classify(shared: bool) -> ir.Program:
    """finite = !(isnan | isinf) through a let, a cast, xor and logic; ``shared`` adds
    workgroup memory and a barrier (cpu's lockstep kernels, one wgpu path more)."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.f32)
    finite = k.output("finite", ir.bool_, N)
    counted = k.output("counted", ir.u32, N)
    odd = k.output("odd", ir.bool_, N)
    i = k.let("i", ir.global_id())
    value = x[i]
    if shared:
        s = k.workgroup_buffer("s", ir.f32, 64)
        s[ir.local_id()] = x[i]
        k.barrier()
        value = s[ir.local_id()]
    nan = k.let("nan", ir.isnan(value))
    inf = k.let("inf", ir.isinf(value))
    finite[i] = ir.logical_not(ir.logical_or(nan, inf))
    counted[i] = nan.cast(ir.u32) + ir.cast(ir.isinf(value), ir.u32) * 2
    odd[i] = ir.isnan(value) ^ ir.isinf(value)
    return k.build()


@pytest.mark.parametrize("shared", [False, True], ids=["plain", "lockstep"])
def test_bool_results_of_isnan_and_isinf_work_wherever_a_bool_does(driver, shared):
    x = float_inputs(ir.f32)
    program = classify(shared)
    expected = driver.dispatch(program, [x], backend="reference")
    assert expected[1].sum() > 0  # (some NaNs and infinities among the inputs)
    for backend in ("cpu", "wgpu"):
        got = driver.dispatch(program, [x], backend=backend)
        assert [a.tobytes() for a in got] == [a.tobytes() for a in expected], backend


def test_nested_signed_mulhi_lowers_no_larger_than_unsigned():
    """Each operand written once (a helper's parameter), not three times per level: the
    i32 shader grew 6**depth where the u32 one grows 2**depth (the IR tree's own size)."""
    from vyre_wgpu.lowering import lower

    def nested(dtype: ir.DType) -> int:
        k = ir.Kernel(workgroup=(64,))
        x = k.read("x", dtype)
        out = k.output("out", dtype, N)
        h = x[ir.global_id()]
        for _ in range(8):
            h = ir.mulhi(h, h)
        out[ir.global_id()] = h
        return len(lower(k.build()).wgsl)

    assert nested(ir.i32) < 1.5 * nested(ir.u32)
