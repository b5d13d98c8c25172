"""vyre_core.mathlib.ff, the float-float kit of the correctly rounded math library
(docs/design-42.md, section 2.2), held to its rules against exact rationals: the
error-free transforms give the exact result as a pair whose first part is the rounded
one; the operations on pairs stay within their relative errors and return normalized
pairs; ``round_ff`` is the correctly rounded f32 and f16 of ``2^scale * (hi + lo)``,
subnormal results and overflow included; ``decided`` never says yes where a rounding
boundary lies within ``err``. On the reference in this process, over random bit patterns
(hypothesis) and adversarial ones (cancellation, ties, powers of two, full significands,
every subnormal and overflow boundary); then the same programs give the same bytes on
cpu and wgpu."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vyre_core import Driver, ir
from vyre_core.mathlib import ff
from vyre_core.mathlib.ff import FF
from vyre_reference import run

N = 256  # lanes per dispatch (drawn values repeated up to it)
U = Fraction(1, 2**24)  # f32's unit roundoff
F32, I32, F16 = ir.f32, ir.i32, ir.f16

#: (the rules, written out here: the test states them itself)
FORMATS = {"f32": (24, -126, 127, np.float32), "f16": (11, -14, 15, np.float16)}


# -- exact arithmetic --------------------------------------------------------------------

def exact(x: np.floating) -> Fraction:
    return Fraction(float(x))


def correctly_rounded(q: Fraction, negative: bool, fmt: str) -> np.floating:
    """``q`` rounded to nearest, ties to even, in ``fmt``: on the subnormal grid below the
    normal range, infinity from 2^(emax+1) (after rounding) up; a zero keeps the sign
    the value had."""
    p, emin, emax, kind = FORMATS[fmt]
    sign = -1 if negative else 1
    if q == 0:
        return kind(-0.0 if negative else 0.0)
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    quantum = Fraction(2) ** (max(e, emin) - (p - 1))
    whole, rest = divmod(a, quantum)
    n = int(whole) + (rest > quantum / 2 or (rest == quantum / 2 and int(whole) % 2 == 1))
    if n * quantum >= Fraction(2) ** (emax + 1):
        return kind(sign * np.inf)
    return kind(sign * float(n * quantum))


def f32_bits(values) -> np.ndarray:
    return np.asarray(values, np.float32).view(np.uint32)


def floats(bits) -> np.ndarray:
    return np.resize(np.asarray(bits, np.uint32), N).view(np.float32)


# -- programs: one block, lane by lane ---------------------------------------------------

def program(block: Callable, inputs: list[ir.DType], outputs: list[ir.DType]) -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    buffers = [k.read(f"in{j}", t) for j, t in enumerate(inputs)]
    outs = [k.output(f"out{j}", t, N) for j, t in enumerate(outputs)]
    i = k.let("i", ir.global_id())
    values = [k.let(f"v{j}", b[i]) for j, b in enumerate(buffers)]
    for out, value in zip(outs, block(k, *values), strict=True):
        out[i] = value
    return k.build()


def pair(result: FF) -> tuple[ir.Val, ir.Val]:
    return result.hi, result.lo


PROGRAMS = {
    "two_sum": program(lambda k, a, b: pair(ff.two_sum(k, a, b)), [F32] * 2, [F32] * 2),
    "fast_two_sum": program(lambda k, a, b: pair(ff.fast_two_sum(k, a, b)), [F32] * 2,
                            [F32] * 2),
    "two_prod": program(lambda k, a, b: pair(ff.two_prod(k, a, b)), [F32] * 2, [F32] * 2),
    "split": program(lambda k, a: pair(ff.split(k, a)), [F32], [F32] * 2),
    "add_float": program(lambda k, xh, xl, y: pair(ff.add_float(k, FF(xh, xl), y)),
                         [F32] * 3, [F32] * 2),
    "mul_float": program(lambda k, xh, xl, y: pair(ff.mul_float(k, FF(xh, xl), y)),
                         [F32] * 3, [F32] * 2),
    **{name: program(lambda k, xh, xl, yh, yl, op=op: pair(op(k, FF(xh, xl), FF(yh, yl))),
                     [F32] * 4, [F32] * 2)
       for name, op in (("add", ff.add), ("mul", ff.mul), ("div", ff.div))},
    "round_ff": program(lambda k, hi, lo, scale: (
        ff.round_ff(k, FF(hi, lo), scale), ff.round_ff(k, FF(hi, lo), scale, ir.f16)),
        [F32, F32, I32], [F32, F16]),
    "decided": program(lambda k, hi, lo, err, scale: (
        ir.select(ff.decided(k, FF(hi, lo), err, scale), ir.u32(1), ir.u32(0)),
        ir.select(ff.decided(k, FF(hi, lo), err, scale, ir.f16), ir.u32(1), ir.u32(0))),
        [F32, F32, F32, I32], [ir.u32, ir.u32]),
}

#: Relative error bounds of the operations on pairs, in units of u^2 (the docstrings').
BOUNDS = {"add_float": 2, "add": Fraction(3) / (1 - 4 * U), "mul_float": 3, "mul": 7,
          "div": 16}


def on_reference(name: str, *inputs: np.ndarray) -> list[np.ndarray]:
    return run(PROGRAMS[name], list(inputs))


# -- inputs ------------------------------------------------------------------------------

def moderate(rng: np.random.Generator, count: int = N, low: int = -40,
             high: int = 40) -> np.ndarray:
    """f32s of random significand and sign, exponents in [low, high]."""
    exponent = rng.integers(low + 127, high + 128, count, dtype=np.uint32)
    bits = (rng.integers(0, 2, count, dtype=np.uint32) << 31) | (exponent << 23) \
        | rng.integers(0, 1 << 23, count, dtype=np.uint32)
    return bits.view(np.float32)


def normalized(hi: np.ndarray, lo_fraction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs ``hi + lo`` with ``lo`` a fraction (in [-1, 1]) of ``ulp(hi) / 2``, then
    normalized with an exact fast two-sum in f32."""
    lo = (hi * np.float32(2.0**-24) * lo_fraction.astype(np.float32)).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        s = (hi + lo).astype(np.float32)
        return s, (lo - (s - hi)).astype(np.float32)


def adversarial_sums() -> tuple[np.ndarray, np.ndarray]:
    one_below = np.nextafter(np.float32(1), np.float32(0))
    a = [1, 1, -1, 2.0**20, one_below, 3, 2.0**-100, 1, 2.0**100, 1.5, -(2.0**-20)]
    b = [2.0**-30, -(2.0**-25), 2.0**-24, -(2.0**-5), 2.0**-25, -3, -(2.0**-125), -one_below,
         -(2.0**75), 2.0**-24 * 1.5, 2.0**-44]
    return floats(f32_bits(a)), floats(f32_bits(b))


def full_significands() -> np.ndarray:
    """Significands all ones, alternating, one bit; exponents near 0 and the far ends."""
    mantissas = np.array([0x7FFFFF, 0x555555, 0x2AAAAA, 0, 1, 0x400000, 0x7FF000, 0xFFF],
                         np.uint32)
    exponents = np.array([127, 128, 100, 150, 1, 190, 254], np.uint32)
    grid = (exponents[:, None] << 23 | mantissas[None, :]).reshape(-1)
    return floats(np.concatenate([grid, grid | 0x80000000]))


# -- the error-free transforms -----------------------------------------------------------

def check_exact(name: str, a: np.ndarray, b: np.ndarray, op: Callable) -> None:
    hi, lo = on_reference(name, a, b)
    with np.errstate(over="ignore"):
        rounded = op(a, b).astype(np.float32)
    assert hi.tobytes() == rounded.tobytes(), f"{name}: the first part is not the rounding"
    for j in range(N):
        want = op(exact(a[j]), exact(b[j]))
        assert exact(hi[j]) + exact(lo[j]) == want, (
            f"{name}({a[j]!r}, {b[j]!r}) = {hi[j]!r} + {lo[j]!r}, not exact")


@pytest.mark.fast
def test_two_sum_is_exact_on_adversarial_and_random_sums():
    check_exact("two_sum", *adversarial_sums(), lambda x, y: x + y)
    rng = np.random.default_rng(1)
    check_exact("two_sum", moderate(rng), moderate(rng, low=-70, high=70), lambda x, y: x + y)


@pytest.mark.fast
@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=2, max_size=64))
def test_two_sum_is_exact_for_any_finite_bits(drawn):
    bits = np.resize(np.asarray(drawn, np.uint32), N)
    high = (bits & 0x7F800000) >= 0x7F000000  # (exponents 254 and 255: finite, below 2^126)
    bits[high] = (bits[high] & 0x807FFFFF) | 0x7E800000
    a, b = bits.view(np.float32), np.roll(bits, 1).view(np.float32)
    check_exact("two_sum", a, b, lambda x, y: x + y)


@pytest.mark.fast
def test_fast_two_sum_is_exact_when_the_first_is_the_larger():
    a, b = adversarial_sums()
    first = np.where(np.abs(a) >= np.abs(b), a, b)
    second = np.where(np.abs(a) >= np.abs(b), b, a)
    check_exact("fast_two_sum", first, second, lambda x, y: x + y)
    rng = np.random.default_rng(2)
    big, small = moderate(rng, low=0, high=30), moderate(rng, low=-40, high=0)
    check_exact("fast_two_sum", big, small, lambda x, y: x + y)


@pytest.mark.fast
def test_two_prod_is_exact_on_full_significands_and_random_products():
    values = full_significands()
    a, b = values, np.roll(values, 7)
    with np.errstate(over="ignore", under="ignore"):
        product = np.abs(a.astype(np.float64) * b)
    b = np.where((product >= 2.0**-102) & (product < 2.0**127), b, np.float32(1))
    check_exact("two_prod", a, b, lambda x, y: x * y)
    rng = np.random.default_rng(3)
    check_exact("two_prod", moderate(rng, low=-50, high=50),
                moderate(rng, low=-50, high=50), lambda x, y: x * y)


@pytest.mark.fast
@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=2, max_size=64))
def test_two_prod_is_exact_wherever_nothing_overflows_or_underflows(drawn):
    """Exponents drawn in [-50, 50] for each factor: the product's error stays normal."""
    bits = np.resize(np.asarray(drawn, np.uint32), N)
    exponent = ((bits >> 23) & 0xFF) % 101 + 77
    bits = (bits & 0x807FFFFF) | (exponent << 23)
    a, b = bits.view(np.float32), np.roll(bits, 3).view(np.float32)
    check_exact("two_prod", a, b, lambda x, y: x * y)


@pytest.mark.fast
def test_a_split_gives_two_halves_whose_products_are_exact():
    """For every finite value the halves sum to it; the products of two halves are exact
    wherever they stay in the normal range."""
    values = np.concatenate([full_significands()[: N // 2],
                             moderate(np.random.default_rng(4), N // 2)])
    hi, lo = on_reference("split", values)
    for j in range(N):
        assert exact(hi[j]) + exact(lo[j]) == exact(values[j])
        for x, y in ((hi[j], hi[j]), (hi[j], lo[j]), (lo[j], lo[j])):
            want = exact(x) * exact(y)
            if want == 0 or 2**-126 <= abs(want) < 2**127:
                assert exact(np.float32(x * y)) == want, (values[j], x, y)


# -- the operations on pairs -------------------------------------------------------------

def check_within(name: str, x: tuple, y: tuple | np.ndarray) -> None:
    """The result of ``name`` is normalized and within its bound of the exact result."""
    ys = y if isinstance(y, tuple) else (y,)
    hi, lo = on_reference(name, *x, *ys)
    op = {"add_float": lambda a, b: a + b, "add": lambda a, b: a + b,
          "mul_float": lambda a, b: a * b, "mul": lambda a, b: a * b,
          "div": lambda a, b: a / b}[name]
    bound = BOUNDS[name] * U * U
    for j in range(N):
        xv = exact(x[0][j]) + exact(x[1][j])
        yv = sum((exact(part[j]) for part in ys), Fraction(0))
        want, got = op(xv, yv), exact(hi[j]) + exact(lo[j])
        assert abs(got - want) <= bound * abs(want), (
            f"{name}: {float(xv)!r} and {float(yv)!r} gave {hi[j]!r} + {lo[j]!r}, "
            f"{float(abs(got - want) / abs(want) / (U * U)) if want else 'inf'} u^2 off")
        assert np.float32(hi[j] + lo[j]) == hi[j], f"{name}: not normalized at {j}"


def random_pairs(rng: np.random.Generator, low: int = -30,
                 high: int = 30) -> tuple[np.ndarray, np.ndarray]:
    return normalized(moderate(rng, low=low, high=high), rng.uniform(-1, 1, N))


def cancelling_pairs(rng: np.random.Generator) -> tuple[tuple, tuple]:
    """``y`` close to ``-x``: the high parts cancel, the low parts decide."""
    xh, xl = random_pairs(rng)
    nudge = rng.integers(-3, 4, N).astype(np.float32) * np.float32(2.0**-30)
    yh = (-xh * (np.float32(1) + nudge)).astype(np.float32)
    yh, yl = normalized(yh, rng.uniform(-1, 1, N))
    return (xh, xl), (yh, yl)


@pytest.mark.fast
@pytest.mark.parametrize("name", ["add", "mul", "div"])
def test_a_pair_operation_is_within_its_bound(name):
    rng = np.random.default_rng(5)
    check_within(name, random_pairs(rng), random_pairs(rng))
    check_within(name, *cancelling_pairs(rng))
    tie = np.float32(1), np.float32(2.0**-24)  # (normalized: 1 + ulp/2 rounds to 1)
    ones = (np.full(N, tie[0]), np.where(np.arange(N) % 2 == 0, tie[1], -tie[1]))
    check_within(name, ones, random_pairs(rng))


@pytest.mark.fast
@pytest.mark.parametrize("name", ["add_float", "mul_float"])
def test_a_pair_and_float_operation_is_within_its_bound(name):
    rng = np.random.default_rng(6)
    check_within(name, random_pairs(rng), moderate(rng, low=-30, high=30))
    (xh, xl), (yh, _) = cancelling_pairs(rng)
    check_within(name, (xh, xl), yh)


@pytest.mark.fast
@settings(max_examples=20, deadline=None, derandomize=True, database=None)
@given(st.sampled_from(["add", "mul", "div"]), st.integers(0, 2**32 - 1))
def test_pair_operations_hold_their_bounds_on_drawn_pairs(name, seed):
    rng = np.random.default_rng(seed)
    check_within(name, random_pairs(rng), random_pairs(rng))


# -- the final rounding ------------------------------------------------------------------

def check_rounding(hi: np.ndarray, lo: np.ndarray, scale: np.ndarray) -> None:
    f32_out, f16_out = on_reference("round_ff", hi, lo, scale.astype(np.int32))
    for j in range(N):
        # (past +-2000 the value is 0 or infinity for any finite pair: no huge powers)
        power = min(max(int(scale[j]), -2000), 2000)
        q = (exact(hi[j]) + exact(lo[j])) * Fraction(2) ** power
        negative = bool(np.signbit(hi[j]))
        for fmt, got in (("f32", f32_out[j]), ("f16", f16_out[j])):
            want = correctly_rounded(q, negative, fmt)
            assert got.tobytes() == want.tobytes(), (
                f"round_ff to {fmt} of 2^{scale[j]} * ({hi[j]!r} + {lo[j]!r}) gave {got!r}, "
                f"want {want!r}")


def boundary_cases() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Values on and next to every kind of boundary of both formats: midpoints of the
    subnormal grids (n + 1/2 quanta, lo 0 or of either sign), half the least subnormal,
    the least normal and just below it, the overflow thresholds (the midpoint between
    the largest finite value and the next power of two rounds to infinity), f16's
    largest (65504, 65520), ties between normal neighbours, and zeros of both signs."""
    cases: list[tuple[float, float, int]] = []
    for quantum in (-149, -24):  # f32's and f16's subnormal quanta
        for n in (0, 1, 2, 3, 6, 1023, 1024, 2**22, 2**23 - 1):
            for lo in (0.0, 2.0**-40, -(2.0**-40)):
                cases.append((n + 0.5, lo * max(n, 1), quantum))
                cases.append((-(n + 0.5), -lo * max(n, 1), quantum))
            cases.append((n, 0.0, quantum))
    for hi, lo, scale in (
            # f32's overflow threshold: the midpoint 2^128 - 2^103 (ties to even: inf),
            # above and below it, the largest finite, the next power of two
            (2.0, -(2.0**-24), 127), (2.0, 2.0**-40 - 2.0**-24, 127),
            (2.0 - 2.0**-23, 2.0**-24 - 2.0**-40, 127), (2.0 - 2.0**-23, 0.0, 127),
            (1.0, 0.0, 128), (2.0, 0.0, 127),
            # f16's: 65504, the midpoint 65520 and beside it, 65536
            (2.0 - 2.0**-10, 0.0, 15), (2.0 - 2.0**-11, 0.0, 15),
            (2.0 - 2.0**-11, 2.0**-40, 15), (2.0 - 2.0**-11, -(2.0**-40), 15), (1.0, 0.0, 16),
            # ties between normal neighbours, resolved by lo (f32: hi is the answer)
            (1.0, 2.0**-24, 0), (1.0, -(2.0**-25), 0), (1 + 2.0**-22, 2.0**-24, 0),
            (1 + 2.0**-22, -(2.0**-24), 0), (1.0 + 2.0**-11, 0.0, 0),
            (1.0 + 3 * 2.0**-11, 0.0, 0), (1.0 + 2.0**-11, 2.0**-40, 0),
            (1.0 + 2.0**-11, -(2.0**-40), 0), (1 + 2.0**-10, 0.0, -14),
            # the least normal and just below it, half the least subnormal and next to it
            (2.0**-1, 0.0, -125), (1.0, 0.0, -126), (2.0, -(2.0**-24), -127),
            (1.5, 0.0, -150), (1.0, 2.0**-30, -150), (1.0, 0.0, -150), (1.0, -(2.0**-30), -150),
            (1.0, 0.0, -25), (1.0, 2.0**-30, -25), (1.5, 0.0, -25),
            # subnormal and zero hi scaled up into the normal ranges, past infinity's
            (2.0**-149, 0.0, 149), (2.0**-140, 0.0, 140), (3 * 2.0**-149, 0.0, 2),
            (2.0**-127 + 2.0**-149, 0.0, 140), (0.0, 0.0, 255), (0.0, 0.0, 143),
            # zeros, far past both ends, and scales at i32's ends
            (0.0, 0.0, 0), (-0.0, 0.0, 5), (1.0, 0.0, 400), (1.0, 0.0, -400),
            (2.0, 0.0, 2**31 - 1), (0.5, 0.0, -(2**31)), (0.0, 0.0, -(2**31))):
        cases.append((hi, lo, scale))
        cases.append((-hi, -lo, scale))
    hi, lo, scale = zip(*cases, strict=True)
    assert len(cases) <= N
    return (np.resize(np.asarray(hi, np.float32), N), np.resize(np.asarray(lo, np.float32), N),
            np.resize(np.asarray(scale, np.int32), N))


@pytest.mark.fast
@settings(max_examples=10, deadline=None, derandomize=True, database=None)
@given(st.integers(0, 2**32 - 1))
def test_round_ff_is_correct_for_a_subnormal_hi(seed):
    """``hi`` subnormal (then ``lo`` is 0), scaled into every range of both formats."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(1, 1 << 23, N, dtype=np.uint32) | (rng.integers(0, 2, N,
                                                                        dtype=np.uint32) << 31)
    check_rounding(bits.view(np.float32), np.zeros(N, np.float32), rng.integers(0, 300, N))


@pytest.mark.fast
def test_round_ff_is_correct_on_every_boundary():
    hi, lo, scale = boundary_cases()
    assert np.all(np.float32(hi + lo) == hi), "a boundary case is not a normalized pair"
    check_rounding(hi, lo, scale)


@pytest.mark.fast
@settings(max_examples=30, deadline=None, derandomize=True, database=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([(-60, 60), (-160, -120), (-40, -10),
                                                   (100, 140), (-300, 300)]),
       st.sampled_from([(-20, 20), (-126, -100)]))
def test_round_ff_is_correct_on_drawn_pairs_and_scales(seed, scales, exponents):
    """Random pairs (ties among them: ``lo`` exactly half an ulp, of either sign; ``lo``
    subnormal where ``hi`` is small) and scales reaching the subnormal ranges, overflow
    and beyond both."""
    rng = np.random.default_rng(seed)
    hi, lo = normalized(moderate(rng, low=exponents[0], high=exponents[1]),
                        rng.uniform(-1, 1, N))
    tie = rng.integers(0, 4, N) == 0
    lo = np.where(tie, np.float32(0.5) * np.spacing(np.abs(hi)) * np.sign(rng.uniform(-1, 1, N)),
                  lo).astype(np.float32)
    lo = np.where(np.float32(hi + lo) == hi, lo, np.float32(0))  # (a tie rounding up: none)
    scale = rng.integers(*scales, N)
    check_rounding(hi, lo, scale)


# -- the rounding test -------------------------------------------------------------------

@pytest.mark.fast
@settings(max_examples=20, deadline=None, derandomize=True, database=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0, -140, -20, -130]))
def test_decided_is_never_wrong_and_mostly_decides(seed, scale):
    """Where ``decided`` says yes, the correctly rounded results of the two ends of the
    interval (``err`` shrunk by the rounding of ``lo +- err``) are the same. With
    ``err = 2^-44 |hi|`` at scale 0 in f32: random pairs are decided, and pairs a quarter
    of ``err`` from a tie never are."""
    rng = np.random.default_rng(seed)
    hi, lo = random_pairs(rng, low=-10, high=10)
    err = (np.abs(hi) * np.float32(2.0**-44)).astype(np.float32)
    near = rng.integers(0, 2, N) == 0
    tie = np.float32(0.5) * np.spacing(np.abs(hi)) * np.sign(hi)
    lo = np.where(near, (tie - np.sign(hi) * err * np.float32(0.25)).astype(np.float32), lo)
    f32_yes, f16_yes = on_reference("decided", hi, lo, err, np.full(N, scale, np.int32))
    for fmt, yes in (("f32", f32_yes), ("f16", f16_yes)):
        for j in np.flatnonzero(yes):
            x = exact(hi[j]) + exact(lo[j])
            slack = exact(err[j]) * (1 - Fraction(1, 2**20))
            ends = [correctly_rounded((x + d) * Fraction(2) ** scale, bool(hi[j] < 0), fmt)
                    for d in (-slack, slack)]
            assert ends[0].tobytes() == ends[1].tobytes(), (
                f"decided for {fmt}: {hi[j]!r} + {lo[j]!r} +- {err[j]!r} at 2^{scale}, but "
                f"its ends round to {ends[0]!r} and {ends[1]!r}")
    assert f32_yes[~near].mean() > 0.99, f"decided says no far from every boundary at 2^{scale}"
    if scale in (0, -20):  # (results in f32's normal range: the near lanes are near a tie)
        assert not f32_yes[near].any(), "decided says yes a quarter of err from a tie"
    assert f16_yes.mean() > 0.95, f"decided says no for f16 at 2^{scale}"


# -- the same bytes on every backend -----------------------------------------------------

@pytest.fixture(scope="module")
def driver():
    with Driver() as drv:
        yield drv


def inputs_for(name: str, rng: np.random.Generator) -> list[np.ndarray]:
    if name in ("two_sum", "fast_two_sum", "two_prod"):
        return [moderate(rng), moderate(rng)]
    if name == "split":
        return [moderate(rng)]
    if name in ("add_float", "mul_float"):
        return [*random_pairs(rng), moderate(rng)]
    if name == "round_ff":
        hi, lo, _ = boundary_cases()
        return [hi, lo, rng.integers(-160, 140, N).astype(np.int32)]
    if name == "decided":
        hi, lo = random_pairs(rng)
        return [hi, lo, (np.abs(hi) * np.float32(2.0**-44)).astype(np.float32),
                rng.integers(-140, 10, N).astype(np.int32)]
    return [*random_pairs(rng), *random_pairs(rng)]


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_every_block_gives_the_same_bytes_on_every_backend(driver, name):
    rng = np.random.default_rng(7)
    inputs = inputs_for(name, rng)
    want = driver.dispatch(PROGRAMS[name], inputs, backend="reference")
    for backend in ("cpu", "wgpu"):
        got = driver.dispatch(PROGRAMS[name], inputs, backend=backend)
        for w, g in zip(want, got, strict=True):
            assert g.tobytes() == w.tobytes(), f"{name} on {backend}"
