"""vyre_core.conformance.oracle, the correctly rounded results the exhaustive digests are
recorded from, held to an independent rule: each function's value at 256 bits (MPFR in
its default, unbounded context: the error is far below any f32 or f16 rounding question
these inputs raise), or exact rationals where the result is exact, rounded to nearest
even by this file's own ``round_to`` (subnormal grid, overflow). Over exact cases (exp2
of integers, log2 of powers of two, sqrt of squares, pow's exact families with results
on a midpoint), hard cases (CORE-MATH's atan2f worst cases and sinf exceptions; inputs
whose f64 value lies within 2^-40 of a midpoint, found by search, or on one), random
bits, every f16 input against MPFR in the binary16 context, and the special values
docs/semantics.md states."""

from __future__ import annotations

import math
import subprocess
import sys
from fractions import Fraction

import gmpy2
import numpy as np
import pytest

from vyre_core.conformance import oracle
from vyre_core.conformance.oracle import FORMATS

#: (significand bits, smallest normal exponent, largest exponent) of each format
RULES = {"f32": (24, -126, 127), "f16": (11, -14, 15)}


def round_to(q: Fraction, negative: bool, dtype: str) -> int:
    """The bits of ``q`` (with its sign) rounded to nearest, ties to even, in ``dtype``."""
    p, emin, emax = RULES[dtype]
    kind = FORMATS[dtype].kind
    sign = -1.0 if negative else 1.0
    a = abs(q)
    if a == 0:
        return int(kind(sign * 0.0).view(FORMATS[dtype].bits))
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    quantum = Fraction(2) ** (max(e, emin) - (p - 1))
    whole, rest = divmod(a, quantum)
    n = int(whole) + (rest > quantum / 2 or (rest == quantum / 2 and int(whole) % 2 == 1))
    value = sign * math.inf if n * quantum >= Fraction(2) ** (emax + 1) else \
        sign * float(n * quantum)
    return int(np.array(value, kind).view(FORMATS[dtype].bits))


WIDE = {"exp": gmpy2.exp, "exp2": gmpy2.exp2, "log": gmpy2.log, "log2": gmpy2.log2,
        "sin": gmpy2.sin, "cos": gmpy2.cos, "tan": gmpy2.tan, "tanh": gmpy2.tanh,
        "sqrt": gmpy2.sqrt, "pow": lambda x, y: x**y, "atan2": gmpy2.atan2}


def reference_bits(op: str, dtype: str, *args: float) -> int:
    """``op`` at 256 bits, rounded by ``round_to``: for finite, non-special inputs."""
    with gmpy2.context(gmpy2.context(precision=256)):
        value = WIDE[op](*(gmpy2.mpfr(float(a)) for a in args))
    if gmpy2.is_zero(value):
        return round_to(Fraction(0), gmpy2.is_signed(value), dtype)
    return round_to(Fraction(*value.as_integer_ratio()), value < 0, dtype)


def exact_bits(q: Fraction, dtype: str) -> int:
    return round_to(q, q < 0, dtype)


def oracle_bits(op: str, dtype: str, *args) -> np.ndarray:
    kind = FORMATS[dtype].kind
    return oracle.correctly_rounded_bits(op, dtype, *(np.asarray(a, kind) for a in args))


def assert_reference(op: str, dtype: str, *args: np.ndarray) -> None:
    got = oracle_bits(op, dtype, *args)
    for j in range(len(got)):
        operands = [float(a[j]) for a in args]
        want = reference_bits(op, dtype, *operands)
        assert int(got[j]) == want, f"{op}{tuple(operands)} {dtype}: {int(got[j]):#x}, " \
                                    f"correctly rounded {want:#x}"


# -- exact cases -------------------------------------------------------------------------

@pytest.mark.fast
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_exp2_of_integers_is_exact_with_its_subnormal_tie_and_overflow(dtype):
    """exp2(n) is 2^n, subnormal ones included; just under the smallest subnormal it is a
    tie between +0 and the smallest subnormal (2^-150 in f32: to even, +0); from
    2^(emax + 1) up infinity."""
    p, emin, emax = RULES[dtype]
    n = np.arange(emin - p - 3, emax + 4)
    got = oracle_bits("exp2", dtype, n.astype(np.float64))
    want = [exact_bits(Fraction(2) ** int(k), dtype) for k in n]
    assert got.tolist() == want
    assert int(got[n == emin - p][0]) == 0  # the tie at half the smallest subnormal


@pytest.mark.fast
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_log2_of_powers_of_two_is_their_exponent(dtype):
    p, emin, emax = RULES[dtype]
    n = np.arange(emin - p + 1, emax + 1)
    x = np.ldexp(1.0, n)
    assert oracle_bits("log2", dtype, x).tolist() == [exact_bits(Fraction(int(k)), dtype)
                                                      for k in n]


@pytest.mark.fast
def test_sqrt_of_squares_is_exact():
    rng = np.random.default_rng(3)
    m = rng.integers(1, 1 << 12, 500)
    k = rng.integers(-50, 50, 500)
    x = np.ldexp((m * m).astype(np.float64), 2 * k)
    assert oracle_bits("sqrt", "f32", x).tolist() == [
        exact_bits(Fraction(int(a)) * Fraction(2) ** int(b), "f32")
        for a, b in zip(m, k, strict=True)]


@pytest.mark.fast
def test_pow_exact_families_round_their_midpoints_to_even():
    """(1 + k 2^-12)^2 = 1 + k 2^-11 + k^2 2^-24: for odd k exactly a midpoint of f32 (as
    (1 + 2^-12)^2), settled to even; (1 + k 2^-8)^3 needs 25 bits as well. The exact
    rational, rounded by this file's rule."""
    k = np.arange(1, 4096)
    for x, y in ((1 + k * 2.0**-12, 2.0), (1 + k[:255] * 2.0**-8, 3.0),
                 (1 - k[:2047] * 2.0**-12, 2.0)):
        got = oracle_bits("pow", "f32", x, np.full(len(x), y))
        want = [exact_bits(Fraction(float(a)) ** int(y), "f32") for a in x]
        assert got.tolist() == want
    tie = oracle_bits("pow", "f32", [1 + 2.0**-12], [2.0])
    assert int(tie[0]) == int(np.float32(1 + 2.0**-11).view(np.uint32))


@pytest.mark.fast
def test_f16_pow_exact_families():
    k = np.arange(1, 32)
    x = 1 + k * 2.0**-5
    got = oracle_bits("pow", "f16", x, np.full(len(x), 3.0))
    assert got.tolist() == [exact_bits(Fraction(float(a)) ** 3, "f16") for a in x]


# -- hard cases --------------------------------------------------------------------------

#: CORE-MATH's hard-to-round cases of atan2f for round to nearest (atan2f.wc, the "n"
#: lines: 48 to 52 identical bits after the round bit), (y, x)
ATAN2F_WORST = [("0x1.b8748cp-2", "-0x1.9cf606p23"), ("0x1.b874ecp5", "-0x1.f2a172p23"),
                ("0x1.5f325p3", "-0x1.09e3e8p21"), ("0x1.99a5d6p7", "-0x1.bb5ca2p23"),
                ("0x1.da330cp+8", "-0x1.069bb8p23"), ("0x1.3fe47ap10", "-0x1.4cce5ap23"),
                ("0x1.334de2p+12", "-0x1.d11cc4p23"), ("0x1.9cf606p49", "0x1.b8748cp23"),
                ("0x1.24c4e8p45", "0x1.caab8ap23"), ("0x1.824c46p37", "0x1.96c50cp23"),
                ("0x1.3ee9f4p37", "0x1.7e87d2p23"), ("0x1.c84ca8p21", "-0x1.00b24ap23")]


@pytest.mark.fast
def test_core_math_atan2f_worst_cases():
    y, x = (np.array([float.fromhex(c[j]) for c in ATAN2F_WORST]) for j in (0, 1))
    assert_reference("atan2", "f32", y, x)
    assert_reference("atan2", "f32", -y, x)


#: CORE-MATH's sinf exceptions (as_sinf_database: inputs its fast path cannot round)
SINF_HARD = ["0x1.33333p+13", "0x1.75b8a2p-1", "0x1.4f0654p+0", "0x1.2d97c8p+3"]

#: f32 inputs whose f64 value (numpy's and glibc's alike) rounds onto an f32 midpoint,
#: so that rounding it once is wrong: the baseline run found them on the reference and cpu
BASELINE_HARD = {"exp2": [0x3B429D37, 0xBCF3A937],
                 "log": [0x3C413D3A, 0x41178FEB, 0x4C5D65A5, 0x65D890D3, 0x6F31A8EC],
                 "sin": [0x46199998, 0xC6199998],
                 "cos": [0x5F18B878, 0x6115CB11, 0xDF18B878, 0xE115CB11]}


@pytest.mark.fast
def test_core_math_sinf_exceptions():
    x = np.array([float.fromhex(h) for h in SINF_HARD], np.float32)
    assert_reference("sin", "f32", np.concatenate([x, -x]))


@pytest.mark.fast
@pytest.mark.parametrize("op", list(BASELINE_HARD))
def test_inputs_whose_f64_value_rounds_onto_a_midpoint(op):
    x = np.array(BASELINE_HARD[op], np.uint32).view(np.float32)
    assert_reference(op, "f32", x)
    once = oracle.F64[op](x.astype(np.float64)).astype(np.float32).view(np.uint32)
    assert (once != oracle_bits(op, "f32", x)).all()  # (rounding the f64 value is wrong)


def near_midpoints(op: str, count: int) -> np.ndarray:
    """f32 inputs whose f64 value lies within 2^-40 (relative) of an f32 midpoint: the
    ones the filter leaves to MPFR, found among 2^22 inputs stepping through the bits."""
    x = (np.arange(1 << 22, dtype=np.uint64) * 1021 + 12345).astype(np.uint32).view(
        np.float32)
    with np.errstate(all="ignore"):
        w = getattr(np, op)(x.astype(np.float64))
        r = w.astype(np.float32).astype(np.float64)
        up = np.nextafter(w.astype(np.float32), np.float32(np.inf)).astype(np.float64)
        down = np.nextafter(w.astype(np.float32), np.float32(-np.inf)).astype(np.float64)
        gap = np.minimum(np.abs(w - (r + up) / 2), np.abs(w - (r + down) / 2))
        near = np.isfinite(w) & (w != 0) & (gap <= np.abs(w) * 2.0**-40)
    found = x[near]
    assert len(found) >= 8, f"{op}: only {len(found)} inputs near a midpoint"
    return found[:count]


@pytest.mark.parametrize("op", ["exp", "exp2", "log", "log2", "sin", "cos", "tan", "tanh"])
def test_inputs_near_a_midpoint(op):
    assert_reference(op, "f32", near_midpoints(op, 40))


@pytest.mark.parametrize("op", oracle.OPS)
def test_random_bits_against_the_wide_value(op):
    """The filter's decisions: random f32 bits (finite, results finite and nonzero)."""
    rng = np.random.default_rng(11)
    args = [rng.integers(0, 1 << 32, 3000, dtype=np.uint64).astype(np.uint32).view(
        np.float32) for _ in range(2 if op in oracle.BINARY else 1)]
    if op == "pow":  # (a base near 1, so that results are ordinary numbers)
        args[0] = rng.uniform(0.5, 2.0, 3000).astype(np.float32)
        args[1] = rng.uniform(-150.0, 150.0, 3000).astype(np.float32)
    with np.errstate(all="ignore"):
        w = oracle.F64[op](*(a.astype(np.float64) for a in args))
    keep = np.isfinite(w) & (w != 0) & np.all([np.isfinite(a) for a in args], axis=0)
    assert_reference(op, "f32", *(a[keep][:400] for a in args))


# -- f16: every input against MPFR ------------------------------------------------------

@pytest.mark.parametrize("op", oracle.UNARY)
def test_every_f16_input_against_mpfr_in_the_binary16_context(op):
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    got = oracle.correctly_rounded_bits(op, "f16", x)
    direct = oracle.mpfr(op, "f16", x.astype(np.float64))
    want = direct.view(np.uint16).copy()
    want[np.isnan(direct)] = 0x7E00
    assert np.flatnonzero(got != want).tolist() == []
    # (and the binary16 context itself against this file's rule, on a sample)
    sample = x[np.isfinite(x)][::97]
    with np.errstate(all="ignore"):
        w = oracle.F64[op](sample.astype(np.float64))
    sample = sample[np.isfinite(w) & (w != 0)]
    assert_reference(op, "f16", sample)


@pytest.mark.parametrize("op", oracle.BINARY)
def test_f16_pairs_against_mpfr(op):
    rng = np.random.default_rng(5)
    a, b = (rng.integers(0, 1 << 16, 20000).astype(np.uint16).view(np.float16)
            for _ in range(2))
    got = oracle.correctly_rounded_bits(op, "f16", a, b)
    direct = oracle.mpfr(op, "f16", a.astype(np.float64), b.astype(np.float64))
    want = direct.view(np.uint16).copy()
    want[np.isnan(direct)] = 0x7E00
    assert np.flatnonzero(got != want).tolist() == []


# -- special values (docs/semantics.md, "Floats") -----------------------------------------

INF, NAN = math.inf, math.nan

#: (op, operands, result) as semantics.md states them; pi, pi/2, pi/4 and 3pi/4 rounded
SPECIAL = [
    ("exp", (INF,), INF), ("exp", (-INF,), 0.0), ("exp", (0.0,), 1.0), ("exp", (-0.0,), 1.0),
    ("log", (INF,), INF), ("log", (0.0,), -INF), ("log", (-0.0,), -INF), ("log", (-1.0,), NAN),
    ("log", (-INF,), NAN), ("sin", (INF,), NAN), ("sin", (-INF,), NAN), ("sin", (0.0,), 0.0),
    ("sin", (-0.0,), -0.0), ("cos", (INF,), NAN), ("cos", (-0.0,), 1.0),
    ("tan", (INF,), NAN), ("tan", (-INF,), NAN), ("tan", (0.0,), 0.0), ("tan", (-0.0,), -0.0),
    ("tanh", (INF,), 1.0), ("tanh", (-INF,), -1.0), ("tanh", (0.0,), 0.0),
    ("tanh", (-0.0,), -0.0), ("exp2", (INF,), INF), ("exp2", (-INF,), 0.0),
    ("log2", (0.0,), -INF), ("log2", (-0.0,), -INF), ("log2", (-2.0,), NAN),
    ("sqrt", (-0.0,), -0.0), ("sqrt", (-1.0,), NAN), ("sqrt", (INF,), INF),
    ("pow", (NAN, 0.0), 1.0), ("pow", (NAN, -0.0), 1.0), ("pow", (1.0, NAN), 1.0),
    ("pow", (1.0, INF), 1.0), ("pow", (-1.0, INF), 1.0), ("pow", (-1.0, -INF), 1.0),
    ("pow", (NAN, 2.0), NAN), ("pow", (2.0, NAN), NAN), ("pow", (-2.0, 0.5), NAN),
    ("pow", (-2.0, 3.0), -8.0), ("pow", (-0.0, -1.0), -INF), ("pow", (-2.0, 2.0), 4.0),
    ("pow", (0.0, 3.0), 0.0), ("pow", (-0.0, 3.0), -0.0), ("pow", (-0.0, 2.0), 0.0),
    ("pow", (0.0, -3.0), INF), ("pow", (-0.0, -2.0), INF), ("pow", (2.0, INF), INF),
    ("pow", (0.5, INF), 0.0), ("pow", (2.0, -INF), 0.0), ("pow", (0.5, -INF), INF),
    ("atan2", (0.0, 0.0), 0.0), ("atan2", (-0.0, 0.0), -0.0), ("atan2", (0.0, -0.0), math.pi),
    ("atan2", (-0.0, -0.0), -math.pi), ("atan2", (1.0, 0.0), math.pi / 2),
    ("atan2", (-1.0, -0.0), -math.pi / 2), ("atan2", (INF, INF), math.pi / 4),
    ("atan2", (-INF, INF), -math.pi / 4), ("atan2", (INF, -INF), 3 * math.pi / 4),
    ("atan2", (-INF, -INF), -3 * math.pi / 4), ("atan2", (1.0, -INF), math.pi),
    ("atan2", (-1.0, -INF), -math.pi), ("atan2", (1.0, INF), 0.0),
    ("atan2", (-1.0, INF), -0.0), ("atan2", (NAN, 1.0), NAN), ("atan2", (1.0, NAN), NAN),
]


@pytest.mark.fast
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_special_values_as_semantics_states_them(dtype):
    kind = FORMATS[dtype].kind
    for op, operands, result in SPECIAL:
        got = oracle_bits(op, dtype, *([v] for v in operands))
        want = np.array([result], kind).view(FORMATS[dtype].bits)
        if math.isnan(result):
            want[:] = FORMATS[dtype].nan
        assert int(got[0]) == int(want[0]), f"{op}{operands} {dtype}: {int(got[0]):#x}"


@pytest.mark.fast
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_every_nan_is_the_canonical_one(dtype):
    """Whatever NaN an input carries (sign, payload) or the function makes."""
    fmt = FORMATS[dtype]
    nans = np.array([fmt.nan, fmt.nan | (1 << (8 * np.dtype(fmt.bits).itemsize - 1)),
                     fmt.nan + 1, fmt.nan - (1 << 4)], fmt.bits).view(fmt.kind)
    for op in oracle.UNARY:
        assert set(oracle.correctly_rounded_bits(op, dtype, nans).tolist()) == {fmt.nan}
    below = np.array([-1.0, -3.0, -INF, -2.0**-20], fmt.kind)
    assert set(oracle.correctly_rounded_bits("log", dtype, below).tolist()) == {fmt.nan}


@pytest.mark.processes
def test_the_product_imports_without_gmpy2_and_decided_inputs_need_none():
    """gmpy2 is the ``conform`` extra's: vyre_core.conformance, the CLI and the check mode
    import without it, and the oracle reaches for it only where the filter leaves an
    input, saying then how to install it."""
    code = ("import sys; sys.modules['gmpy2'] = None\n"
            "import numpy as np\n"
            "import vyre_core.conformance, vyre_core.cli.conform, vyre_core.errors\n"
            "from vyre_core.conformance import all_inputs, oracle\n"
            "print(oracle.correctly_rounded_bits('exp2', 'f32', np.arange(-5.0, 5.0))[0])\n"
            "try:\n"
            "    oracle.correctly_rounded('pow', 'f32', np.array([1 + 2.0**-12]), "
            "np.array([2.0]))\n"
            "except vyre_core.errors.InvalidConfigError as exc:\n"
            "    assert \"pip install 'vyre[conform]'\" in str(exc), exc\n"
            "    print('needs gmpy2')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(0x3D000000), "needs", "gmpy2"]
