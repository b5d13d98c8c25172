"""vyre_core.mathlib.pow, ``x^y`` (C's ``pow``) from the math library's pieces (docs/design-42.md,
section 8), held to MPFR's correctly rounded results (gmpy2's ``x**y`` in the binary32 and
binary16 contexts, C's special values: MPFR follows Annex F) bit for bit:

- f16 on the reference in this process: every f16 ``x`` with exponents that make exact
  results and midpoints (2, 3, 1.5, ...), every f16 ``y`` with bases around 1 and the
  special ones, exact families listed by hand, drawn bit pairs;
- f32 on the reference: the special values, exact results and midpoints of CORE-MATH's
  families, results at overflow and in the subnormal range, drawn bits, and the pairs the
  fast path leaves undecided (``F32_UNDECIDED``, found by tools/pow_hard_pairs.py), which
  its accurate path decides;
- ``ir.pow`` through a Driver is MPFR's on every backend in f32 and f16, in a dispatch and
  in a sequence's step, and the cpu backend's helpers give the same bytes.

(``vyre conform --exhaustive --all-inputs --op pow`` checks every f16 pair, and the f32
sample of 2^24 pairs.)"""

from __future__ import annotations

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mathlib_cases import BINARY16, BINARY32, CANONICAL_NAN, apply, op_program

from vyre_core import Driver, SequenceBuilder, ir
from vyre_core.mathlib import pow as pow_module
from vyre_reference import run

FORMATS = {32: (np.float32, np.uint32, ir.f32, ir.u32, pow_module.pow_f32),
           16: (np.float16, np.uint16, ir.f16, ir.u16, pow_module.pow_f16)}


def correct(xb: np.ndarray, yb: np.ndarray, width: int) -> np.ndarray:
    """MPFR's ``x**y`` of each pair of bits, rounded once to the format, as bits (NaN the
    canonical one: stores canonicalize)."""
    floats, unsigned = FORMATS[width][:2]
    out = np.empty(xb.size, unsigned)
    xs, ys = xb.astype(unsigned).view(floats), yb.astype(unsigned).view(floats)
    with gmpy2.context(BINARY32 if width == 32 else BINARY16):
        for at, (x, y) in enumerate(zip(xs.tolist(), ys.tolist(), strict=True)):
            result = floats(float(gmpy2.mpfr(x) ** gmpy2.mpfr(y)))
            out[at] = CANONICAL_NAN[width] if np.isnan(result) else result.view(unsigned)
    return out


def block(function, width: int, lanes: int) -> ir.Program:
    """``out[i]`` = the bits of ``function`` of the bits of ``x[i]`` and ``y[i]``."""
    _, _, floats, unsigned, _ = FORMATS[width]
    k = ir.Kernel(workgroup=(64,))
    xs, ys = k.read("x", unsigned), k.read("y", unsigned)
    out = k.output("out", unsigned, lanes)
    i = k.let("i", ir.global_id())
    x, y = k.let("vx", ir.bitcast(xs[i], floats)), k.let("vy", ir.bitcast(ys[i], floats))
    out[i] = ir.bitcast(function(k, x, y), unsigned)
    return k.build()


def check(width: int, x, y) -> None:
    """The function's IR on the reference gives MPFR's bits for every pair (the first
    wrong ones named)."""
    unsigned = FORMATS[width][1]
    xb, yb = np.broadcast_arrays(np.asarray(x, unsigned), np.asarray(y, unsigned))
    xb, yb = xb.ravel().copy(), yb.ravel().copy()
    got = run(block(FORMATS[width][4], width, xb.size), [xb, yb])[0]
    want = correct(xb, yb, width)
    wrong = np.flatnonzero(got != want)
    d = width // 4
    assert wrong.size == 0, f"pow f{width} misrounds " + ", ".join(
        f"({int(xb[j]):0{d}x}, {int(yb[j]):0{d}x}): got {int(got[j]):0{d}x}, "
        f"want {int(want[j]):0{d}x}" for j in wrong[:8])


def bits16(values) -> np.ndarray:
    return np.asarray(values, np.float16).view(np.uint16)


def bits32(values) -> np.ndarray:
    return np.asarray(values, np.float32).view(np.uint32)


EVERY_F16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
INF, NAN = float("inf"), float("nan")
#: Operands every special rule of C's pow meets (zeros, infinities, NaNs, +-1, +-0.5, ...).
SPECIAL = [0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 1.5,
           -1.5, 0.25, 4.0]


# -- the oracle's contexts ---------------------------------------------------------------

@pytest.mark.fast
def test_mpfr_gives_cs_special_values_and_ties_to_even():
    """MPFR's pow in these contexts is C's (semantics.md): x^+-0 = 1^y = 1 even for NaN,
    (-1)^+-inf = 1, (-0)^-1 = -inf, (-2)^0.5 NaN; and an exact midpoint goes to even:
    (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 in f32 to 1 + 2^-11 (its last bit even), 2^-150
    (half the least subnormal) to +0, 9 * 2^-150 (4.5 quanta) to 4 quanta."""
    x = bits32([NAN, 1.0, -1.0, -0.0, -2.0, 1 + 2**-12, 2.0**-50, 2.0**-75 * 3])
    y = bits32([0.0, NAN, INF, -1.0, 0.5, 2.0, 3.0, 2.0])
    want = bits32([1.0, 1.0, 1.0, -INF, NAN, 1 + 2**-11, 0.0, 0.0])
    want[4] = CANONICAL_NAN[32]
    want[-1] = 4  # 9 * 2^-150 = 4.5 quanta of 2^-149: the tie goes to 4
    assert correct(x, y, 32).tolist() == want.tolist()


# -- f16 on the reference ----------------------------------------------------------------

@pytest.mark.parametrize("y", [pytest.param(2.0, marks=pytest.mark.fast),
                               pytest.param(1.5, marks=pytest.mark.fast),
                               3.0, 0.5, -1.0, -2.0, 5.0, 2.5, 0.0, INF, NAN])
def test_f16_every_base(y):
    """Every f16 ``x`` to a ``y`` that makes exact results, midpoints (x^2, x^3 and
    x^1.5 of 12 significant bits; subnormal results with few bits) and special values."""
    check(16, EVERY_F16, bits16(y))


@pytest.mark.parametrize("x", [pytest.param(1 + 2**-10, marks=pytest.mark.fast), *SPECIAL,
                               1 - 2**-11, 3 / 32, 65504.0, 2.0**-24])
def test_f16_every_exponent(x):
    """Every f16 ``y`` on bases around 1 (the exponent's error times ``y`` counts most),
    at the ends of the range and the special ones."""
    check(16, bits16(x), EVERY_F16)


@pytest.mark.fast
@settings(max_examples=20, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.integers(0, 2**16 - 1), st.integers(0, 2**16 - 1)),
                min_size=1, max_size=256))
def test_f16_drawn_pairs(pairs):
    x, y = np.array(pairs, np.uint16).T
    check(16, x, y)


# -- f32 on the reference ----------------------------------------------------------------

def exact_cases() -> tuple[np.ndarray, np.ndarray]:
    """CORE-MATH's exact families: x = 2^e to integer and dyadic y (the results exact,
    2^-150 a tie with 0); odd significands whose small integer powers have 24 or 25 bits
    (representable results and midpoints: (1 + 2^-12)^2, 3^15, 4095^2 ...); squares to
    y = n / 2 (257^2 to 1.5 is 257^3, a midpoint); negative bases to odd and even integers;
    subnormal results that are ties."""
    x, y = [], []
    for e in range(-149, 128, 7):
        for n in (-3, -1, 1, 2, 3, 0.5, -0.5, 1.25):
            x.append(2.0**e)
            y.append(n)
    for m, ns in ((1 + 2**-12, (2,)), (1 + 2**-11, (2,)), (3.0, range(2, 17)),
                  (5.0, range(2, 12)), (7.0, range(2, 10)), (4095.0, (2,)), (4097.0, (2,)),
                  (257.0**2, (1.5, 0.5)), (321.0**2, (1.5,)), (9.0, (0.5, 1.5, 2.5)),
                  (-3.0, (3, 4, 15)), (-(1 + 2**-12), (2, 3)), (0.75, (7, 8))):
        for n in ns:
            x.append(m)
            y.append(n)
    x += [2.0**-50, 2.0**-75 * 3, 2.0**-30 * 3, 2.0**-25, 2.0**-75]
    y += [3.0, 2.0, 5.0, 6.0, 2.0]
    return bits32(x), bits32(y)


def adversarial_f32() -> tuple[np.ndarray, np.ndarray]:
    """The special values against each other; results next to overflow (2^128) and in
    the subnormal range; x near 1 with large y; y = +-0.5; huge and tiny y."""
    sx, sy = np.meshgrid(bits32(SPECIAL), bits32(SPECIAL))
    big = [(2.0, 127.99), (2.0, 128.0), (0.5, -127.99), (2.0, -149.5), (2.0, -150.0),
           (2.0, -148.7), (1.0001, 887000.0), (0.9999, 1.48e6), (1 + 2**-23, 2.0**30),
           (1 - 2**-24, 2.0**31), (3.0, 80.5), (3.0, -94.0), (10.0, 38.5), (10.0, -45.0),
           (7.0, 0.5), (2.0, 0.5), (1e-38, 0.5), (1e30, -0.5), (2.0, 1e-30), (2.0, 1e30),
           (0.5, 1e30), (1.5, -1e30), (-2.0, 1e30), (1e-45, 1.0), (1e-45, 0.9),
           (3.4e38, 1.0), (3.4e38, 1.0001), (-8.0, 1 / 3), (-8.0, 3.0), (-0.5, -149.0)]
    bx, by = zip(*big, strict=True)
    ex, ey = exact_cases()
    return (np.concatenate([sx.ravel(), bits32(bx), ex]),
            np.concatenate([sy.ravel(), bits32(by), ey]))


@pytest.mark.fast
def test_f32_exact_cases_and_special_values():
    check(32, *adversarial_f32())


@pytest.mark.fast
@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)),
                min_size=1, max_size=128))
def test_f32_drawn_bit_pairs(pairs):
    """Any bits (most pairs give 0, 1, infinity or NaN, where every rule counts)."""
    x, y = np.array(pairs, np.uint32).T
    check(32, x, y)


#: Pairs the fast path leaves undecided (its pair's two roundings differ), by family
#: (tools/pow_hard_pairs.py, seed 42, 2^18 draws a family): all 176 of the 2^24-pair
#: sample's (its rule alone, the even neighbour, misrounds 86 of them: 2 are midpoints);
#: x near 1 with large y; 64 each with integer and dyadic y (mostly midpoints, and the 7
#: that are not and the rule alone misrounds); results near the overflow threshold and in
#: the subnormal range.
F32_UNDECIDED = [
    # sample
    (0x0973B100, 0x3EB8C772), (0x1B6D9300, 0xB8D02745), (0x1D116900, 0x3E6EA6CF),
    (0x3E834528, 0x4267DC8A), (0x3E91B8CF, 0xC2800000), (0x3E97D2F0, 0x420ECD72),
    (0x3EA6D1C7, 0x425020C0), (0x3EA78B52, 0xC2860000), (0x3EB7BF73, 0xC2840000),
    (0x3EBDA88C, 0x428DE4FF), (0x3EC40503, 0xC2940000), (0x3ED52217, 0xC2480000),
    (0x3EDC1DFD, 0x426457BA), (0x3F07ED39, 0x42C5A302), (0x3F08C86F, 0xC30360A4),
    (0x3F098D42, 0x42FB1CDF), (0x3F13A4A7, 0x42F60000), (0x3F19DE00, 0x42300E6E),
    (0x3F1ED6F8, 0x4294AFAA), (0x3F336EAC, 0xC35F0000), (0x3F3F68CF, 0xC3639C04),
    (0x3F492436, 0xC3978000), (0x3F4E648F, 0x4394A0C1), (0x3F55EA9A, 0x43EACF8D),
    (0x3F5A318B, 0xC2AE0000), (0x3F67AE44, 0x443ABDB8), (0x3F6CC8F1, 0x4434C000),
    (0x3F6E4057, 0xC3320000), (0x3F6FC302, 0xC308E3E3), (0x3F76D00C, 0xC4C0A000),
    (0x3F885A06, 0x442BC000), (0x3F8968EB, 0x44812000), (0x3F93D35B, 0xC4066288),
    (0x3F94AE78, 0x437E43C6), (0x3F976340, 0x43690000), (0x3F985E38, 0xC3C48000),
    (0x3F9CEAAB, 0x43D8989C), (0x3F9D927F, 0x43D08000), (0x3F9E764E, 0x42740000),
    (0x3FA3778A, 0xC37C0000), (0x3FA80FBC, 0x4391C051), (0x3FA95372, 0x436A0000),
    (0x3FAA4A7E, 0xC3920000), (0x3FADFC9D, 0xC365A30E), (0x3FB129AE, 0x436E0000),
    (0x3FB9475E, 0x43240000), (0x3FB9D16C, 0x431C5254), (0x3FBA9EDC, 0x432F0000),
    (0x3FBB1470, 0x42B00000), (0x3FBB650C, 0x42D0200A), (0x3FBECA92, 0xC2598580),
    (0x3FC405DB, 0xC30BD242), (0x3FC643EC, 0xC23C0000), (0x3FC7CCB5, 0xC3247418),
    (0x3FCF4AC9, 0xC29C0000), (0x3FDAC3E3, 0xC3175101), (0x3FE17659, 0x42B00000),
    (0x3FE8DFEE, 0x430502DA), (0x3FED0C2D, 0xC2080000), (0x3FF500D9, 0x42C2CE30),
    (0x3FF6608F, 0xC2240000), (0x3FFEE73F, 0x42E46C22), (0x40010FD2, 0xC2A80000),
    (0x4001777B, 0x4234ABFA), (0x40019713, 0xC2D60000), (0x4001D7F4, 0xC1ACB9BD),
    (0x4003E29E, 0xC2860000), (0x4003EB4A, 0xC2D8E2A3), (0x400482BA, 0x42700000),
    (0x400CB663, 0xC1DD4779), (0x400FC894, 0xC2180000), (0x40111050, 0xC20B0C09),
    (0x40118214, 0x41800000), (0x4013F43B, 0x42CC0000), (0x401497D6, 0x423A842C),
    (0x40178639, 0x42600000), (0x401BA63B, 0x41C76440), (0x401C1534, 0xC2AE0000),
    (0x401E308C, 0x428A0000), (0x401E5C8C, 0xC165F41B), (0x4021A659, 0xC2280000),
    (0x4022B9B7, 0xC2280000), (0x4025191E, 0xC2B20000), (0x40272A3F, 0x42A00000),
    (0x402CD800, 0x40000000), (0x402E9F1B, 0x42A0B3B1), (0x40338314, 0x429C0000),
    (0x4035180F, 0xC2180000), (0x40381973, 0x42140000), (0x403AF12E, 0x42920000),
    (0x40416344, 0x424F2871), (0x4046F374, 0x42800000), (0x4048B2AE, 0x425C0000),
    (0x404A7BD8, 0x428A69BA), (0x404A9D63, 0x41B70001), (0x404BFF12, 0x423C0000),
    (0x404C5071, 0xC2860000), (0x404C5253, 0xC28529B1), (0x404CE05B, 0xC2189EB1),
    (0x404FD7D7, 0x41800000), (0x40571106, 0xC1A80000), (0x4058487A, 0xC2899055),
    (0x405ACE43, 0xC28757F1), (0x405BC2AC, 0x42340000), (0x405EBC53, 0xC2288A69),
    (0x4062331B, 0x42820000), (0x40667336, 0xC26AFECD), (0x406E088E, 0x42780000),
    (0x40707145, 0x42540000), (0x4070C1F4, 0xC26CEE2D), (0x4071674E, 0xC1B80000),
    (0x4071E305, 0xC207447B), (0x40756D9A, 0xC2340000), (0x4075A8F7, 0xC22EA91E),
    (0x4078FE62, 0xC269087A), (0x4079F83C, 0x426FD2AD), (0x407AD383, 0xC2780000),
    (0x407B2B37, 0x41D80000), (0x407E7189, 0x42542084), (0xBEC56603, 0x429E0000),
    (0xBF0FA143, 0x42140000), (0xBF22A3FC, 0xC1F80000), (0xBF23700D, 0xC32E0000),
    (0xBF517598, 0xC3850000), (0xBF54E005, 0x43780000), (0xBF83CBDD, 0xC4DF6000),
    (0xBF85E3E7, 0x44EC8000), (0xBF9FD331, 0x43BC8000), (0xBFB5EBE8, 0x41400000),
    (0xBFB7F95C, 0x43210000), (0xBFCB2BCB, 0x433C0000), (0xBFCF59DB, 0xC29E0000),
    (0xBFD1B89D, 0x432B0000), (0xBFD50273, 0xC3180000), (0xBFD5A6D3, 0x42B40000),
    (0xBFDA9B7F, 0xC30F0000), (0xBFDCDF3A, 0x428A0000), (0xBFE1CBE0, 0x42960000),
    (0xBFF4B13A, 0x43080000), (0xBFF60929, 0x42DA0000), (0xBFF84339, 0xC0400000),
    (0xBFFC6D92, 0xC2E80000), (0xC00288F9, 0xC2040000), (0xC002FD7F, 0xC2240000),
    (0xC00429F9, 0x42AA0000), (0xC009B9C5, 0x428A0000), (0xC00DAC99, 0xC2860000),
    (0xC011D243, 0xC2D40000), (0xC0121730, 0xC2C80000), (0xC0137800, 0x40000000),
    (0xC0155446, 0xC2CA0000), (0xC01B55E3, 0x42880000), (0xC01B6A94, 0xC2AC0000),
    (0xC027AE4E, 0xC1500000), (0xC0309CC9, 0x42100000), (0xC0325C56, 0x42960000),
    (0xC032A3FB, 0x429E0000), (0xC032C02F, 0x426C0000), (0xC038577A, 0xC2780000),
    (0xC03C361A, 0x424C0000), (0xC03DB9C1, 0xC2A20000), (0xC03E125E, 0xC2880000),
    (0xC04155DF, 0xC2960000), (0xC0452973, 0xC28C0000), (0xC047BFE7, 0x42860000),
    (0xC05049B2, 0xC2380000), (0xC0536518, 0xC28C0000), (0xC05A5CBF, 0x427C0000),
    (0xC05A9557, 0x42540000), (0xC05B9446, 0x42300000), (0xC05FEB3D, 0xC2680000),
    (0xC067D392, 0xC1500000), (0xC067E824, 0xC1D80000), (0xC06FE061, 0x42640000),
    (0xC072C8A8, 0xC2080000), (0xC0758E30, 0xC2380000),
    # near-one
    (0x3F800001, 0xC81AF1F6),
    # integer-y
    (0x41DCCE95, 0x41000000), (0x42744FF9, 0x41200000), (0x43334000, 0x41000000),
    (0x46334000, 0x41000000), (0x46B34000, 0x41000000), (0x3BB00000, 0x40E00000),
    (0x3C880000, 0x40C00000), (0x3C960000, 0x40800000), (0x3CBD3B4A, 0x40E00000),
    (0x3D020000, 0x40800000), (0x3D060000, 0x40800000), (0x3D080000, 0x40C00000),
    (0x3D160000, 0x40800000), (0x3D680000, 0x40A00000), (0x3D860000, 0x40800000),
    (0x3D880000, 0x40C00000), (0x3D918000, 0x40400000), (0x3D9F8000, 0x40400000),
    (0x3DB00000, 0x40E00000), (0x3DF80000, 0x40A00000), (0x3E058000, 0x40400000),
    (0x3E068000, 0x40400000), (0x3E078000, 0x40400000), (0x3E0A0000, 0x40800000),
    (0x3E0A8000, 0x40400000), (0x3E0E0000, 0x40800000), (0x3E0F8000, 0x40400000),
    (0x3E138000, 0x40400000), (0x3E148000, 0x40400000), (0x3E160000, 0x40800000),
    (0x3E1E8000, 0x40400000), (0x3E300000, 0x40E00000), (0x3E780000, 0x40A00000),
    (0x3E820000, 0x40800000), (0x3E848000, 0x40400000), (0x3E860000, 0x40800000),
    (0x3E880000, 0x40C00000), (0x3E888000, 0x40400000), (0x3E8D8000, 0x40400000),
    (0x3E8E0000, 0x40800000), (0x3E938000, 0x40400000), (0x3E948000, 0x40400000),
    (0x3E960000, 0x40800000), (0x3E9D8000, 0x40400000), (0x3EB00000, 0x40E00000),
    (0x3EF80000, 0x40A00000), (0x3F008000, 0x40400000), (0x3F038000, 0x40400000),
    (0x3F058000, 0x40400000), (0x3F060000, 0x40800000), (0x3F068000, 0x40400000),
    (0x3F080000, 0x40C00000), (0x3F098000, 0x40400000), (0x3F0B8000, 0x40400000),
    (0x3F0D8000, 0x40400000), (0x3F0E8000, 0x40400000), (0x3F0F8000, 0x40400000),
    (0x3F120000, 0x40800000), (0x3F128000, 0x40400000), (0x3F148000, 0x40400000),
    (0x3F208000, 0x40400000), (0x3F680000, 0x40A00000), (0x3F820000, 0x40800000),
    (0x3F838000, 0x40400000),
    # dyadic-y
    (0x48FB0520, 0x40800000), (0x4BFB0520, 0x40800000), (0x3A64C400, 0x3FE00000),
    (0x3AF20000, 0x40600000), (0x3B2CAD10, 0x3FA00000), (0x3DA32080, 0x3FC00000),
    (0x3DF20000, 0x40600000), (0x3E840800, 0x40000000), (0x3F617810, 0x3FA00000),
    (0x3F704000, 0x40200000), (0x3F908000, 0x40400000), (0x3FA32080, 0x3FC00000),
    (0x40524000, 0x40200000), (0x40704000, 0x40200000), (0x40810080, 0x3FC00000),
    (0x40850C80, 0x3FC00000), (0x408C4800, 0x40000000), (0x408D5480, 0x3FC00000),
    (0x4095DC80, 0x3FC00000), (0x409D8800, 0x40000000), (0x40A56480, 0x3FC00000),
    (0x40A68800, 0x40000000), (0x40A7AC80, 0x3FC00000), (0x40AE9C80, 0x3FC00000),
    (0x40AFC800, 0x40000000), (0x412CAD10, 0x3FA00000), (0x41524000, 0x40200000),
    (0x41704000, 0x40200000), (0x41830480, 0x3FC00000), (0x41850C80, 0x3FC00000),
    (0x418C4800, 0x40000000), (0x418F7080, 0x3FC00000), (0x41908000, 0x40400000),
    (0x41919080, 0x3FC00000), (0x41980880, 0x3FC00000), (0x419D8800, 0x40000000),
    (0x419EA480, 0x3FC00000), (0x41A0E080, 0x3FC00000), (0x41A9F880, 0x3FC00000),
    (0x41AE9C80, 0x3FC00000), (0x41AFC800, 0x40000000), (0x41C1CC80, 0x3FC00000),
    (0x41C44480, 0x3FC00000), (0x41C6C080, 0x3FC00000), (0x41F20000, 0x40600000),
    (0x42524000, 0x40200000), (0x4264C400, 0x3FE00000), (0x42810080, 0x3FC00000),
    (0x42840800, 0x40000000), (0x42871880, 0x3FC00000), (0x42892880, 0x3FC00000),
    (0x428C4800, 0x40000000), (0x428F7080, 0x3FC00000), (0x42908000, 0x40400000),
    (0x4293B480, 0x3FC00000), (0x429C6C80, 0x3FC00000), (0x429D8800, 0x40000000),
    (0x429EA480, 0x3FC00000), (0x42A0E080, 0x3FC00000), (0x42A32080, 0x3FC00000),
    (0x42A56480, 0x3FC00000), (0x42A68800, 0x40000000), (0x42A7AC80, 0x3FC00000),
    (0x42A9F880, 0x3FC00000),
    # thresholds
    (0x3FFB8D42, 0x43035088), (0x40124E87, 0x42D63D4A), (0x40214902, 0x42BFAA4C),
    (0x4037B9EA, 0x42A83ED6), (0x4047BFBD, 0x429B83F6), (0x405EAF40, 0x428DF848),
]


@pytest.mark.fast
def test_f32_pairs_the_fast_path_leaves_undecided():
    x, y = np.array(F32_UNDECIDED, np.uint32).T
    check(32, x, y)


# -- the same bytes on every backend -----------------------------------------------------

@pytest.fixture(scope="module")
def driver():
    with Driver() as drv:
        yield drv


def f32_pairs() -> tuple[np.ndarray, np.ndarray]:
    """The adversarial pairs, the undecided ones, ordinary ones (x in [1/4, 4), |y| < 60)
    and random bits, to a whole number of workgroups."""
    rng = np.random.default_rng(42)
    ax, ay = adversarial_f32()
    ux, uy = np.array(F32_UNDECIDED, np.uint32).T
    ox = rng.uniform(0.25, 4, 4096).astype(np.float32).view(np.uint32)
    oy = rng.uniform(-60, 60, 4096).astype(np.float32).view(np.uint32)
    x = np.concatenate([ax, ux, ox, rng.integers(0, 2**32, 4096, dtype=np.uint32)])
    y = np.concatenate([ay, uy, oy, rng.integers(0, 2**32, 4096, dtype=np.uint32)])
    # (repeated to whole workgroups: a ragged last one makes the cpu backend compile the
    # kernel's checked version too, a second numba compile of the whole function)
    lanes = -(-x.size // 64) * 64
    return np.resize(x, lanes), np.resize(y, lanes)


@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_the_ir_operation_is_the_librarys_on_every_backend(driver, backend):
    """A program that uses ``ir.pow`` is given to each backend with the library's function
    written out (the worker host does it; cpu calls its numba helper of ``pow_f32``, whose
    body weighs more than ``INLINE_CALLS``): MPFR's bytes on every backend, in f32 and
    f16, in a single dispatch and as the steps of a sequence (the second raises the
    first's results to the same exponents; the same program, compiled once)."""
    rng = np.random.default_rng(5)
    xb = np.concatenate([EVERY_F16, rng.integers(0, 2**16, 1 << 14).astype(np.uint16)])
    yb = np.concatenate([np.full(1 << 16, bits16(1.5)[()], np.uint16),
                         rng.integers(0, 2**16, 1 << 14).astype(np.uint16)])
    got = apply(driver, backend, ir.pow, ir.f16, xb.view(np.float16), yb.view(np.float16))
    assert got.view(np.uint16).tobytes() == correct(xb, yb, 16).tobytes(), f"f16 on {backend}"
    x, y = f32_pairs()
    program = op_program(ir.pow, ir.f32)
    got = apply(driver, backend, ir.pow, ir.f32, x.view(np.float32), y.view(np.float32))
    want_t = correct(x, y, 32)
    assert got.view(np.uint32).tobytes() == want_t.tobytes(), f"f32 on {backend}"
    b = SequenceBuilder()
    b.input("x", ir.f32, x.size)
    b.input("y", ir.f32, x.size)
    b.transient("t", ir.f32, x.size)
    b.transient("u", ir.f32, x.size)
    b.step(program, {"a": "x", "b": "y", "out": "t"})
    b.step(program, {"a": "t", "b": "y", "out": "u"})
    t, u = driver.dispatch(b.build(returns=["t", "u"]),
                           [x.view(np.float32), y.view(np.float32)], backend=backend)
    assert t.view(np.uint32).tobytes() == want_t.tobytes(), f"a sequence's step on {backend}"
    assert u.view(np.uint32).tobytes() == correct(want_t, y, 32).tobytes()


def test_many_calls_go_through_cpus_helper_with_the_same_bytes(driver):
    """A kernel with more than ``INLINE_CALLS`` calls of ``ir.pow`` calls the cpu
    backend's numba helper of ``pow_f16`` (two parameters) instead of the written-out
    body: MPFR's bytes either way."""
    import vyre_cpu.mathlib

    calls = vyre_cpu.mathlib.INLINE_CALLS + 1
    k = ir.Kernel(workgroup=(64,))
    x, y = k.read("x", ir.f16), k.read("y", ir.f16)
    outs = [k.output(f"out{j}", ir.f16, 1 << 16) for j in range(calls)]
    i = k.let("i", ir.global_id())
    for j, out in enumerate(outs):
        out[i] = ir.pow(x[i], y[i] + float(j))
    program = k.build()
    from vyre_cpu import codegen

    assert "mathlib_pow_f16(" in codegen.generate(program).source
    xb = EVERY_F16
    y = np.full(xb.size, 0.5, np.float16)
    got = driver.dispatch(program, [xb.view(np.float16), y], backend="cpu")
    for j, result in enumerate(got):
        want = correct(xb, (y + np.float16(j)).view(np.uint16), 16)
        assert result.view(np.uint16).tobytes() == want.tobytes(), f"call {j}"
