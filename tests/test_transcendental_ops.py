"""tan, tanh, exp2, log2, pow and atan2: typed by the validator, C's special cases as
docs/semantics.md writes them out (exact bits, every backend), and every backend within
its ULP budget of the correctly rounded result over random and edge values (tan's values,
special ones included, are MPFR's on every backend in test_mathlib_tan, which compiles
its function once per type on cpu). The corpus and ``vyre conform --exhaustive`` hold the
rest. The backends run the math tests' own program of each operation
(``mathlib_cases.op_program``, one per op and type): numba compiles it once per run."""

from __future__ import annotations

import math

import numpy as np
import pytest
from mathlib_cases import apply

from vyre_core import Driver, ir
from vyre_core.compare import ulp_distance
from vyre_core.conformance.cases_special import correctly_rounded, correctly_rounded_pow
from vyre_core.errors import NoCapableBackendError, ValidationError
from vyre_reference import run as reference_run

UNARY = {"tanh": np.tanh, "exp2": np.exp2, "log2": np.log2}
#: What docs/semantics.md says of wgpu's own f32 code (the others: correctly rounded in f64)
WGPU_ULP = {"tanh": 0, "exp2": 0, "log2": 0, "pow": 0, "atan2": 0}
INF, NAN, PI = math.inf, math.nan, math.pi

#: (x, y, pow(x, y)) as semantics.md writes C's special cases out
POW_SPECIALS = [
    (NAN, 0.0, 1.0), (NAN, -0.0, 1.0), (1.0, NAN, 1.0), (1.0, INF, 1.0), (NAN, 1.0, NAN),
    (2.0, NAN, NAN), (-1.0, INF, 1.0), (-1.0, -INF, 1.0), (0.5, INF, 0.0), (0.5, -INF, INF),
    (2.0, INF, INF), (2.0, -INF, 0.0), (-2.0, 0.5, NAN), (-2.0, 3.0, -8.0), (-2.0, 2.0, 4.0),
    (-0.0, -1.0, -INF), (-0.0, -2.0, INF), (0.0, -1.0, INF), (-0.0, 3.0, -0.0),
    (-0.0, 2.0, 0.0), (-0.0, 0.5, 0.0), (0.0, 0.5, 0.0), (-INF, 3.0, -INF), (-INF, 2.0, INF),
    (-INF, -3.0, -0.0), (-INF, -2.0, 0.0), (INF, -0.5, 0.0), (INF, 0.5, INF),
    (2.0, 128.0, INF), (2.0, -150.0, 0.0), (2.0, -149.0, 2.0 ** -149), (4.0, 0.5, 2.0),
    (-8.0, 1.0 / 3.0, NAN), (16777216.0, 1.0, 16777216.0), (-3.0, 16777215.0, -INF),
]
#: (y, x, atan2(y, x)) likewise
ATAN2_SPECIALS = [
    (0.0, 0.0, 0.0), (-0.0, 0.0, -0.0), (0.0, -0.0, PI), (-0.0, -0.0, -PI), (0.0, -1.0, PI),
    (-0.0, -1.0, -PI), (0.0, 1.0, 0.0), (1.0, 0.0, PI / 2), (1.0, -0.0, PI / 2),
    (-1.0, 0.0, -PI / 2), (INF, INF, PI / 4), (-INF, INF, -PI / 4), (INF, -INF, 3 * PI / 4),
    (-INF, -INF, -3 * PI / 4), (INF, 5.0, PI / 2), (-INF, -5.0, -PI / 2), (1.0, -INF, PI),
    (-1.0, -INF, -PI), (1.0, INF, 0.0), (-1.0, INF, -0.0), (NAN, 1.0, NAN), (1.0, NAN, NAN),
    (1.0, 1.0, PI / 4), (1.0, -1.0, 3 * PI / 4),
    (1.0, -1e-45, PI / 2), (3.4e38, -1.0, PI / 2),  # (pi less a rounded pi/2 was 1 ULP low)
]


def program(op: str, dtype: ir.DType, n: int) -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    binary = op in ("pow", "atan2")
    args = [k.read(name, dtype, n) for name in ("a", "b")[:1 + binary]]
    out = k.output("out", dtype, n)
    i = k.let("i", ir.global_id())
    with k.if_(i < n):
        out[i] = getattr(ir, op)(*(a[i] for a in args))
    return k.build()


@pytest.mark.fast
def test_the_builder_types_them_and_the_validator_refuses_them_on_integers():
    k = ir.Kernel()
    f, h, u = k.read("f", ir.f32), k.read("h", ir.f16), k.read("u", ir.u32)
    assert ir.pow(f[0], 2).node == ir.Binary(ir.BinOp.POW, f[0].node,
                                              ir.Lit(ir.f32, 0x40000000))
    assert ir.atan2(h[0], h[1]).dtype is ir.f16
    assert ir.tanh(f[0]).node == ir.Unary(ir.UnOp.TANH, f[0].node)
    for make, code in ((lambda f, h, u: ir.pow(u, u), "V007"),
                       (lambda f, h, u: ir.atan2(f, h), "V007"),
                       (lambda f, h, u: ir.log2(u), "V010")):
        k = ir.Kernel()
        f, h, u = k.read("f", ir.f32), k.read("h", ir.f16), k.read("u", ir.u32)
        out = k.output("out", ir.u32, 1)
        k.let("x", make(f[0], h[0], u[0]))
        out[0] = u[0]
        with pytest.raises(ValidationError) as caught:
            k.build()
        assert [x["code"] for x in caught.value.findings] == [code]


@pytest.mark.fast
@pytest.mark.parametrize("dtype", [ir.f32, ir.f16, ir.f64], ids=str)
def test_the_reference_keeps_cs_special_cases_for_every_nan(dtype):
    """pow(NaN, 0) is 1 for a signaling NaN too (C's pow in f64 gives NaN for one)."""
    np_t = np.dtype(dtype.storage_np)
    signaling = {2: 0x7C01, 4: 0x7F800001, 8: 0x7FF0000000000001}[np_t.itemsize]
    snan = np.array([signaling], f"u{np_t.itemsize}").view(np_t)[0]
    with np.errstate(over="ignore"):
        x = np.array([snan, snan, 1.0, *[p[0] for p in POW_SPECIALS]], np_t)
        y = np.array([0.0, -0.0, snan, *[p[1] for p in POW_SPECIALS]], np_t)
        want = np.array([1.0, 1.0, 1.0, *[p[2] for p in POW_SPECIALS]], np_t)
    if dtype is not ir.f32:  # (the table is f32's: 2^-150 is not 0 in f64, 2^24 - 1 is
        # inf in f16)
        want[3:] = correctly_rounded_pow(x, y)[3:]
    got = reference_run(program("pow", dtype, len(x)), [x, y])[0]
    assert ulp_distance(want, got).max() == 0, (x, y, got)


@pytest.fixture(scope="module")
def driver():
    with Driver() as drv:
        yield drv


def exact_bits(want: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Where ``got`` is not ``want`` to the bit (any NaN the same)."""
    return ulp_distance(want, got) != 0


@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_cs_special_cases_on_every_backend(driver, backend):
    """Exact, as written out in semantics.md (pi and pi/2 as f32 rounds them)."""
    for op, table in (("pow", POW_SPECIALS), ("atan2", ATAN2_SPECIALS)):
        a, b, want = (np.array(col, np.float32) for col in zip(*table, strict=True))
        got = apply(driver, backend, getattr(ir, op), ir.f32, a, b)
        bad = np.flatnonzero(exact_bits(want, got))
        assert bad.size == 0, [(op, a[i], b[i], got[i], want[i]) for i in bad]
    x = np.array([0.0, -0.0, INF, -INF, NAN, 4.0, 0.125, -1.0, 1.0], np.float32)
    want = {"tanh": [0.0, -0.0, 1.0, -1.0, NAN, None, None, None, None],
            "exp2": [1.0, 1.0, INF, 0.0, NAN, 16.0, None, 0.5, 2.0],
            "log2": [-INF, -INF, INF, NAN, NAN, 2.0, -3.0, NAN, 0.0]}
    for op, values in want.items():
        got = apply(driver, backend, getattr(ir, op), ir.f32, x)
        for i, value in enumerate(values):
            if value is not None:
                assert not exact_bits(np.array([value], np.float32), got[i:i + 1]).any(), \
                    (op, x[i], got[i], value)


def inputs(dtype: ir.DType, binary_for: str | None = None) -> list[np.ndarray]:
    rng = np.random.default_rng(17)
    n = 1 << 14
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    ordinary = rng.uniform(-12.0, 12.0, n).astype(np.float32)
    tiny = (rng.uniform(-1, 1, n) * 2.0 ** rng.integers(-140, -10, n)).astype(np.float32)
    x = np.concatenate([bits, ordinary, tiny])
    with np.errstate(all="ignore"):
        if binary_for is None:
            return [x.astype(dtype.storage_np)]
        if binary_for == "pow":  # exponents that keep the result an ordinary number, and
            # (the last third) bases near 1 with y log2 x near ±128: an error in log2 x
            # counts most there (a first log2 was 3 ULP out at 1.2225043 ** 426.94788)
            near = rng.uniform(1.05, 1.5, n)
            base = np.abs(np.concatenate([ordinary, rng.uniform(0.0, 3.0, n), near]))
            t = np.concatenate([rng.uniform(-140.0, 120.0, 2 * n),
                                rng.uniform(95.0, 127.9, n) * rng.choice([-1.0, 1.0], n)])
            y = t / np.log2(base)
            y[::3] = np.rint(y[::3])
            base[::4] = -base[::4]
            return [a.astype(dtype.storage_np) for a in (np.concatenate([x[:n], base]),
                                                         np.concatenate([bits[::-1], y]))]
        return [x.astype(dtype.storage_np), (x[::-1] * rng.uniform(-3, 3, 3 * n))
                .astype(dtype.storage_np)]


@pytest.mark.parametrize("dtype", [ir.f32, ir.f16], ids=str)
@pytest.mark.parametrize("op", [*UNARY, "pow", "atan2"])
def test_every_backend_is_within_its_budget_of_the_correctly_rounded_result(driver, op,
                                                                             dtype):
    args = inputs(dtype, op if op in ("pow", "atan2") else None)
    want = correctly_rounded_pow(*args) if op == "pow" else correctly_rounded(
        UNARY.get(op, np.arctan2), *args)
    for backend, budget in (("reference", 0), ("cpu", 0), ("wgpu", WGPU_ULP[op])):
        got = apply(driver, backend, getattr(ir, op), dtype, *args)
        distance = ulp_distance(want, got)
        at = int(distance.argmax())
        assert distance[at] <= budget, (backend, [a[at] for a in args], got[at], want[at])


def test_f64_pow_is_not_offered_to_wgpu(driver):
    """f64 ``pow`` is the math library's (held to MPFR and to identical bytes on the
    reference and cpu in tests/test_mathlib_f64.py): written out, it uses 64-bit
    integers, which WGSL lacks, so routing does not offer it to wgpu."""
    x = np.array([0.5, -2.0, 3.0, 1e-300, 700.0], np.float64)
    y = np.array([3.0, 3.0, -0.5, 0.5, 1.5], np.float64)
    with pytest.raises(NoCapableBackendError, match="uses ops not supported"):
        driver.dispatch(program("pow", ir.f64, len(x)), [x, y], backend="wgpu")
