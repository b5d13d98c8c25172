"""vyre_core.mathlib.exp2, ``2^x`` correctly rounded (docs/design-42.md, step 5), held to
MPFR's correctly rounded results (gmpy2 in the binary32 and binary16 contexts) bit for bit:
on the reference in this process over drawn f32 bits and adversarial ones (every integer
exponent, the subnormal results sampled densely, next to overflow, tiny inputs, zeros,
NaNs with payloads, infinities, every input of the exception list) and over every f16
input; then the same programs give the reference's bytes on cpu and wgpu.
(``vyre conform --exhaustive --all-inputs --op exp2`` checks every f32 input.)"""

from __future__ import annotations

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vyre_core import Driver, SequenceBuilder, ir
from vyre_core.mathlib import exp2
from vyre_reference import run

#: MPFR's formats: precision with the hidden bit, and exponents for m * 2^e, m in [1/2, 1)
#: (so emin is one above the least normal's C exponent, minus the subnormal bits).
BINARY32 = gmpy2.context(precision=24, emin=-148, emax=128, subnormalize=True)
BINARY16 = gmpy2.context(precision=11, emin=-23, emax=16, subnormalize=True)
CANONICAL_NAN = {32: 0x7FC00000, 16: 0x7E00}


def correct(bits: np.ndarray, width: int) -> np.ndarray:
    """MPFR's ``2^x`` of each input (bits of an f32 or f16), rounded once to the format,
    as bits; a NaN's is the canonical NaN (stores canonicalize)."""
    floats, unsigned = ((np.float32, np.uint32) if width == 32 else (np.float16, np.uint16))
    out = np.empty(bits.size, unsigned)
    with gmpy2.context(BINARY32 if width == 32 else BINARY16):
        for at, v in enumerate(bits.astype(unsigned).view(floats)):
            if np.isnan(v):
                out[at] = CANONICAL_NAN[width]
            else:
                out[at] = floats(float(gmpy2.exp2(gmpy2.mpfr(float(v))))).view(unsigned)
    return out


def program(width: int, lanes: int) -> ir.Program:
    """``out[i]`` = the bits of ``2^x`` for the bits ``x`` of ``in[i]``: one block."""
    unsigned, floats = (ir.u32, ir.f32) if width == 32 else (ir.u16, ir.f16)
    function = exp2.exp2_f32 if width == 32 else exp2.exp2_f16
    k = ir.Kernel(workgroup=(64,))
    source = k.read("x", unsigned)
    out = k.output("out", unsigned, lanes)
    i = k.let("i", ir.global_id())
    x = k.let("v", ir.bitcast(source[i], floats))
    out[i] = ir.bitcast(function(k, x), unsigned)
    return k.build()


#: The inputs whose results lie nearest a rounding boundary (within 2^-48, relative) that
#: the exhaustive run found (tools/math_exceptions.py): the fast path alone misrounds them.
HARD = [0x33B8AA3B, 0x37E338EB, 0x383ECB1D, 0x3B429D37, 0x3B53AA14, 0x3C02A9AD, 0x3DC9ABE2,
        0xB4FDEA14, 0xB5160A52, 0xB63B8CF0, 0xB8D3D026, 0xBCAF4D02, 0xBCF3A937]


def f32_bits(values) -> np.ndarray:
    return np.asarray(values, np.float32).view(np.uint32)


def adversarial() -> np.ndarray:
    """Inputs where 2^x is exact, a tie, subnormal, near overflow or near 1, the special
    values, the hard cases and every listed exception."""
    f32 = np.float32
    integers = np.arange(-160, 140, dtype=f32)  # (-149..127 exact; beyond 0 and inf)
    # subnormal results and the least normal ones: x in [-150, -124] at every 1/64 (the
    # table's points) and at 2048 bit patterns spread evenly between (every reduced
    # argument's size)
    subnormal = np.concatenate([np.arange(-150 * 64, -124 * 64 + 1, dtype=f32) / 64,
                                np.linspace(0xC2F80000, 0xC3160000, 2048).astype(
                                    np.uint32).view(f32)])
    around = [-150, -149.5, -149, -126, -125.5, 128, 127, -151, 0.5, -0.5, 1, -1]
    near = [np.nextafter(f32(v), f32(d)) for v in around for d in (-np.inf, np.inf)]
    tiny = [2.0**-149, -(2.0**-149), 2.0**-126, 2.0**-30, -(2.0**-30), 2.0**-25, -(2.0**-25),
            2.0**-24, -(2.0**-24), 2.0**-26, -(2.0**-26)]
    tiny += [np.nextafter(f32(v), f32(d)) for v in tiny for d in (0, 1)]
    values = np.concatenate([integers, subnormal, f32_bits(around + near + tiny).view(f32)])
    specials = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                0x7F800001, 0xFFFFFFFF, 0x7FBFFFFF, 0x7F7FFFFF, 0xFF7FFFFF]
    return np.concatenate([values.view(np.uint32), np.array(specials + HARD, np.uint32),
                           np.array(exp2._EXCEPTION_INPUTS, np.uint32)])


def on_reference(width: int, bits: np.ndarray) -> np.ndarray:
    return run(program(width, bits.size), [bits])[0]


# -- the oracle's contexts ---------------------------------------------------------------

@pytest.mark.fast
def test_the_oracle_rounds_as_binary32_and_binary16():
    """Exact powers of two are themselves; half the least subnormal (a tie) goes to +0,
    a hair above it to the least subnormal; the first power past the largest finite is
    infinity; a subnormal result lands on its grid (2^-126.5 to 22 significant bits)."""
    x = f32_bits([-149, -150, -149.99, 127, 128, 0, -126.5])
    want32 = f32_bits([2.0**-149, 0, 2.0**-149, 2.0**127, np.inf, 1, 0])
    want32[-1] = round(2**-126.5 * 2**149)  # (the subnormal's bits are its quanta)
    assert correct(x, 32).tolist() == want32.tolist()
    x16 = np.array([-24, -25, -24.99, 15, 16, 0, -14.5], np.float16).view(np.uint16)
    want16 = np.array([2.0**-24, 0, 2.0**-24, 2.0**15, np.inf, 1, 0], np.float16).view(
        np.uint16)
    want16[-1] = round(2**-14.5 * 2**24)
    assert correct(x16, 16).tolist() == want16.tolist()


# -- f32 on the reference ----------------------------------------------------------------

def check_f32(bits: np.ndarray) -> None:
    got, want = on_reference(32, bits), correct(bits, 32)
    wrong = np.flatnonzero(got != want)
    assert wrong.size == 0, "exp2_f32 misrounds " + ", ".join(
        f"{bits[at]:08x} ({bits[at:at + 1].view(np.float32)[0]!r}): got {got[at]:08x}, "
        f"want {want[at]:08x}" for at in wrong[:8])


@pytest.mark.fast
def test_f32_is_correctly_rounded_on_adversarial_inputs():
    check_f32(adversarial())


@pytest.mark.fast
def test_the_exception_list_is_sorted_and_each_entry_is_needed_and_right():
    """Sorted (the bisection needs it), and each entry is a correctly rounded result that
    the fast path alone misses (an entry that is not needed is a stale list)."""
    inputs = np.array(exp2._EXCEPTION_INPUTS, np.uint32)
    assert np.all(np.diff(inputs.astype(np.int64)) > 0)
    results = np.array(exp2._EXCEPTION_RESULTS, np.uint32)
    assert results.tolist() == correct(inputs, 32).tolist()
    k = ir.Kernel(workgroup=(64,))
    source = k.read("x", ir.u32)
    out = k.output("out", ir.u32, inputs.size)
    i = k.let("i", ir.global_id())
    pair, scale = exp2._core(k, k.let("v", ir.bitcast(source[i], ir.f32)))
    out[i] = ir.bitcast(exp2.round_f32(k, pair, scale), ir.u32)
    fast = run(k.build(), [inputs])[0]
    assert not np.any(fast == results), "an exception the fast path gets right"


@pytest.mark.fast
@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64),
       st.lists(st.integers(0x32000000, 0x43100000), min_size=1, max_size=64))
def test_f32_is_correctly_rounded_for_drawn_bits(anywhere, ordinary):
    """Any bits, and bits of the inputs whose results are neither 0, 1 nor infinity."""
    ordinary = np.asarray(ordinary, np.uint32)
    check_f32(np.concatenate([np.asarray(anywhere, np.uint32), ordinary,
                              ordinary | 0x80000000]))


# -- f16 on the reference ----------------------------------------------------------------

EVERY_F16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


@pytest.mark.fast
def test_f16_is_correctly_rounded_for_every_input():
    got = on_reference(16, EVERY_F16)
    want = correct(EVERY_F16, 16)
    wrong = np.flatnonzero(got != want)
    assert wrong.size == 0, "exp2_f16 misrounds " + ", ".join(
        f"{at:04x}: got {got[at]:04x}, want {want[at]:04x}" for at in wrong[:8])


# -- the same bytes on every backend -----------------------------------------------------

@pytest.fixture(scope="module")
def driver():
    with Driver() as drv:
        yield drv


@pytest.mark.parametrize("backend", ["cpu", "wgpu"])
def test_every_backend_gives_the_references_bytes(driver, backend):
    rng = np.random.default_rng(42)
    f32 = np.concatenate([adversarial(), rng.integers(0, 2**32, 4096, dtype=np.uint32),
                          rng.integers(0x32000000, 0x43100000, 4096, dtype=np.uint32)])
    f32 = np.concatenate([f32, f32[-4096:] | 0x80000000]).astype(np.uint32)
    for width, bits in ((32, f32), (16, EVERY_F16)):
        prog = program(width, bits.size)
        want = driver.dispatch(prog, [bits], "reference")[0]
        got = driver.dispatch(prog, [bits], backend)[0]
        assert got.tobytes() == want.tobytes(), f"exp2 f{width} on {backend}"


def op_program(floats: ir.DType, lanes: int) -> ir.Program:
    """``out[i] = ir.exp2(x[i])``: the IR operation itself, as a user writes it."""
    k = ir.Kernel(workgroup=(64,))
    x, out = k.read("x", floats), k.output("out", floats, lanes)
    i = k.let("i", ir.global_id())
    out[i] = ir.exp2(x[i])
    return k.build()


@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_the_ir_operation_is_the_librarys_on_every_backend(driver, backend):
    """A program that uses ``ir.exp2`` itself is given to each backend with the library's
    function written out (the worker host does it): MPFR's bytes on every backend, in a
    single dispatch and as the step of a sequence."""
    rng = np.random.default_rng(5)
    f32 = np.concatenate([adversarial(), rng.integers(0, 2**32, 2048, dtype=np.uint32)])
    for floats, bits, width in ((ir.f32, f32, 32), (ir.f16, EVERY_F16, 16)):
        values = bits.view(np.float32 if width == 32 else np.float16)
        got = driver.dispatch(op_program(floats, bits.size), [values], backend)[0]
        assert got.view(bits.dtype).tobytes() == correct(bits, width).tobytes(), \
            f"ir.exp2 on f{width} on {backend}"
    lanes = 4096
    b = SequenceBuilder()
    b.input("x", ir.f32, lanes)
    b.transient("t", ir.f32, lanes)
    b.transient("u", ir.f32, lanes)
    b.step(op_program(ir.f32, lanes), {"x": "x", "out": "t"})
    b.step(op_program(ir.f32, lanes), {"x": "t", "out": "u"})
    x = (rng.standard_normal(lanes) * 8).astype(np.float32)
    t, u = driver.dispatch_sequence(b.build(returns=["t", "u"]), [x], backend=backend)
    want_t = correct(x.view(np.uint32), 32)
    assert t.view(np.uint32).tobytes() == want_t.tobytes(), f"a sequence's step on {backend}"
    assert u.view(np.uint32).tobytes() == correct(want_t, 32).tobytes()
