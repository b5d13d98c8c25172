"""vyre_core.mathlib.atan2, ``atan2(y, x)`` correctly rounded in f16 and f32
(docs/design-42.md, step 12), held to MPFR's correctly rounded results (gmpy2 in the
binary16 and binary32 contexts) bit for bit: on the reference in this process, f16 over
every ``y`` against the ``x`` where the result is near 0, pi/2 and pi or subnormal (and
the other way round), C's special cases and drawn pairs; the f32 fast path's pair held to
its error bound (where ``ff.decided`` says the pair rounds as the true value, its f32
rounding is MPFR's); f32 over adversarial pairs, drawn bits and hard pairs (CORE-MATH's
atan2f worst cases, and those ``tools/atan2_hard_pairs.py`` finds), the accurate path
alone as well; then the IR operation through a Driver on every backend in both types.
(``vyre conform --exhaustive --all-inputs --op atan2`` checks every f16 pair and the
2^24-pair f32 sample.)"""

from __future__ import annotations

from collections.abc import Callable

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mathlib_cases import (
    BINARY16,
    BINARY32,
    CANONICAL_NAN,
    EVERY_F16,
    apply,
    op_program,
    whole_workgroups,
)

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
    pair, scale, _ = atan2._core(k, y, x)
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
    and the hard cases: those are the accurate path's (below)."""
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


# -- f32: the fast path, and the accurate path where it is undecided ----------------------

#: CORE-MATH's atan2f worst cases with 47 to 52 identical bits after the rounding bit
#: (``atan2f.wc``; results from 2^-7 to pi), as f32 bits ``(y, x)``. Every one of its 724
#: pairs, in the eight sign and order variants, gives MPFR's result here (checked once).
CORE_MATH_47 = [
    (0x3EDC3A46, 0xCB4E7B03), (0x412ED20C, 0xCB4076A9), (0x42132E7C, 0xCB5D76F5),
    (0x425C3A76, 0xCB7950B9), (0x412F9928, 0xCA04F1F4), (0x42EE4C98, 0xCB62BA0D),
    (0x434CD2EB, 0xCB5DAE51), (0x43ED1986, 0xCB034DDC), (0x43E4EFAE, 0xCAE95F6E),
    (0x43410F28, 0xC9F4E430), (0x44CEDCCA, 0xCB6F47D7), (0x449FF23D, 0xCB26672D),
    (0x458A3A69, 0xCB611932), (0x4599A6F1, 0xCB688E62), (0x4506B850, 0xCA30C544),
    (0x45F6FE8A, 0xCB0B3B18), (0x45BF6008, 0xCA8ABC32), (0x4783FD0A, 0xCB4E19F1),
    (0x47283F58, 0xCAFB128A), (0x49981E15, 0xCB58A503), (0x4A85F25F, 0xCB18DD9C),
    (0x4A642654, 0xCB005925), (0x4B6B1264, 0xCB37C253), (0x4BA30D30, 0xCA45629C),
    (0x4D1C8A6B, 0xCB31B133), (0x4E36A799, 0xCB61A264), (0x4F132287, 0xCB3BA4E8),
    (0x53934995, 0xCB66FB00), (0x540CFE53, 0xCB437B4A), (0x550C4EE5, 0xCB2D0C05),
    (0x56213509, 0xCB671083), (0x584E7B03, 0x4B5C3A46), (0x56126274, 0x4B6555C5),
    (0x55990369, 0x4B1E1D04), (0x556D40E6, 0x4B0968B4), (0x54B4209B, 0x4B684A04),
    (0x53EDD392, 0x4B59E238), (0x536EBE58, 0x4B3E7F57), (0x531F940A, 0x4B5FF327),
    (0x52A01E28, 0x4B389819), (0x52412623, 0x4B4B6286), (0x521F74FA, 0x4B3F43E9),
    (0x514FC831, 0x4B52FDCC), (0x4F43D318, 0x49D71910), (0x504C7872, 0x4B26C5A9),
    (0x50830815, 0x4B634B50), (0x4CB01B19, 0x4B707756), (0x4B6E7CF6, 0x4B010F8B),
    (0x4AC86DC4, 0x4B24FD9F), (0x4AFCFC0E, 0x4B7927D3), (0x489F68CB, 0x4B3BD453),
    (0x48042F44, 0x4B7169EF)]

#: Made by ``python tools/atan2_hard_pairs.py 4000 384 42``: pairs whose result lies
#: within 2^-31 to 2^-44 ULP of an f32 midpoint, from 2^-25 to pi.
HARD_PAIRS = [
    (0x4A56407C, 0xC93F9B1C), (0x41CC657A, 0x4B0ACC79), (0x4A654FD4, 0xC557C28C),
    (0x4B008C75, 0x498C2884), (0x49A32130, 0x4990EE64), (0x4A225004, 0x44858C70),
    (0x3F6EF86C, 0x4ABC84FE), (0x47BD28C7, 0x4AECFCE2), (0x4B539EDF, 0xC6E4C5A5),
    (0x4961D2EC, 0x4ACB80EE), (0x4A651139, 0xCB595C83), (0x48651FAE, 0x4A96E178),
    (0x4ACAEADE, 0xCA86C926), (0x4ADD6C0E, 0x45A8BEFF), (0x4B13F4C1, 0x49B5BB8B),
    (0x46FDF378, 0xCB64953B), (0x4A302A84, 0x4603E39C), (0x4AE494CC, 0xC82257B1),
    (0x4A71FC6E, 0x4A89CBFA), (0x4A8BA1C6, 0xC7513DF2), (0x49E58350, 0xC6180504),
    (0x4A40D238, 0x443DD226), (0x4B0F5710, 0xC944F5FD), (0x4AF01AA2, 0x47EBE428),
    (0x49ED78AC, 0xCA51D16C), (0x44DDCDA8, 0x4ABDF09E), (0x4B152357, 0xC86508F3),
    (0x42116D08, 0x49E4FDE8), (0x4B075B8A, 0xC7C021EB), (0x45C9518B, 0x4B25F3E6),
    (0x41D66ACC, 0x4A8A114A), (0x454600E2, 0x4B23D7CF), (0x4B497E38, 0x4A677251),
    (0x465635E8, 0x496F79D0), (0x4AADED5E, 0x4A6EA4EC), (0x465C9AE0, 0xCB54A793),
    (0x3FC373CE, 0x4AA104AA), (0x44690ACC, 0x4B481149), (0x4B04BBB3, 0x49094052),
    (0x3F997FB4, 0x4B093AF7), (0x4AF754AC, 0x4803A821), (0x4A95543A, 0xC529AAD6),
    (0x495CCE6F, 0x4B2FF609), (0x42D2E979, 0x4B47013E), (0x4A5DFE14, 0x4678C144),
    (0x4ADDC32A, 0xC642986C), (0x4AC06F96, 0x465B91D0), (0x4AF4E2F8, 0x4ACECF3B),
    (0x4B5D6CE0, 0xC877AE41), (0x49A53618, 0x4ABF579E), (0x46464654, 0x4ACAE802),
    (0x485C7A42, 0xCB46AE8B), (0x4AC66D82, 0x4703B0F9), (0x454E3B14, 0x4B1DF42F),
    (0x4B1926A2, 0x4ADC6569), (0x4B62E1C5, 0x487E0A10), (0x48057B20, 0x4AA11856),
    (0x4B080271, 0xC788EA34), (0x4ACC80EA, 0x4AAD08DB), (0x44868BAD, 0x4AE6E856),
    (0x472594F6, 0xCA808B46), (0x4A950CF6, 0xC5EC7DEE), (0x4B11FB26, 0x48EA1CB7),
    (0x4810444F, 0xCA94844E), (0x4AD82B4E, 0x4A20E52F), (0x4AE89146, 0xC7812699),
    (0x47196C81, 0xCB14BF0A), (0x48CC03A6, 0x4A8979CE), (0x49C864A7, 0x4B0CA5AE),
    (0x3F753B2D, 0x4B0A88B7), (0x47AB284A, 0x4B14F6D5), (0x4B22ABA4, 0x48E7938B),
    (0x4B061C74, 0xC9CAA9DB), (0x40E142D9, 0x4B322F7A), (0x43C3A91A, 0x4A71AE94),
    (0x4AAD1024, 0x496F98CA), (0x41DA930A, 0x4B06E86B), (0x3F792677, 0x4B0DDC81),
    (0x4AC3EE28, 0xC6F16462), (0x43FC80A8, 0x4B1027B9), (0x421A77C8, 0x499247E8),
    (0x4AA9475A, 0xC7991F84), (0x453CF89D, 0x4B1E2960), (0x4AFFD702, 0xC7DF4734),
    (0x4A9A909E, 0xC7A6FA0C), (0x4485CEDB, 0x4AB0BAC6), (0x4B3D76EE, 0x4A670831),
    (0x4AB692D6, 0xCB19C427), (0x445B6C3D, 0x4B2F2892), (0x4B10473B, 0xC7D4CAB3),
    (0x4B60EE09, 0xC77E3DBE), (0x4731D828, 0xCAF20192), (0x4A0D90A0, 0xC92346B4),
    (0x4B35D0CF, 0x4AF1C784), (0x47B4D27D, 0x4B31FDEC), (0x44E3C6B3, 0x4B6153EF),
    (0x4AB2FCFA, 0x49A0B924), (0x4B2F1F45, 0x47CB7CD6), (0x4A9BFBB8, 0xC6D5CFDE),
    (0x4AF17BBE, 0xC8D973FA), (0x47DF91E3, 0xCB054735), (0x4AC63318, 0x46CC55B2),
    (0x490F4102, 0xCA40746C), (0x46330B44, 0x4AFA6492), (0x486D8AE9, 0x4B554C45),
    (0x49ABAA70, 0xCAAB66FA), (0x4A5876C0, 0x4B323727), (0x47449EE5, 0x4B255709),
    (0x4B1DFA71, 0xCAB57E01), (0x4AD4F9CA, 0x464331EE), (0x4B21457D, 0x4959B056),
    (0x4B500BA1, 0xC6D5190D), (0x49673218, 0xCB1C1A41), (0x49BC0AE4, 0x4AA5F5AA),
    (0x4AEE0256, 0xC84C4EB2), (0x4AF29BBE, 0x4A62271D), (0x4A5A7370, 0x45FD0344),
    (0x4B1E50F6, 0x4923C8D9), (0x487686FE, 0x4ACE02D2), (0x3F426DEA, 0x4AC396D6),
    (0x4B247DDB, 0x48323BB2), (0x48117623, 0x4B080B87), (0x46BB1A8B, 0xCACD39F4),
    (0x4256E9A5, 0x4B0D49C4), (0x40736EFA, 0x4B36B96F), (0x485AADB5, 0x4AE3BBC8),
    (0x4AC86E36, 0xC71C0415), (0x4B491FCB, 0xC7FD62E6), (0x4AD28F3C, 0xC7532792),
    (0x4A4435AC, 0x4741B07A), (0x49912D8C, 0xCABF44C6), (0x4B23E5AE, 0xC944DBCF),
    (0x495AF5BF, 0xCAFDB0DC), (0x4B342D99, 0x47711B04), (0x442201DA, 0x4B06179F),
    (0x47687645, 0xCB027ADC), (0x4878387D, 0x4B2FDC08), (0x4B4618A5, 0x48763359),
    (0x49863E8D, 0xCAAE6350), (0x401423B5, 0x4AE8BFFE), (0x43E79CB0, 0x4A2B111C),
    (0x41D41E7E, 0x4B393483), (0x4823353F, 0xCB0B33D3), (0x4376E401, 0x4B5D1A5B),
    (0x41DD945B, 0x4B33F040), (0x464F487D, 0x4AF3CA70), (0x4B11ABE5, 0xC693479E),
    (0x4B12B079, 0x4A5AFB03), (0x41A437E9, 0x4ADD9836), (0x481501BA, 0xCA440898),
    (0x49B8D020, 0xC9967BB4), (0x41CDB850, 0x4AE9DCB6), (0x4A7C8B54, 0x4A264FA2),
    (0x4A6F529F, 0xCB00A89E), (0x47508677, 0x4AFC1018), (0x479141D9, 0x4B079DC3),
    (0x467A9E2A, 0x4A8069F6), (0x4B14BCED, 0x4A3C0305), (0x4B651BB9, 0xC76EC01B),
    (0x4B26C785, 0xC9E1FDE5), (0x47E77CEA, 0x4A9EA1E6), (0x4AA6CB46, 0xC6217023),
    (0x4AC7C96E, 0x46702390), (0x4AE81C62, 0x464B9F8F), (0x4A7DE636, 0x4AE00168),
    (0x4A16EC44, 0xC6789198), (0x424B9163, 0x4B351624), (0x4AF553CC, 0x4A8EF073),
    (0x46C5EFCB, 0x4B2A1212), (0x48AA85B1, 0xCAEF7A8A), (0x4B440AB3, 0x497B18C1),
    (0x49DCB443, 0x4B095069), (0x4903C97D, 0xCAD671F6), (0x466B4B8B, 0x4B223656),
    (0x4457DE53, 0x4B2B62CC), (0x4A548268, 0x4A4EB336), (0x451292C8, 0xC9C88498),
    (0x4AAD7176, 0x49A8EEED), (0x4AC422D4, 0x463AFDEB), (0x4879CEBF, 0x4B3EF39E),
    (0x482BC2C8, 0x4B28620D), (0x4A5DCC4C, 0x49BA4F00), (0x4858EA61, 0x4B52B895),
    (0x43529AFC, 0x4AF2F726), (0x42BD7782, 0x4B28C9CB), (0x4217DCCE, 0x4A8BA268),
    (0x464753D5, 0x4B099B16), (0x4AB13EE4, 0x4AE76BA2), (0x4AA437DA, 0xCA05A525),
    (0x4A8949B5, 0xCAC11D5E), (0x40F9BB00, 0x49C03978), (0x40076DC4, 0x4AABF8AE),
    (0x48D1B1E1, 0xCB323CF2), (0x43558B0E, 0x4A618AE0), (0x45FA2DF1, 0x4B77AF55),
    (0x47E8EBED, 0xCB1D2D26), (0x4A3811EE, 0xCB13090D), (0x463B9AC5, 0x4B184D64),
    (0x453ADA53, 0x4AF77CF6), (0x4AEE3BBA, 0xC78BA408), (0x45416712, 0x4A724428),
    (0x47EA4982, 0xCADA9908), (0x43464223, 0x4B133DAB), (0x41A22DB3, 0x4AB91970),
    (0x4B4BC6AD, 0x48DB89C1), (0x47B9BC86, 0xCAD4B492), (0x4A830EFA, 0xC9B6BA26),
    (0x40B0AB85, 0x4ABC0338), (0x47BACD53, 0x4B0FC49D), (0x46751FDF, 0x4B44E782),
    (0x4A8235FE, 0xC7245BB2), (0x40D49065, 0x4B0F4095), (0x41FA60C8, 0x4ACD4E9A),
    (0x4ACDDFA2, 0x47553EC4), (0x47805042, 0xCA6E43A4), (0x4A6F322D, 0x4B664D80),
    (0x4B425059, 0x49F04370), (0x49F883E3, 0xCB59CB71), (0x4AD5CCBF, 0xCB17EE79),
    (0x405FC322, 0x4B36927F), (0x48C19AF1, 0xCB1E64BF), (0x415CD659, 0x4B1CCEDE),
    (0x4B0B5F6E, 0xCABE2701), (0x4A8AC21A, 0x4AC8AB96), (0x40AFDC27, 0x4ACAFB48),
    (0x44BFE1E9, 0x4B058B30), (0x444F5F9D, 0x4B237863), (0x43154150, 0x4B120261),
    (0x42E9F7F3, 0x4B5DF5DE), (0x4B4A944A, 0xC8DAC1BD), (0x4835328B, 0x4AF24C32),
    (0x4026413A, 0x4B0A66D1), (0x4AC389A0, 0xC690B9B1), (0x4AEF8582, 0x4A95920B),
    (0x4A55A1AE, 0xCA980BEC), (0x3F504A6D, 0x4AD91EDA), (0x3FDED61D, 0x4AF00308),
    (0x4A9C6298, 0xC7C0752E), (0x47030857, 0xCAC6FB20), (0x40CD0DB4, 0x4AA4A866),
    (0x4B0E6BDB, 0x49D2BDB3), (0x4AC1D35C, 0xCA8E69C9), (0x47FC2ED7, 0xCB1F3A21),
    (0x4B253F37, 0xC8388BC0), (0x46C8B62E, 0x4AEACBF2), (0x49A55896, 0x4A89B35E),
    (0x486CB0FA, 0xCAC019FE), (0x4AD4BAB3, 0x4B2093F1), (0x495E0794, 0x4ADDB116),
    (0x4A48EF28, 0x45AA5652), (0x439FC848, 0x4AB48C1E), (0x4A22F321, 0x4B130BEC),
    (0x45E11D18, 0x4B1FAE5F), (0x455B5F75, 0x4B014EFC), (0x4689B0F6, 0x4A168A90),
    (0x48D3B0C2, 0xCB2F0B05), (0x4A86466E, 0x48E97238), (0x4A3ED70E, 0xCA73D708),
    (0x4B550A13, 0x4956D514), (0x4B2CC62A, 0xC9FB4FB7), (0x4766C477, 0x4B0DF830),
    (0x4453C342, 0x4AFDA05A), (0x460532FB, 0x4AB15676), (0x4AF4CB86, 0x480319D6),
    (0x4B2AA853, 0x4A613527), (0x46EE17B2, 0x4B56E90F), (0x47742DF6, 0x4ACB2AB2),
    (0x498C11FC, 0xCAEDAA3E), (0x4B0DF9F9, 0xC8AB6800), (0x4A3974A7, 0x4B1A6888),
    (0x47EC5811, 0x4B1C1EF6), (0x4B42F203, 0x4948FBE7), (0x44DECCD0, 0x4B518A81),
    (0x44EF7FE4, 0x4B4C7123), (0x45F67E87, 0x4B55AAE7), (0x49E59DE1, 0xCB1A25C6),
    (0x4B1C4847, 0x48C629F0), (0x4B4A63A1, 0x4A60F1C1), (0x4AC27E86, 0xCA48F144),
    (0x4B2C146E, 0xCAB2D767), (0x4A7270AC, 0x4B61FDBD), (0x4B38C5CA, 0xCA5BEC61),
    (0x48EFEC49, 0x4B103DFD), (0x4AC10547, 0xCB15037B), (0x4B048512, 0x4965C9D1),
    (0x4AD3D2EA, 0x46DC30DA), (0x48407CE6, 0x4A439974), (0x4AECD77C, 0x47DCF20F),
    (0x49EF0C08, 0xC64D0938), (0x4AD3B1D8, 0xC82BC291), (0x46FD30AA, 0xCA8CF710),
    (0x4A421882, 0x4AEE68B6), (0x4AAA0ECE, 0xC9A57BA3), (0x4B4D5FF3, 0x48D08E51),
    (0x46FD34E5, 0x4B2607F3), (0x416BBA52, 0x4B449101), (0x4B16066B, 0x49E70DD8),
    (0x431B3E22, 0x4A8AD664), (0x4AFA2912, 0xC82643A7), (0x432D8AC5, 0x4AD38680),
    (0x47F11B4F, 0xCB0BC016), (0x4B3D68B2, 0x47FEA409), (0x42D786E8, 0x49A9A900),
    (0x4B0DD490, 0xC8639537), (0x4705FA08, 0xC98A2378), (0x4B49502C, 0x49FA71BD),
    (0x4546AAB0, 0x4B32F399), (0x40211829, 0x4AF0EB3C), (0x44FB0EE7, 0x4B627D57),
    (0x4B23E4ED, 0xC8F6A68D), (0x49C02438, 0x452BF5DC), (0x4AAB5824, 0x4AFBEE12),
    (0x48A23A3D, 0xCACE42A8), (0x4ADD0054, 0x49B4F651), (0x4B57D4CF, 0xCA594ACE),
    (0x42FCA8E0, 0x4B222609), (0x470B5667, 0x4AFAB452), (0x442E1A4F, 0x4ADF5FBE),
    (0x481960C1, 0xCAE2B652), (0x4A8A6A4B, 0xCB0044DA), (0x4AA75AAE, 0x47148F4A),
    (0x47D8F033, 0x4B22A15D), (0x4AAA07B4, 0x4A3D60EE), (0x49E35709, 0x4B4D144C),
    (0x3F4F6141, 0x4AD7481E), (0x4B084AF5, 0x49C03338), (0x4B078BC5, 0xC8EA268F),
    (0x47BA5345, 0xCB0D0755), (0x4AA29AFE, 0xC828E776), (0x44F25B67, 0x4AFD5A1E),
    (0x49E4258A, 0x4ADD8472), (0x45B63A00, 0xC9C3DD48), (0x44A784E3, 0x4ABFD3CA),
    (0x4AC52D2E, 0x4B1C9743), (0x3FAF3D2C, 0x4B271B37), (0x4AFBDFF6, 0x4A39C5EA),
    (0x49EDF618, 0x46B614F4), (0x4AC63566, 0xC7E8E5C0), (0x45EA7705, 0x4AEB3218),
    (0x4A8F0B86, 0x49FD5920), (0x4AB55668, 0xC9202AE7), (0x48CD15E7, 0xCB331246),
    (0x40AF3455, 0x4B00D869), (0x4A68270A, 0x4A85688C), (0x499D96F4, 0xCA23FF0C),
    (0x3EEDF4D0, 0x49BB5E58), (0x49BBDDDC, 0x4B3A126F), (0x4A468CF5, 0x4B3EDBC0),
    (0x47735B56, 0xCA80900E), (0x4116E351, 0x4A9FF6CE), (0x4AA18508, 0xC9CE96FE),
    (0x4AF432C2, 0x47217125), (0x4B04B59A, 0x4AA7240F), (0x4B0BC675, 0xC8DD33E2),
    (0x437AD7F5, 0x4B4CA33D), (0x49E2E664, 0x4A02B4BC), (0x481BF73F, 0x4B15CC3B),
    (0x47496970, 0x4A0436D4), (0x4B1554DC, 0xC9C2A937), (0x4AE062AC, 0xCB1F97F3),
    (0x434BB3B8, 0x49F22CD8), (0x42341D36, 0x4A9D7434), (0x41F562A1, 0x4B5A250A),
    (0x49C1B6F7, 0xCACF6526), (0x488FC819, 0xCAE7A72C), (0x400754D5, 0x4AABBFC6),
    (0x4205908D, 0x4AEF4110), (0x45011B0B, 0x4AE4C9F8), (0x4A678B3C, 0x46569F50),
    (0x45D7E7B1, 0x4B17DE60), (0x45A6D949, 0x4B1414B3), (0x43AEC69D, 0x4B1FDE1E),
    (0x4B27077F, 0xCA6EA422), (0x4AAB1A7A, 0xC820B6F2), (0x437720CA, 0x4B5D727F),
    (0x4A705CB1, 0xCB4219F6), (0x42936D46, 0x4A7AE340), (0x46F82314, 0x4A292D90),
    (0x4958B8FC, 0xCB30ED03), (0x4AC9375E, 0x46C8B0A5), (0x42B313F8, 0x4B01EE73),
    (0x4ABB822A, 0x48610C70), (0x4B3569AF, 0x48CF237A), (0x430E2B75, 0x4AF4C3D8)]


def accurate_only(k: ir.Kernel, y: ir.Val, x: ir.Val) -> ir.Val:
    """The accurate path for every pair (the fast one where ``y`` or ``x`` is 0 or
    infinite: their pair is exact)."""
    pair, scale, parts = atan2._core(k, y, x)
    exact, exact_scale = atan2._accurate(k, parts)
    minus = parts.minus == 1
    signed = ff.FF(ir.select(minus, -exact.hi, exact.hi), ir.select(minus, -exact.lo, exact.lo))
    special = ir.logical_or(ir.logical_or(y == 0.0, x == 0.0), ir.logical_or(
        abs(y) == float("inf"), abs(x) == float("inf")))
    return atan2._nan(y, x, ir.select(special, ff.round_ff(k, pair, scale),
                                      ff.round_ff(k, signed, exact_scale)))


def assert_f32_correctly_rounded(y: np.ndarray, x: np.ndarray,
                                 function: Callable = atan2.atan2_f32) -> None:
    y, x = y.astype(np.uint32), x.astype(np.uint32)
    got, want = on_reference(function, 32, y, x), mpfr_atan2(y, x, 32)
    wrong = np.flatnonzero(got != want)
    assert wrong.size == 0, f"{function.__name__} misrounds " + ", ".join(
        f"({int(y[at]):08x}, {int(x[at]):08x}): got {int(got[at]):08x}, "
        f"want {int(want[at]):08x}" for at in wrong[:8])


def hard_f32() -> tuple[np.ndarray, np.ndarray]:
    """The hard pairs above, and with ``-y`` (the same magnitude, as hard)."""
    listed = np.array(CORE_MATH_47 + HARD_PAIRS, np.uint32)
    return (np.concatenate([listed[:, 0], listed[:, 0] | 0x80000000]),
            np.concatenate([listed[:, 1], listed[:, 1]]))


@pytest.mark.fast
def test_f32_is_correctly_rounded_on_hard_pairs_which_the_accurate_path_decides():
    """The fast path leaves nearly all of them undecided (its bound is about 2^-19 ULP;
    they are within 2^-31; CORE-MATH's for directed rounding lie near an f32 instead),
    so the accurate path is what rounds them; it rounds them alone too (and their other
    quadrants, and the adversarial pairs)."""
    y, x = hard_f32()
    undecided = on_reference(f32_fast_path, 32, y, x) == CANONICAL_NAN[32]
    assert undecided.sum() > 0.9 * y.size
    y, x = signs(np.concatenate([y, x]), np.concatenate([x, y]), 0x80000000)
    assert_f32_correctly_rounded(y, x)
    assert_f32_correctly_rounded(y, x, accurate_only)
    assert_f32_correctly_rounded(*adversarial_f32(), accurate_only)


@pytest.mark.fast
def test_f32_is_correctly_rounded_on_adversarial_pairs():
    """Subnormal results and exact ties of ``atan q ~ q`` (below the quotient), the
    table's breakpoints, near pi/2 and pi, and C's special cases."""
    y, x = adversarial_f32()
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001,
                        0x3F800000, 0xBF800000, 1, 0x80000001, 0x7F7FFFFF, 0xFF7FFFFF],
                       np.uint32)
    sy, sx = np.meshgrid(special, special)
    assert_f32_correctly_rounded(np.concatenate([y, sy.ravel()]),
                                 np.concatenate([x, sx.ravel()]))


@pytest.mark.fast
@settings(max_examples=10, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1),
                          st.integers(0, 40)), min_size=1, max_size=256))
def test_f32_is_correctly_rounded_for_drawn_bits(pairs):
    """Any bits, and pairs whose magnitudes are at most 40 binades apart."""
    y = np.array([a for a, _, _ in pairs], np.uint32)
    x = np.array([b for _, b, _ in pairs], np.uint32)
    near = (((y >> 23) & 0xFF).astype(np.int64) + [d - 20 for _, _, d in pairs]).clip(1, 254)
    near_x = (x & 0x807FFFFF) | (near.astype(np.uint32) << 23)
    assert_f32_correctly_rounded(np.concatenate([y, y]), np.concatenate([x, near_x]))


# -- the IR operation on every backend ---------------------------------------------------

@pytest.fixture(scope="module")
def driver():
    with Driver() as drv:
        yield drv


def operands(width: int) -> tuple[np.ndarray, np.ndarray]:
    """Drawn bits, then (f16) every ``y`` against ``x = -1`` or (f32) the hard pairs."""
    rng = np.random.default_rng(7)
    if width == 16:
        bits = rng.integers(0, 2**32, 1 << 14, dtype=np.uint64)
        return (np.concatenate([bits & 0xFFFF, EVERY_F16]).astype(np.uint16),
                np.concatenate([bits >> 16, np.full(EVERY_F16.size, 0xBC00)]).astype(np.uint16))
    y, x = (rng.integers(0, 2**32, 1 << 14, dtype=np.uint64).astype(np.uint32)
            for _ in range(2))
    hard_y, hard_x = hard_f32()
    return np.concatenate([hard_y, y]), np.concatenate([hard_x, x])


@pytest.mark.parametrize("width", [16, 32], ids=["f16", "f32"])
@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_the_ir_operation_is_the_librarys_on_every_backend(driver, backend, width):
    """``ir.atan2``, written out by the worker host (on cpu, f32's is the numba helper:
    one call weighs more than a kernel writes out): MPFR's bytes on every backend, in a
    dispatch and as two steps of a sequence (the second's ``x`` the first's results)."""
    floats, storage = (ir.f16, np.float16) if width == 16 else (ir.f32, np.float32)
    y, x = (whole_workgroups(a) for a in operands(width))
    lanes = y.size
    got = apply(driver, backend, ir.atan2, floats, y.view(storage), x.view(storage))
    want_t = mpfr_atan2(y, x, width)
    assert got.view(y.dtype).tobytes() == want_t.tobytes(), backend
    b = SequenceBuilder()
    b.input("y", floats, lanes)
    b.input("x", floats, lanes)
    b.transient("t", floats, lanes)
    b.transient("u", floats, lanes)
    b.step(op_program(ir.atan2, floats), {"a": "y", "b": "x", "out": "t"})
    b.step(op_program(ir.atan2, floats), {"a": "y", "b": "t", "out": "u"})
    t, u = driver.dispatch(b.build(returns=["t", "u"]),
                           [y.view(storage), x.view(storage)], backend=backend)
    assert t.view(y.dtype).tobytes() == want_t.tobytes(), f"a sequence's step on {backend}"
    assert u.view(y.dtype).tobytes() == mpfr_atan2(y, want_t, width).tobytes()
