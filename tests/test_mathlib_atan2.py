"""vyre_core.mathlib.atan2, ``atan2(y, x)`` correctly rounded in f16 (docs/design-42.md,
step 12), held to MPFR's correctly rounded results (gmpy2 in the binary16 context) bit for
bit: on the reference in this process over every f16 ``y`` against the ``x`` where the
result is near 0, pi/2 and pi or subnormal (and the other way round), C's special cases
and drawn pairs; the f32 pair the f16 result is rounded from, held to its error bound
(where ``ff.decided`` says the pair rounds as the true value, its f32 rounding is MPFR's:
adversarial pairs and drawn bits); then the IR operation through a Driver on every
backend. (``vyre conform --exhaustive --all-inputs --op atan2 --dtype f16`` checks every
f16 pair.)"""

from __future__ import annotations

from collections.abc import Callable

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mathlib_cases import BINARY16, BINARY32, CANONICAL_NAN, EVERY_F16

from vyre_core import Driver, SequenceBuilder, ir
from vyre_core.mathlib import atan2, ff
from vyre_reference import run

F16_INF, F16_MAX, F16_TINY = 0x7C00, 0x7BFF, 0x0001


def mpfr_atan2(y: np.ndarray, x: np.ndarray, width: int) -> np.ndarray:
    """MPFR's atan2 of each pair (bits of f32 or f16), rounded once to the format, as
    bits; NaN the canonical NaN."""
    floats, unsigned = ((np.float32, np.uint32) if width == 32 else (np.float16, np.uint16))
    out = np.empty(y.size, unsigned)
    with gmpy2.context(BINARY32 if width == 32 else BINARY16):
        for at, (a, b) in enumerate(zip(y.astype(unsigned).view(floats),
                                        x.astype(unsigned).view(floats), strict=True)):
            r = (floats(float(gmpy2.atan2(gmpy2.mpfr(float(a)), gmpy2.mpfr(float(b)))))
                 if a == a and b == b else floats("nan"))
            out[at] = CANONICAL_NAN[width] if np.isnan(r) else r.view(unsigned)
    return out


def pair_block(function: Callable, width: int, lanes: int) -> ir.Program:
    """``out[i]`` = the bits of ``function(y[i], x[i])`` (operands given as bits)."""
    unsigned, floats = (ir.u32, ir.f32) if width == 32 else (ir.u16, ir.f16)
    k = ir.Kernel(workgroup=(64,))
    ys, xs = k.read("y", unsigned), k.read("x", unsigned)
    out = k.output("out", unsigned, lanes)
    i = k.let("i", ir.global_id())
    y, x = k.let("vy", ir.bitcast(ys[i], floats)), k.let("vx", ir.bitcast(xs[i], floats))
    out[i] = ir.bitcast(function(k, y, x), unsigned)
    return k.build()


def on_reference(function: Callable, width: int, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    return run(pair_block(function, width, y.size), [y, x])[0]


def assert_f16_correctly_rounded(y: np.ndarray, x: np.ndarray) -> None:
    y, x = y.astype(np.uint16), x.astype(np.uint16)
    got, want = on_reference(atan2.atan2_f16, 16, y, x), mpfr_atan2(y, x, 16)
    wrong = np.flatnonzero(got != want)
    assert wrong.size == 0, "atan2_f16 misrounds " + ", ".join(
        f"({int(y[at]):04x}, {int(x[at]):04x}): got {int(got[at]):04x}, "
        f"want {int(want[at]):04x}" for at in wrong[:8])


def f32_fast_path(k: ir.Kernel, y: ir.Val, x: ir.Val) -> ir.Val:
    """The f32 pair rounded once to f32, or NaN where ``ff.decided`` (at the pair's error
    bound) does not promise that rounding is the true value's."""
    pair, scale = atan2._core(k, y, x)
    sure = ir.logical_or(ff.decided(k, pair, abs(pair.hi) * atan2._FAST_ERROR, scale),
                         pair.hi == 0.0)  # (a signed zero: lo -+ 0 flips its sign)
    return ir.select(sure, atan2._nan(y, x, ff.round_ff(k, pair, scale)), ir.lit(
        float("nan")))


def assert_f32_pair_within_its_bound(y: np.ndarray, x: np.ndarray) -> int:
    """Every pair ``decided`` passes rounds to MPFR's f32 result; returns how many it
    did not pass (those are for an accurate path)."""
    y, x = y.astype(np.uint32), x.astype(np.uint32)
    got, want = on_reference(f32_fast_path, 32, y, x), mpfr_atan2(y, x, 32)
    sure = (got != CANONICAL_NAN[32]) | (want == CANONICAL_NAN[32])
    wrong = np.flatnonzero(sure & (got != want))
    assert wrong.size == 0, "the f32 pair misrounds, decided: " + ", ".join(
        f"({int(y[at]):08x}, {int(x[at]):08x}): got {int(got[at]):08x}, "
        f"want {int(want[at]):08x}" for at in wrong[:8])
    return int(np.sum(~sure))


def signs(y: np.ndarray, x: np.ndarray, sign: int) -> tuple[np.ndarray, np.ndarray]:
    """The pairs under all four sign combinations (``sign`` the format's sign bit)."""
    return (np.concatenate([y, y | sign, y, y | sign]),
            np.concatenate([x, x, x | sign, x | sign]))


# -- f16 on the reference ----------------------------------------------------------------

@pytest.mark.fast
@pytest.mark.parametrize("other", [0x3C00, F16_MAX, 0x3555],
                         ids=["one", "largest", "third"])
def test_f16_is_correctly_rounded_for_every_input_against_one_operand(other):
    """Every f16 ``y`` over ``x = other`` and every ``x`` under ``y = other``, both signs
    of ``other``: results near 0 (subnormal ones against the largest ``x``), pi/2 (against
    the least subnormal), pi (against a negative ``x``), and every special ``y``/``x``."""
    fixed = np.full(EVERY_F16.size, other, np.uint16)
    for sign in (0, 0x8000):
        assert_f16_correctly_rounded(np.concatenate([EVERY_F16, fixed | sign]),
                                     np.concatenate([fixed | sign, EVERY_F16]))


@pytest.mark.fast
def test_f16_special_cases_are_cs():
    """Zeros, infinities and NaNs against each other and against finite values."""
    special = np.array([0, 0x8000, F16_INF, 0xFC00, 0x7E00, 0x7C01, 0xFFFF, 0x3C00, 0xBC00,
                        F16_TINY, 0x8001, F16_MAX, 0xFBFF], np.uint16)
    y, x = np.meshgrid(special, special)
    assert_f16_correctly_rounded(y.ravel(), x.ravel())


@pytest.mark.fast
@settings(max_examples=20, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=256))
def test_f16_is_correctly_rounded_for_drawn_pairs(pairs):
    bits = np.asarray(pairs, np.uint32)
    assert_f16_correctly_rounded(bits & 0xFFFF, bits >> 16)


# -- the f32 pair the f16 result is rounded from -----------------------------------------

def adversarial_f32() -> tuple[np.ndarray, np.ndarray]:
    """``y/x`` an exact tie of the subnormal grid and tiny quotients (subnormal results),
    ``y/x`` at and next to the table's breakpoints ``j/64``, next to 1, equal magnitudes
    and powers of two, ``|y| >> |x|`` (near pi/2) and ``|y| << |x|`` (near 0 and pi):
    CORE-MATH's atan2f worst cases among them."""
    f32 = np.float32
    ys, xs = [], []
    for a in range(-149, -95, 2):  # (odd multiples of the quantum over 2^b: ties and near)
        for b in range(-10, 40, 7):
            for odd in (1, 3, 5, 0xFFFFFF, 0x800001):
                y = f32(max(odd * 2.0**a, 2.0**-149))
                ys += [y, y]
                xs += [f32(2.0**b), f32(3 * 2.0**b)]
    for j in range(65):
        for x in (f32(64), f32(1), f32(3), f32(1e10), f32(2.0**-140)):
            t = f32(j / 64) * x
            for y in (t, np.nextafter(t, f32(0)), np.nextafter(t, f32(np.inf))):
                ys.append(f32(y))
                xs.append(x)
    for e in range(-149, 126, 3):
        v = f32(2.0**e)
        for w in (v, np.nextafter(v, f32(0)), np.nextafter(v, f32(np.inf))):
            ys += [w, v, f32(3 * w)]
            xs += [v, w, v]
    worst = [("0x1.b8748cp-2", "-0x1.9cf606p23"), ("0x1.b874ecp5", "-0x1.f2a172p23"),
             ("0x1.5f325p3", "-0x1.09e3e8p21"), ("0x1.99a5d6p7", "-0x1.bb5ca2p23"),
             ("0x1.9cf606p49", "0x1.b8748cp23"), ("0x1.24c4e8p45", "0x1.caab8ap23"),
             ("0x1.c84ca8p21", "-0x1.00b24ap23")]
    ys += [f32(float.fromhex(a)) for a, _ in worst]
    xs += [f32(float.fromhex(b)) for _, b in worst]
    y, x = np.array(ys, f32).view(np.uint32), np.array(xs, f32).view(np.uint32)
    return signs(np.concatenate([y, x]), np.concatenate([x, y]), 0x80000000)


@pytest.mark.fast
def test_the_f32_pair_is_within_its_bound_on_adversarial_pairs():
    """Where ``decided`` holds the pair's f32 rounding is MPFR's; it does not hold for the
    exact ties of ``atan q ~ q`` (their pair is right, but within the bound of the tie)
    and the hard cases: those are left to an accurate path, not built yet."""
    y, x = adversarial_f32()
    undecided = assert_f32_pair_within_its_bound(y, x)
    assert 0 < undecided < y.size // 50


@pytest.mark.fast
@settings(max_examples=20, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1),
                          st.integers(0, 40)), min_size=1, max_size=256))
def test_the_f32_pair_is_within_its_bound_for_drawn_bits(pairs):
    """Any bits, and pairs whose magnitudes are at most 40 binades apart."""
    y = np.array([a for a, _, _ in pairs], np.uint32)
    x = np.array([b for _, b, _ in pairs], np.uint32)
    near = (((y >> 23) & 0xFF).astype(np.int64) + [d - 20 for _, _, d in pairs]).clip(1, 254)
    near_x = (x & 0x807FFFFF) | (near.astype(np.uint32) << 23)
    assert_f32_pair_within_its_bound(np.concatenate([y, y]), np.concatenate([x, near_x]))


# -- the IR operation on every backend ---------------------------------------------------

@pytest.fixture(scope="module")
def driver():
    with Driver() as drv:
        yield drv


def op_program(lanes: int) -> ir.Program:
    """``out[i] = atan2(y[i], x[i])`` in f16: the IR operation itself."""
    k = ir.Kernel(workgroup=(64,))
    y, x = k.read("y", ir.f16), k.read("x", ir.f16)
    out = k.output("out", ir.f16, lanes)
    i = k.let("i", ir.global_id())
    out[i] = ir.atan2(y[i], x[i])
    return k.build()


@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_the_ir_operation_is_the_librarys_on_every_backend(driver, backend):
    """``ir.atan2`` on f16, written out by the worker host: MPFR's bytes on every backend,
    in a dispatch over drawn pairs and every ``y`` against ``x = -1``, and as two steps of
    a sequence (the second's ``x`` the first's results)."""
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, 1 << 14, dtype=np.uint64)
    y = np.concatenate([(bits & 0xFFFF), EVERY_F16]).astype(np.uint16)
    x = np.concatenate([(bits >> 16), np.full(EVERY_F16.size, 0xBC00)]).astype(np.uint16)
    got = driver.dispatch(op_program(y.size), [y.view(np.float16), x.view(np.float16)],
                          backend)[0]
    assert got.view(np.uint16).tobytes() == mpfr_atan2(y, x, 16).tobytes(), backend
    lanes = 4096
    y, x = y[:lanes], x[:lanes]
    b = SequenceBuilder()
    b.input("y", ir.f16, lanes)
    b.input("x", ir.f16, lanes)
    b.transient("t", ir.f16, lanes)
    b.transient("u", ir.f16, lanes)
    b.step(op_program(lanes), {"y": "y", "x": "x", "out": "t"})
    b.step(op_program(lanes), {"y": "y", "x": "t", "out": "u"})
    t, u = driver.dispatch_sequence(b.build(returns=["t", "u"]),
                                    [y.view(np.float16), x.view(np.float16)], backend=backend)
    want_t = mpfr_atan2(y, x, 16)
    assert t.view(np.uint16).tobytes() == want_t.tobytes(), f"a sequence's step on {backend}"
    assert u.view(np.uint16).tobytes() == mpfr_atan2(y, want_t, 16).tobytes()
