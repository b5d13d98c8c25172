"""The math library's f64 functions (vyre_core/mathlib/*_f64.py; docs/design-42.md,
section 5): held to MPFR at 53 bits on the reference in this process, within the error
docs/semantics.md documents (at most 1 ULP from the correctly rounded result, and that
only where the result lies within about 2^-70 of a rounding boundary: adversarial inputs
and drawn bits here come out correctly rounded, the few exceptions measured over 10^6
inputs by tools/f64_accuracy.py); then, through a Driver, the IR operations themselves
give the reference's bytes on cpu, over random bits and special values, in a dispatch and
as a sequence's step (the one algorithm: identical bytes by construction)."""

from __future__ import annotations

from collections.abc import Callable

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mathlib_cases import whole_workgroups

from vyre_core import Driver, SequenceBuilder, ir
from vyre_core.mathlib import atan2_f64, exp_f64, log_f64, pow_f64, tanh_f64, trig_f64
from vyre_reference import run

#: MPFR's binary64: 53 bits, m * 2^e with m in [1/2, 1), subnormals on their grid.
BINARY64 = gmpy2.context(precision=53, emin=-1073, emax=1024, subnormalize=True)
CANONICAL_NAN = 0x7FF8000000000000


def bits_of(values) -> np.ndarray:
    return np.asarray(values, np.float64).view(np.uint64)


def mpfr(fn: Callable, bits: np.ndarray) -> np.ndarray:
    """MPFR's ``fn`` of each f64 input (its bits), rounded once to f64, as bits; a NaN is
    the canonical NaN (stores canonicalize)."""
    out = np.empty(bits.size, np.uint64)
    with gmpy2.context(BINARY64):
        for at, v in enumerate(bits.view(np.float64).tolist()):
            result = float(fn(gmpy2.mpfr(v))) if v == v else float("nan")
            out[at] = CANONICAL_NAN if result != result else bits_of(result)
    return out


def ulps_apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ULPs between f64 bit patterns, across zero (the signed integer line of IEEE)."""
    def line(x: np.ndarray) -> np.ndarray:
        signed = x.view(np.int64)
        return np.where(signed < 0, np.int64(-(2**63)) - signed, signed).astype(object)
    return np.abs(line(a) - line(b))


def block(function: Callable, lanes: int) -> ir.Program:
    """``out[i]`` = the bits of ``function`` of the f64 whose bits are ``in[i]``."""
    k = ir.Kernel(workgroup=(64,))
    source = k.read("x", ir.u64)
    out = k.output("out", ir.u64, lanes)
    i = k.let("i", ir.global_id())
    out[i] = ir.bitcast(function(k, k.let("v", ir.bitcast(source[i], ir.f64))), ir.u64)
    return k.build()


def mpfr2(fn: Callable, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``mpfr`` for a function of two f64 inputs (their bits)."""
    out = np.empty(y.size, np.uint64)
    with gmpy2.context(BINARY64):
        for at, (a, b) in enumerate(zip(y.view(np.float64).tolist(),
                                        x.view(np.float64).tolist(), strict=True)):
            result = float(fn(gmpy2.mpfr(a), gmpy2.mpfr(b))) if a == a and b == b else \
                float("nan")
            out[at] = CANONICAL_NAN if result != result else bits_of(result)
    return out


def block2(function: Callable, lanes: int) -> ir.Program:
    """``out[i]`` = the bits of ``function(y, x)`` of the f64s whose bits are ``y[i]``,
    ``x[i]``."""
    k = ir.Kernel(workgroup=(64,))
    ys, xs = k.read("y", ir.u64), k.read("x", ir.u64)
    out = k.output("out", ir.u64, lanes)
    i = k.let("i", ir.global_id())
    y = k.let("a", ir.bitcast(ys[i], ir.f64))
    out[i] = ir.bitcast(function(k, y, k.let("b", ir.bitcast(xs[i], ir.f64))), ir.u64)
    return k.build()


# -- the inputs --------------------------------------------------------------------------

SPECIALS = [0x0, 0x8000000000000000, 0x7FF0000000000000, 0xFFF0000000000000,
            0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0xFFFFFFFFFFFFFFFF,
            0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 0x0000000000000001, 0x8000000000000001,
            0x0010000000000000, 0x8010000000000000, 0x3FF0000000000000, 0xBFF0000000000000]


def around(values: list[float], steps: int = 2) -> np.ndarray:
    """Each value and its ``steps`` neighbours either side (bit patterns)."""
    b = bits_of(values).astype(np.int64)
    near = np.concatenate([b + d for d in range(-steps, steps + 1)])
    return near.astype(np.uint64)


def exp_inputs() -> np.ndarray:
    """Overflow (log(max) ~ 709.78) and underflow (the least subnormal's half, ~ -745.13)
    thresholds, the normal/subnormal seam (~ -708.40), subnormal results densely, the
    reduction's points k ln 2 / 128, tiny x (where e^x rounds to 1 or 1 - 2^-53)."""
    seams = [709.782712893384, -745.1332191019411, -745.1332191019412, -708.3964185322641,
             -744.44007192138122, 1.0, -1.0, 0.5, 2.0**-53, -(2.0**-53), 2.0**-54,
             -(2.0**-54), 2.0**-1074 * 3]
    subnormal = np.linspace(-745.2, -708.0, 3001)
    points = np.arange(-5000, 5000, 7) * (np.log(2) / 128)
    return np.concatenate([around(seams, 3), bits_of(subnormal), bits_of(points)])


def exp2_inputs() -> np.ndarray:
    """Every integer exponent (exact results), the thresholds 1024 and -1075 (the
    midpoint between 0 and the least subnormal: ties to +0), subnormal results densely,
    the table's points j / 128, tiny x."""
    integers = np.arange(-1080, 1030, dtype=np.float64)
    seams = [1024.0, -1075.0, -1074.0, -1022.0, -1022.5, 1023.999, 2.0**-53, -(2.0**-53)]
    subnormal = np.linspace(-1075.5, -1021.0, 3001)
    points = np.arange(-4000, 4000, 3) / 128
    return np.concatenate([bits_of(integers), around(seams, 3), bits_of(subnormal),
                           bits_of(points)])


def log_inputs() -> np.ndarray:
    """x near 1 from both sides (no cancellation: ``r = x - 1``), every power of two
    (``log2`` exact) and its neighbours, subnormal inputs of every size, the table's cell
    edges, the largest finite, zeros, negatives."""
    near_one = [1 + d * 2.0**-e for e in range(1, 60) for d in (1, -1)]
    powers = 2.0 ** np.arange(-1074, 1024, dtype=np.float64)
    edges = (0x3FE6000000000000 + (np.arange(129, dtype=np.uint64) << np.uint64(45)))
    negative = [-1.0, -(2.0**-1074), -np.inf, -0.5]
    return np.concatenate([around([1.0], 40), around(near_one, 2), around(list(powers), 1),
                           around(list(edges.view(np.float64)), 1), bits_of(negative)])


def tanh_inputs() -> np.ndarray:
    """Either side of the series' threshold 1/8, where tanh starts rounding to 1 (about
    19.06) and the clamp 22, tiny x (tanh x rounds to x), subnormals, integers."""
    seams = [0.125, -0.125, 19.061547465398498, 19.0615474653985, 22.0, -22.0, 2.0**-26,
             2.0**-27, 1.0, 0.5, 0.25, 2.0**-1074, 2.0**-1022]
    return np.concatenate([around(seams, 4), bits_of(np.linspace(-25, 25, 4001)),
                           bits_of(np.linspace(0.12, 0.13, 1001))])


def trig_inputs() -> np.ndarray:
    """Doubles nearest multiples of pi/32 (and pi/2) at every size, the worst case of the
    f64 reduction (6381956970095103 2^797, within 2^-60.9 of a multiple of pi/2), either
    side of 2^19 (Cody and Waite below, Payne and Hanek from it) and 2^-27 (the tiny
    rule), huge x at every exponent, the largest finite."""
    steps = np.concatenate([np.arange(1, 2000), 2.0 ** np.arange(11, 60)]) * (np.pi / 32)
    seams = [6381956970095103 * 2.0**797, 2.0**19, 2.0**-27, 2.0**-26, np.pi / 2, np.pi,
             1e22, 2.0**1023, 1.7976931348623157e308]
    huge = 2.0 ** np.arange(19, 1024) * 1.2345678901234567
    return np.concatenate([around(list(steps), 1), around(seams, 3), bits_of(huge)])


def trig_drawn(rng: np.random.Generator, size: int) -> np.ndarray:
    """Uniform in [-10, 10] and [-1e6, 1e6], log-uniform magnitudes to 2^1023."""
    return np.concatenate([rng.uniform(-10, 10, size), rng.uniform(-1e6, 1e6, size),
                           np.exp2(rng.uniform(-30, 1023, size)) * rng.choice([-1, 1], size)])


def exp_drawn(reach: float) -> Callable[[np.random.Generator, int], np.ndarray]:
    """Uniform over [-reach, reach] and log-uniform magnitudes of both signs."""
    def draw(rng: np.random.Generator, size: int) -> np.ndarray:
        return np.concatenate([rng.uniform(-reach, reach, size), np.exp2(rng.uniform(
            -60, np.log2(reach), size)) * rng.choice([-1, 1], size)])
    return draw


def log_drawn(rng: np.random.Generator, size: int) -> np.ndarray:
    """Log-uniform over every binade, subnormals included, and uniform near 1."""
    return np.concatenate([np.exp2(rng.uniform(-1074, 1024, size)),
                           1 + rng.uniform(-0.1, 0.1, size)])


#: Each function: its library builder, the IR operation, MPFR's function, its adversarial
#: inputs and its drawn ordinary ones (results neither 0, 1 nor infinity).
FUNCTIONS = {
    "exp": (exp_f64.exp_f64, ir.exp, gmpy2.exp, exp_inputs, exp_drawn(746.0)),
    "exp2": (exp_f64.exp2_f64, ir.exp2, gmpy2.exp2, exp2_inputs, exp_drawn(1076.0)),
    "log": (log_f64.log_f64, ir.log, gmpy2.log, log_inputs, log_drawn),
    "log2": (log_f64.log2_f64, ir.log2, gmpy2.log2, log_inputs, log_drawn),
    "tanh": (tanh_f64.tanh_f64, ir.tanh, gmpy2.tanh, tanh_inputs, exp_drawn(20.0)),
    "sin": (trig_f64.sin_f64, ir.sin, gmpy2.sin, trig_inputs, trig_drawn),
    "cos": (trig_f64.cos_f64, ir.cos, gmpy2.cos, trig_inputs, trig_drawn),
    "tan": (trig_f64.tan_f64, ir.tan, gmpy2.tan, trig_inputs, trig_drawn),
}


def atan2_pairs() -> tuple[np.ndarray, np.ndarray]:
    """(y, x) bits: every pair of special values (C's cases), equal magnitudes, ratios at
    the table's points i/64 and between, quotients in the subnormal range (exact midpoints
    of its grid among them: they round toward zero), every quadrant, huge and tiny
    operands."""
    specials = np.array(SPECIALS, np.uint64)
    sy, sx = np.repeat(specials, specials.size), np.tile(specials, specials.size)
    rng = np.random.default_rng(17)
    x = np.exp2(rng.uniform(-1000, 1000, 600))
    ratios = np.concatenate([np.arange(0, 65) / 64, np.arange(0, 128) / 128 + 2.0**-20])
    ry = np.concatenate([ratios * 3.0, 3.0 / np.maximum(ratios, 2.0**-30)])
    rx = np.concatenate([np.full(ratios.size, 3.0), np.full(ratios.size, 3.0)])
    tiny_y = np.array([3, 5, 1, 7, 2**52 + 1, 2**53 - 1], np.float64) * 2.0**-1074
    ty = np.concatenate([tiny_y, tiny_y, tiny_y * 2.0**60])
    tx = np.concatenate([np.full(6, 2.0), np.full(6, 4.0), np.full(6, 2.0**70)])
    ys = np.concatenate([x, x * 1.5, -x, x * 2.0**-60, ry, -ry, ry, ty, -ty])
    xs = np.concatenate([x, -x, x, x, rx, rx, -rx, tx, tx])
    return (np.concatenate([sy, bits_of(ys)]), np.concatenate([sx, bits_of(xs)]))


def atan2_drawn(seed: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Random bits, uniform operands in [-10, 10], log-uniform magnitudes of both signs."""
    rng = np.random.default_rng(seed)

    def draw() -> np.ndarray:
        return np.concatenate([
            rng.integers(0, 2**64, size, dtype=np.uint64),
            bits_of(rng.uniform(-10, 10, size)),
            bits_of(np.exp2(rng.uniform(-1074, 1024, size)) * rng.choice([-1, 1], size))])
    return draw(), draw()


def mpfr_pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """MPFR's ``x^y`` of f64 inputs (their bits), as bits: C's special values (``pow(NaN,
    0) = pow(1, NaN) = 1``, MPFR's ``mpfr_pow`` keeps them), the canonical NaN."""
    out = np.empty(x.size, np.uint64)
    with gmpy2.context(BINARY64):
        for at, (a, b) in enumerate(zip(x.view(np.float64).tolist(),
                                        y.view(np.float64).tolist(), strict=True)):
            result = float(gmpy2.mpfr(a) ** gmpy2.mpfr(b))
            out[at] = CANONICAL_NAN if result != result else bits_of(result)
    return out


def pow_exact() -> tuple[np.ndarray, np.ndarray]:
    """(x, y) bits whose ``x^y`` is exact: midpoints (54 significant bits, so they round
    to even: odd ``m^2``, ``m^3``, ``(w^2)^1.5``, ``(w^2)^2.5``, ``(3^16)^2.125`` at
    every scale, negative bases to odd powers; odd multiples of 2^-1075 in the subnormal
    range: ``(3 2^-215)^5``, ``2^-1075``) and representable results (``10^22``,
    ``2^-1074``, ``16^0.25``)."""
    rng = np.random.default_rng(23)

    def odd(bits: int, power: int, count: int) -> list[int]:
        drawn = rng.integers(2 ** (bits - 1), 2**bits, 8 * count) | 1
        return [int(m) for m in drawn if (int(m) ** power).bit_length() == 54][:count]

    def at_scales(bases: list[float], step: int) -> np.ndarray:
        return np.array(bases) * np.exp2(rng.integers(-300, 300, len(bases)) * step)
    squares, cubes = odd(27, 2, 150), odd(18, 3, 150)
    roots, fifths = [float(w * w) for w in odd(18, 3, 100)], [float(w * w) for w in
                                                               odd(11, 5, 50)]
    pairs = [(at_scales(list(map(float, squares)), 1), 2.0),
             (-at_scales(list(map(float, squares)), 1), 2.0),
             (at_scales(list(map(float, cubes)), 1), 3.0),
             (-at_scales(list(map(float, cubes)), 1), 3.0),
             (at_scales(roots, 2), 1.5), (np.array(fifths), 2.5)]
    xs = [x for x, _ in pairs] + [np.array([3.0**16, 3.0**8, 9.0, 3 * 2.0**-215, 2.0, 0.5,
                                             2.0**-43, 2.0**43, -(2.0**-43), 10.0, 2.0,
                                             16.0, 7.0, 0.5, -3.0])]
    ys = [np.full(x.size, y) for x, y in pairs] + [np.array([
        2.125, 4.25, 17.0, 5.0, -1075.0, 1075.0, 25.0, -25.0, 25.0, 22.0, -1074.0, 0.25,
        18.0, 1074.0, 33.0])]
    return bits_of(np.concatenate(xs)), bits_of(np.concatenate(ys))


def pow_pairs() -> tuple[np.ndarray, np.ndarray]:
    """(x, y) bits: every pair of special values and of a few ordinary ones (C's cases:
    negative bases to odd, even and non-integer powers, signed zeros, infinities, NaNs),
    ``x`` near 1 with ``y`` up to where ``x^y`` leaves the range, integer ``y``, results
    either side of the overflow threshold, the subnormal range and its bottom."""
    ordinary = bits_of([2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 0.75, 2.5, -1.5, 1e300, 1e-300])
    values = np.concatenate([np.array(SPECIALS, np.uint64), ordinary])
    sx, sy = np.repeat(values, values.size), np.tile(values, values.size)
    rng = np.random.default_rng(19)
    near_one = 1 + rng.choice([-1, 1], 400) * np.exp2(rng.uniform(-53, -4, 400))
    big_y = rng.uniform(-1, 1, 400) * 745 / np.abs(np.log(near_one))
    base = np.exp2(rng.uniform(-20, 20, 400)) * rng.choice([-1, 1], 400)
    integer = np.round(rng.uniform(-1, 1, 400) * 740 / np.abs(np.log(np.abs(base))))
    edge_x = np.exp2(rng.uniform(-10, 10, 600))
    edge_t = np.concatenate([rng.uniform(709.0, 709.9, 200), rng.uniform(-746, -744, 200),
                             rng.uniform(-745, -707, 200)])
    edge_y = edge_t / np.log(edge_x)
    xs = np.concatenate([near_one, base, edge_x])
    ys = np.concatenate([big_y, integer, edge_y])
    return np.concatenate([sx, bits_of(xs)]), np.concatenate([sy, bits_of(ys)])


def pow_drawn(seed: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Random bits; ``x`` in [0, 4] with ``y`` in [-40, 40]; log-uniform ``x`` with ``y``
    drawn so that ``x^y`` lies anywhere in f64's range; ``x`` near 1 with large ``y``."""
    rng = np.random.default_rng(seed)
    x_log = np.exp2(rng.uniform(-1074, 1024, size))
    y_log = rng.uniform(-745, 709, size) / np.log(x_log)
    near_one = 1 + rng.uniform(-2.0**-20, 2.0**-20, size)
    y_near = rng.uniform(-745, 709, size) / np.log(near_one)
    xs = np.concatenate([rng.integers(0, 2**64, size, dtype=np.uint64),
                         bits_of(rng.uniform(0, 4, size)), bits_of(x_log), bits_of(near_one)])
    ys = np.concatenate([rng.integers(0, 2**64, size, dtype=np.uint64),
                         bits_of(rng.uniform(-40, 40, size)), bits_of(y_log), bits_of(y_near)])
    return xs, ys


def adversarial(name: str) -> np.ndarray:
    return np.concatenate([FUNCTIONS[name][3](), np.array(SPECIALS, np.uint64)])


def drawn(name: str, seed: int, size: int) -> np.ndarray:
    """Random bits anywhere, and ``size`` ordinary inputs of each of the function's kinds."""
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.integers(0, 2**64, size, dtype=np.uint64),
                           bits_of(FUNCTIONS[name][4](rng, size))])


# -- on the reference, against MPFR ------------------------------------------------------

def assert_within_bound(name: str, bits: np.ndarray) -> None:
    """The reference's results are MPFR's, except at most ``1`` ULP on at most one input
    in 2^14 (docs/semantics.md's bound; none in these tests' inputs so far)."""
    function, _, fn, _, _ = FUNCTIONS[name]
    got = run(block(function, bits.size), [bits])[0]
    want = mpfr(fn, bits)
    wrong = np.flatnonzero(got != want)
    assert wrong.size <= bits.size // 2**14 and np.all(
        ulps_apart(got[wrong], want[wrong]) <= 1), f"{name} misrounds " + ", ".join(
        f"{int(bits[at]):016x}: got {int(got[at]):016x}, want {int(want[at]):016x}"
        for at in wrong[:8])


@pytest.mark.fast
def test_the_oracle_rounds_as_binary64():
    """Exact powers of two are themselves; half the least subnormal (a tie) goes to +0,
    a hair above it to the least subnormal; past the largest finite is infinity; a
    subnormal result lands on its grid; an ordinary result is Python's correctly rounded
    reading of its decimal expansion."""
    x = bits_of([-1074, -1075, -1074.99, 1023, 1024, 0, -1072.5])
    got = mpfr(gmpy2.exp2, x).view(np.float64)
    assert got[:6].tolist() == [2.0**-1074, 0.0, 2.0**-1074, 2.0**1023, np.inf, 1.0]
    assert got[6] == 3 * 2.0**-1074  # (2^-1072.5 is 2.83 quanta of 2^-1074)
    assert mpfr(gmpy2.exp, bits_of([1.0])).view(np.float64)[0] == float(
        "2.71828182845904523536028747135266249775724709369995")


@pytest.mark.fast
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_the_reference_is_correctly_rounded_on_adversarial_inputs(name):
    assert_within_bound(name, adversarial(name))


@pytest.mark.fast
@pytest.mark.parametrize("name", list(FUNCTIONS))
@settings(max_examples=20, deadline=None, derandomize=True, database=None)
@given(anywhere=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=64),
       seed=st.integers(0, 2**32 - 1))
def test_the_reference_is_within_the_bound_for_drawn_bits(name, anywhere, seed):
    assert_within_bound(name, np.concatenate([np.array(anywhere, np.uint64),
                                              drawn(name, seed, 64)]))


def assert_atan2_within_bound(y: np.ndarray, x: np.ndarray) -> None:
    got = run(block2(atan2_f64.atan2_f64, y.size), [y, x])[0]
    want = mpfr2(gmpy2.atan2, y, x)
    wrong = np.flatnonzero(got != want)
    assert wrong.size <= y.size // 2**14 and np.all(
        ulps_apart(got[wrong], want[wrong]) <= 1), "atan2 misrounds " + ", ".join(
        f"({int(y[at]):016x}, {int(x[at]):016x}): got {int(got[at]):016x}, "
        f"want {int(want[at]):016x}" for at in wrong[:8])


@pytest.mark.fast
def test_atan2_is_correctly_rounded_on_adversarial_pairs():
    assert_atan2_within_bound(*atan2_pairs())


@pytest.mark.fast
@settings(max_examples=20, deadline=None, derandomize=True, database=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_atan2_is_within_the_bound_for_drawn_pairs(seed):
    assert_atan2_within_bound(*atan2_drawn(seed, 64))


def assert_pow_within_bound(x: np.ndarray, y: np.ndarray) -> None:
    got = run(block2(pow_f64.pow_f64, x.size), [x, y])[0]
    want = mpfr_pow(x, y)
    wrong = np.flatnonzero(got != want)
    assert wrong.size <= x.size // 2**14 and np.all(
        ulps_apart(got[wrong], want[wrong]) <= 1), "pow misrounds " + ", ".join(
        f"({int(x[at]):016x}, {int(y[at]):016x}): got {int(got[at]):016x}, "
        f"want {int(want[at]):016x}" for at in wrong[:8])


@pytest.mark.fast
def test_pow_is_correctly_rounded_on_adversarial_pairs():
    assert_pow_within_bound(*pow_pairs())


@pytest.mark.fast
def test_pow_rounds_exact_results_and_midpoints_right():
    """Every exact ``x^y`` comes out right, not within the bound: representable results
    are themselves, midpoints go to the even neighbour (without the tie rule, about half
    of these go the other way: the pair is within 2^-69 of the midpoint, on either
    side)."""
    x, y = pow_exact()
    got = run(block2(pow_f64.pow_f64, x.size), [x, y])[0]
    want = mpfr_pow(x, y)
    wrong = np.flatnonzero(got != want)
    assert wrong.size == 0, [(x.view(np.float64)[at], y.view(np.float64)[at])
                             for at in wrong[:8]]


@pytest.mark.fast
@settings(max_examples=20, deadline=None, derandomize=True, database=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_pow_is_within_the_bound_for_drawn_pairs(seed):
    assert_pow_within_bound(*pow_drawn(seed, 64))


# -- reference and cpu: the same bytes ---------------------------------------------------

@pytest.fixture(scope="module")
def driver():
    with Driver() as drv:
        yield drv


def op_program(op: Callable, lanes: int) -> ir.Program:
    """``out[i] = op(x[i])`` in f64: the IR operation itself, as a user writes it."""
    k = ir.Kernel(workgroup=(64,))
    x, out = k.read("x", ir.f64), k.output("out", ir.f64, lanes)
    i = k.let("i", ir.global_id())
    out[i] = op(x[i])
    return k.build()


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_reference_and_cpu_give_identical_bytes(driver, name):
    """The IR operation on f64 (the library's function written out by each worker host),
    over random bits, ordinary inputs and the adversarial ones: the same bytes on the
    reference and cpu, in a dispatch and as two steps of a sequence (the second on the
    first's results)."""
    op = FUNCTIONS[name][1]
    values = whole_workgroups(np.concatenate([adversarial(name), drawn(name, 7, 4096)])
                              ).view(np.float64)
    program = op_program(op, values.size)
    want = driver.dispatch(program, [values], backend="reference")[0]
    got = driver.dispatch(program, [values], backend="cpu")[0]
    assert got.tobytes() == want.tobytes(), f"{name}: cpu differs from the reference"
    lanes = values.size  # (the steps are the dispatch's program: no second compile)
    b = SequenceBuilder()
    b.input("x", ir.f64, lanes)
    b.transient("t", ir.f64, lanes)
    b.transient("u", ir.f64, lanes)
    b.step(op_program(op, lanes), {"x": "x", "out": "t"})
    b.step(op_program(op, lanes), {"x": "t", "out": "u"})
    chained = np.random.default_rng(3).standard_normal(lanes) * 4
    outs = {backend: driver.dispatch(b.build(returns=["t", "u"]), [chained],
                                               backend=backend)
            for backend in ("reference", "cpu")}
    for mine, theirs in zip(outs["cpu"], outs["reference"], strict=True):
        assert mine.tobytes() == theirs.tobytes(), f"{name}: a sequence's step differs"


def test_the_cpu_backends_helpers_give_the_same_bytes(driver):
    """A kernel with more library calls than cpu writes out (``INLINE_CALLS``) calls its
    numba helpers, written from the same IR: the reference's bytes still (every unary
    function, atan2 and pow)."""
    from vyre_cpu.mathlib import INLINE_CALLS

    lanes = 1024
    k = ir.Kernel(workgroup=(64,))
    x, out = k.read("x", ir.f64), k.output("out", ir.f64, lanes)
    i = k.let("i", ir.global_id())
    v = k.let("v", x[i])
    assert len(FUNCTIONS) > INLINE_CALLS
    total = v
    for n, name in enumerate(FUNCTIONS):  # (every function, once each)
        total = total + FUNCTIONS[name][1](v * (n + 2.0))
    out[i] = total + ir.atan2(v, total) + ir.pow(v, total * 0.01)
    values = np.random.default_rng(11).standard_normal(lanes) * 50
    program = k.build()
    from vyre_cpu import codegen

    source = codegen.generate(program).source
    assert all(f"mathlib_{name}_f64(" in source for name in [*FUNCTIONS, "atan2", "pow"]), \
        source[:200]
    want = driver.dispatch(program, [values], backend="reference")[0]
    assert driver.dispatch(program, [values], backend="cpu")[0].tobytes() == want.tobytes()


@pytest.mark.parametrize("name", ["atan2", "pow"])
def test_binary_functions_give_identical_bytes_on_reference_and_cpu(driver, name):
    """``ir.atan2`` and ``ir.pow`` on f64 (the library's functions, written out by each
    worker host): the same bytes on the reference and cpu over adversarial and drawn
    pairs (pow's exact ones too), in a dispatch and as a sequence's step."""
    op, sources = {"atan2": (ir.atan2, [atan2_pairs(), atan2_drawn(5, 2048)]),
                   "pow": (ir.pow, [pow_pairs(), pow_exact(), pow_drawn(5, 1024)])}[name]
    first, second = (whole_workgroups(np.concatenate(parts))
                     for parts in zip(*sources, strict=True))
    lanes = first.size
    k = ir.Kernel(workgroup=(64,))
    a, b, out = k.read("a", ir.f64), k.read("b", ir.f64), k.output("out", ir.f64, lanes)
    i = k.let("i", ir.global_id())
    out[i] = op(a[i], b[i])
    program = k.build()
    values = [first.view(np.float64), second.view(np.float64)]
    want = driver.dispatch(program, values, backend="reference")[0]
    assert driver.dispatch(program, values, backend="cpu")[0].tobytes() == want.tobytes()
    seq = SequenceBuilder()
    seq.input("a", ir.f64, lanes)
    seq.input("b", ir.f64, lanes)
    seq.transient("t", ir.f64, lanes)
    seq.step(program, {"a": "a", "b": "b", "out": "t"})
    outs = [driver.dispatch(seq.build(returns=["t"]), values, backend=backend)[0]
            for backend in ("reference", "cpu")]
    assert outs[0].tobytes() == outs[1].tobytes() == want.tobytes()


@pytest.mark.fast
def test_the_cpu_backend_weighs_a_long_function_as_more_calls():
    """f64 sin is about 1400 nodes written out: two calls count as four
    (``vyre_cpu.mathlib.CALL_NODES``) and are still written out; a third sends the kernel
    to the helpers (written out, numba took over a minute for four such calls)."""
    from vyre_cpu import codegen
    from vyre_cpu.mathlib import INLINE_CALLS

    def sines(count: int) -> ir.Program:
        k = ir.Kernel(workgroup=(64,))
        x, out = k.read("x", ir.f64), k.output("out", ir.f64, 64)
        i = k.let("i", ir.global_id())
        acc = k.let("acc", x[i])
        for j in range(count):
            acc += ir.sin(acc * 0.5 + float(j))
        out[i] = acc
        return k.build()

    assert INLINE_CALLS == 4  # (the premise of the counts below)
    assert "mathlib_sin_f64" not in codegen.generate(sines(2)).source
    assert codegen.generate(sines(3)).source.count("mathlib_sin_f64(") >= 3


@pytest.mark.fast
def test_the_cpu_backend_weighs_each_call_by_its_own_types_function():
    """The weight is the called function's own (its operation and operand type): four f32
    ``tanh`` calls (820 nodes each) are written out where f16 ``tanh`` (1054) weighs two."""
    from vyre_cpu import codegen

    def kernel(t: ir.DType, op, count: int) -> ir.Program:
        k = ir.Kernel(workgroup=(64,))
        x, out = k.read("x", t), k.output("out", t, 64)
        i = k.let("i", ir.global_id())
        acc = k.let("acc", x[i])
        for _ in range(count):
            acc += op(acc)
        out[i] = acc
        return k.build()

    assert "mathlib_tanh_f32" not in codegen.generate(kernel(ir.f32, ir.tanh, 4)).source
    assert "mathlib_tanh_f16(" in codegen.generate(kernel(ir.f16, ir.tanh, 3)).source
    assert "mathlib_" not in codegen.generate(kernel(ir.f32, ir.exp, 4)).source
