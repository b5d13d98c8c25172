"""vyre_core.mathlib.tan, ``tan x`` correctly rounded (docs/design-42.md, step 11), held to
MPFR's correctly rounded results (gmpy2 in the binary32 and binary16 contexts) bit for bit:
on the reference in this process over drawn f32 bits and adversarial ones (the f32 nearest
to multiples of pi/2, the poles and zeros, with the reduction's worst case in every binade,
and to multiples of pi/128, where the table's entry changes; the seams of the reduction and
of ``tan x = x``, tiny and subnormal inputs, the largest, zeros, NaNs with payloads,
infinities, every input of the exception list and its negative) and over every f16 input;
then the same programs give the reference's bytes on wgpu, and ``ir.tan`` MPFR's on every
backend. (``vyre conform --exhaustive --all-inputs --op tan`` checks every f32 input.)"""

from __future__ import annotations

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mathlib_cases import (
    BINARY32,
    CANONICAL_NAN,
    EVERY_F16,
    assert_correctly_rounded,
    assert_exception_list,
    f32_bits,
    mpfr,
    operation_is_mpfrs,
    )

from vyre_core import Driver, ir
from vyre_core.mathlib import tan, trig

#: The last input whose result is ``x`` itself (0x39B89BA2, about 3.5e-4), found by
#: bisection with MPFR.
LAST_SELF = 0x39B89BA2

#: The positive inputs the exhaustive run found the pair alone misrounding (with their
#: negatives: tools/math_exceptions.py tan, cpu, the list empty). Written here, not read
#: from tan.py, so that an entry dropped there fails here.
HARD = [
    0x3E19205E, 0x408174DD, 0x48632AA3, 0x4872B9FA, 0x4F823D5F, 0x505B24EC, 0x53EBC27A,
    0x56807D7F, 0x575852F8, 0x5C1785A1, 0x5D5873AE, 0x5FFD33A4, 0x613D28D9, 0x61FE289F,
    0x624684EF, 0x67A2943D, 0x68058F5D, 0x757E45C4, 0x75CCFAAA, 0x76EB0BDC, 0x7A98D2C2,
    0x7B97B9EC]

#: The f32 nearest a multiple of pi/2 in each binade from 1 up (the reduction's worst
#: cases: ``tan`` nearly 0 or a pole), by tools/trig_worst_cases.py.
REDUCTION_WORST = [
    0x3FC90FDB, 0x40490FDB, 0x4096CBE4, 0x4116CBE4, 0x4196CBE4, 0x4216CBE4, 0x4296CBE4,
    0x437CE5F1, 0x43FCE5F1, 0x447CE5F1, 0x44FCE5F1, 0x450BE628, 0x458BE628, 0x460BE628,
    0x468BE628, 0x474D246F, 0x47CD246F, 0x484D246F, 0x4882665E, 0x4902665E, 0x4982665E,
    0x4A2562AE, 0x4AA562AE, 0x4B2562AE, 0x4BF3B47B, 0x4C2332E9, 0x4CA332E9, 0x4D2332E9,
    0x4D847661, 0x4E13D4A5, 0x4E93D4A5, 0x4F0FFD14, 0x4FDBD32F, 0x507FD274, 0x50A3E87F,
    0x5123E87F, 0x51A3E87F, 0x5223E87F, 0x52A3E87F, 0x5323E87F, 0x53B146A6, 0x543146A6,
    0x54B146A6, 0x553146A6, 0x55B146A6, 0x56787577, 0x56F87577, 0x57787577, 0x57B82989,
    0x58382989, 0x58DC36C9, 0x596E3D69, 0x59F740B9, 0x5A7BC261, 0x5AFE0335, 0x5B7F239F,
    0x5BFFB3D4, 0x5C07BCD0, 0x5C87BCD0, 0x5D07BCD0, 0x5D87BCD0, 0x5E07BCD0, 0x5E87BCD0,
    0x5F07BCD0, 0x5FE4112C, 0x6064112C, 0x60AB0CE1, 0x617C556B, 0x61D3B126, 0x6253B126,
    0x62EC1B4A, 0x636C1B4A, 0x63E600C1, 0x642E0733, 0x64AE0733, 0x652E0733, 0x65898498,
    0x66098498, 0x66898498, 0x67098498, 0x67898498, 0x68098498, 0x68898498, 0x6946E3BB,
    0x69C6E3BB, 0x6A1976F1, 0x6A9976F1, 0x6B1976F1, 0x6B9976F1, 0x6C55DA58, 0x6CD5DA58,
    0x6D2063C2, 0x6D85A877, 0x6E05A877, 0x6E85A877, 0x6F79BE45, 0x6FF9BE45, 0x7079BE45,
    0x70F9BE45, 0x7179BE45, 0x71F9BE45, 0x723FA09A, 0x72BFA09A, 0x733FA09A, 0x73E61C18,
    0x7452DE59, 0x74D2DE59, 0x756FA1DC, 0x75949471, 0x76507CE8, 0x76A426EB, 0x77584625,
    0x77D84625, 0x78584625, 0x78A8B883, 0x79407F54, 0x79C07F54, 0x7A105F7F, 0x7AFCCBAB,
    0x7B1675C0, 0x7B9675C0, 0x7C6C3305, 0x7CFF01BD, 0x7D7F01BD, 0x7DFF01BD, 0x7E7F01BD,
    0x7EBDCDA0, 0x7F3DCDA0]


def nearest_multiples(step, count: int) -> np.ndarray:
    """The f32 nearest to ``n * step`` (and its two neighbours) for ``n`` from 1 to
    ``count`` and for ``n`` the multiple nearest each power of two from 2^-5 to 2^127."""
    with gmpy2.context(precision=300):
        unit = step(gmpy2.const_pi())
        ns = [gmpy2.mpz(n) for n in range(1, count + 1)]
        ns += [gmpy2.mpz(gmpy2.rint(gmpy2.mpfr(2) ** e / unit)) for e in range(-5, 128)]
        values = [float(n * unit) for n in ns if n > 0]
    with gmpy2.context(BINARY32):
        bits = f32_bits([float(gmpy2.mpfr(v)) for v in values]).astype(np.int64)
    return np.concatenate([bits + d for d in (-1, 0, 1)]).astype(np.uint32)


def adversarial() -> np.ndarray:
    """Both signs of: the nearest multiples of pi/2 (poles and zeros) and of pi/128 (the
    table's points and the switches between them), the reduction's worst cases, the seams
    (``trig._SMALL``, where the reduction starts; ``LAST_SELF``, where ``tan x`` stops being
    ``x``; pi/4), every power of two, tiny and subnormal inputs, the largest finite, and the
    hard cases; then the special values."""
    seams = f32_bits([trig._SMALL, np.pi / 4, np.pi / 2, 1, 3.0e38]).astype(np.int64)
    seams = np.concatenate([seams + d for d in range(-3, 4)]
                           + [np.arange(LAST_SELF - 256, LAST_SELF + 256)])
    powers = f32_bits([2.0**e for e in range(-149, 128)])
    subnormal = np.array([1, 2, 3, 0x400000, 0x7FFFFF, 0x12345], np.uint32)
    positive = np.concatenate([
        nearest_multiples(lambda pi: pi / 2, 1000), nearest_multiples(lambda pi: pi / 128, 200),
        np.array(REDUCTION_WORST, np.uint32), seams.astype(np.uint32), powers, subnormal,
        f32_bits([3.4028235e38]), np.array(HARD, np.uint32)])
    specials = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                0x7F800001, 0xFFFFFFFF, 0x7FBFFFFF]
    return np.concatenate([positive, positive | 0x80000000, np.array(specials, np.uint32)])


# -- the oracle's contexts ---------------------------------------------------------------

@pytest.mark.fast
def test_the_oracle_gives_tans_special_values_and_last_self():
    """``tan(+-0) = +-0``, NaN at +-inf and NaN; ``x`` itself up to ``LAST_SELF`` and not
    after; tan 1 is numpy's f64 value rounded once (far from a boundary), in f32 and f16."""
    x = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, LAST_SELF,
                  LAST_SELF + 1, 0x3F800000], np.uint32)
    nan = CANONICAL_NAN[32]
    want = [0, 0x80000000, nan, nan, nan, LAST_SELF, LAST_SELF + 2,
            int(f32_bits([np.tan(1.0)])[0])]
    assert mpfr(gmpy2.tan, x, 32).tolist() == want
    x16 = np.array([0.0, -0.0, 1.0], np.float16).view(np.uint16)
    want16 = np.array([0.0, -0.0, np.tan(1.0)], np.float16).view(np.uint16)
    assert mpfr(gmpy2.tan, x16, 16).tolist() == want16.tolist()


# -- f32 on the reference ----------------------------------------------------------------

@pytest.mark.fast
def test_f32_is_correctly_rounded_on_adversarial_inputs():
    assert_correctly_rounded(tan.tan_f32, gmpy2.tan, 32, adversarial())


@pytest.mark.fast
def test_the_exception_list_is_sorted_and_each_entry_is_needed_and_right():
    """Positive inputs only (the list is read with ``|x|``), sorted (the bisection needs
    it), each entry a correctly rounded result that the pair alone misses (an entry that
    is not needed is a stale list), and the one the test holds."""
    assert tan._EXCEPTION_INPUTS == HARD
    assert max(HARD) < 0x7F800000
    assert_exception_list(tan._EXCEPTION_INPUTS, tan._EXCEPTION_RESULTS, gmpy2.tan,
                          lambda k, x: tan.core(k, x).hi)


@pytest.mark.fast
@settings(max_examples=20, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64),
       st.lists(st.integers(0x39000000, 0x4B000000), min_size=1, max_size=64))
def test_f32_is_correctly_rounded_for_drawn_bits(anywhere, ordinary):
    """Any bits, and bits of inputs from 2^-13 to 2^23 (the reduction's every case, where
    the results are not ``x``), with their negatives."""
    ordinary = np.asarray(ordinary, np.uint32)
    assert_correctly_rounded(tan.tan_f32, gmpy2.tan, 32, np.concatenate([
        np.asarray(anywhere, np.uint32), ordinary, ordinary | 0x80000000]))


# -- f16 on the reference ----------------------------------------------------------------

@pytest.mark.fast
def test_f16_is_correctly_rounded_for_every_input():
    assert_correctly_rounded(tan.tan_f16, gmpy2.tan, 16, EVERY_F16)


# -- the same bytes on every backend -----------------------------------------------------

@pytest.fixture(scope="module")
def driver():
    with Driver() as drv:
        yield drv


@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_the_ir_operation_is_the_librarys_on_every_backend(driver, backend):
    """A program that uses ``ir.tan`` itself is given to each backend with the library's
    function written out (the worker host does it): MPFR's bytes on every backend, over
    the adversarial inputs, drawn bits and every f16 input, in a single dispatch and as the
    step of a sequence (of as many lanes: on cpu the same program, compiled once)."""
    rng = np.random.default_rng(5)
    ordinary = rng.integers(0x39000000, 0x4B000000, 4096, dtype=np.uint32)
    bits = np.concatenate([adversarial(), rng.integers(0, 2**32, 2048, dtype=np.uint32),
                           ordinary, ordinary | 0x80000000])
    chained = (rng.standard_normal(bits.size) * 100).astype(np.float32)
    operation_is_mpfrs(driver, backend, ir.tan, gmpy2.tan, bits, chained)


@pytest.mark.parametrize("floats", [ir.f32, ir.f16], ids=str)
def test_the_cpu_backends_helper_gives_the_references_bytes(driver, floats):
    """Past ``INLINE_CALLS`` calls in a kernel the cpu backend calls one numba helper
    written from the library's IR (vyre_cpu/mathlib.py): ``tan`` applied five times over,
    the same bytes as the reference, which writes each call out."""
    from vyre_cpu import codegen
    from vyre_cpu.mathlib import INLINE_CALLS

    rng = np.random.default_rng(9)
    x = (EVERY_F16.view(np.float16) if floats is ir.f16 else np.concatenate([
        adversarial().view(np.float32), (rng.standard_normal(4096) * 100).astype(np.float32)]))
    k = ir.Kernel(workgroup=(64,))
    src, out = k.read("x", floats), k.output("out", floats, x.size)
    i = k.let("i", ir.global_id())
    v = src[i]
    for _ in range(INLINE_CALLS + 1):
        v = ir.tan(v)
    out[i] = v
    program = k.build()
    assert f"mathlib_tan_{floats.value}(" in codegen.generate(program).source
    want = driver.dispatch(program, [x], backend="reference")[0]
    assert driver.dispatch(program, [x], backend="cpu")[0].tobytes() == want.tobytes()
