"""What the tests of the math library's functions share (test_mathlib_exp2, _exp, _log2):
MPFR's correctly rounded results, one-block programs of a function's IR, and the two
checks through worker processes every function passes the same way: its block gives the
reference's bytes on cpu and wgpu, and the IR operation itself (written out by the worker
host, or the cpu backend's helper) gives MPFR's bytes on every backend, in a dispatch and
as a sequence's step."""

from __future__ import annotations

from collections.abc import Callable

import gmpy2
import numpy as np

from vyre_core import SequenceBuilder, ir
from vyre_reference import run

#: MPFR's formats: precision with the hidden bit, and exponents for m * 2^e, m in [1/2, 1)
#: (so emin is one above the least normal's C exponent, minus the subnormal bits).
BINARY32 = gmpy2.context(precision=24, emin=-148, emax=128, subnormalize=True)
BINARY16 = gmpy2.context(precision=11, emin=-23, emax=16, subnormalize=True)
CANONICAL_NAN = {32: 0x7FC00000, 16: 0x7E00}
EVERY_F16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


def f32_bits(values) -> np.ndarray:
    return np.asarray(values, np.float32).view(np.uint32)


def mpfr(fn: Callable, bits: np.ndarray, width: int) -> np.ndarray:
    """MPFR's ``fn`` of each input (bits of an f32 or f16), rounded once to the format, as
    bits; a NaN is the canonical NaN (stores canonicalize)."""
    floats, unsigned = ((np.float32, np.uint32) if width == 32 else (np.float16, np.uint16))
    out = np.empty(bits.size, unsigned)
    with gmpy2.context(BINARY32 if width == 32 else BINARY16):
        for at, v in enumerate(bits.astype(unsigned).view(floats)):
            result = floats(float(fn(gmpy2.mpfr(float(v))))) if v == v else floats("nan")
            out[at] = CANONICAL_NAN[width] if np.isnan(result) else result.view(unsigned)
    return out


def block(function: Callable, width: int, lanes: int) -> ir.Program:
    """``out[i]`` = the bits of ``function`` of the bits of ``in[i]``: the function's IR
    in a one-block program."""
    unsigned, floats = (ir.u32, ir.f32) if width == 32 else (ir.u16, ir.f16)
    k = ir.Kernel(workgroup=(64,))
    source = k.read("x", unsigned)
    out = k.output("out", unsigned, lanes)
    i = k.let("i", ir.global_id())
    x = k.let("v", ir.bitcast(source[i], floats))
    out[i] = ir.bitcast(function(k, x), unsigned)
    return k.build()


def on_reference(function: Callable, width: int, bits: np.ndarray) -> np.ndarray:
    return run(block(function, width, bits.size), [bits])[0]


def same_bytes_on(driver, backend: str, functions: tuple[Callable, Callable],
                  f32: np.ndarray) -> None:
    """The f32 function over ``f32`` and the f16 one over every f16 input give the
    reference's bytes on ``backend``."""
    for width, function, bits in ((32, functions[0], f32), (16, functions[1], EVERY_F16)):
        program = block(function, width, bits.size)
        want = driver.dispatch(program, [bits], backend="reference")[0]
        got = driver.dispatch(program, [bits], backend=backend)[0]
        assert got.tobytes() == want.tobytes(), f"{function.__name__} on {backend}"


def whole_workgroups(bits: np.ndarray, workgroup: int = 64) -> np.ndarray:
    """``bits`` repeated from its start up to a whole number of workgroups: a ragged last
    workgroup makes the cpu backend compile a kernel's checked version beside its proven
    one (a second numba compile, seconds for a library function), which
    tests/test_cpu_proven.py covers; the tests of a function's values need one compile."""
    return np.resize(bits, -(-bits.size // workgroup) * workgroup)


#: The IR's operations of two operands (the others take one)
BINARY_OPS = (ir.pow, ir.atan2)


def op_program(op: Callable, floats: ir.DType) -> ir.Program:
    """``out[i] = op(a[i])`` (``op(a[i], b[i])`` for pow and atan2): the IR operation
    itself, as a user writes it, over buffers of no declared length (``out`` read-write,
    given zeros). One program per (op, type) whatever the inputs' length: the cpu backend
    compiles it once per test run (numba's cache on disk is the session's), and every
    test of the operation dispatches this one (each function's module,
    test_transcendental_ops, test_exhaustive). Its inputs are whole workgroups
    (``apply``): the program checks no bounds."""
    k = ir.Kernel(workgroup=(64,))
    args = [k.read(name, floats) for name in ("a", "b")[:1 + (op in BINARY_OPS)]]
    out = k.read_write("out", floats)
    i = k.let("i", ir.global_id())
    out[i] = op(*(a[i] for a in args))
    return k.build()


def apply(driver, backend: str, op: Callable, floats: ir.DType, *operands: np.ndarray,
          config=None) -> np.ndarray:
    """``op`` over ``operands`` (of ``floats``'s storage type, one length) on ``backend``,
    by ``op_program``: the operands repeated to whole workgroups, the results cut back."""
    padded = [whole_workgroups(np.asarray(a)) for a in operands]
    args = [*padded, np.zeros_like(padded[0])]
    got = driver.dispatch(op_program(op, floats), args, backend=backend, config=config)[0]
    return np.asarray(got)[:len(operands[0])]


def operation_is_mpfrs(driver, backend: str, op: Callable, fn: Callable, f32: np.ndarray,
                       chained: np.ndarray) -> None:
    """``op`` (``ir.exp2``, ...) gives MPFR's ``fn`` on ``backend``: over ``f32`` and every
    f16 input, and as two steps of a sequence, the second on the first's results, from
    the f32 values ``chained`` (repeated to ``f32``'s length, whole workgroups)."""
    for floats, bits, width in ((ir.f32, f32, 32), (ir.f16, EVERY_F16, 16)):
        values = bits.view(np.float32 if width == 32 else np.float16)
        got = apply(driver, backend, op, floats, values)
        assert got.view(bits.dtype).tobytes() == mpfr(fn, bits, width).tobytes(), \
            f"{op.__name__} on f{width} on {backend}"
    # (the steps are the dispatch's own program: compiled once on a backend, not twice)
    lanes = whole_workgroups(f32).size
    chained = np.resize(chained, lanes)
    b = SequenceBuilder()
    b.input("x", ir.f32, lanes)
    b.transient("t", ir.f32, lanes)
    b.transient("u", ir.f32, lanes)
    b.step(op_program(op, ir.f32), {"a": "x", "out": "t"})
    b.step(op_program(op, ir.f32), {"a": "t", "out": "u"})
    t, u = driver.dispatch(b.build(returns=["t", "u"]), [chained], backend=backend)
    want_t = mpfr(fn, chained.view(np.uint32), 32)
    assert t.view(np.uint32).tobytes() == want_t.tobytes(), f"a sequence's step on {backend}"
    assert u.view(np.uint32).tobytes() == mpfr(fn, want_t, 32).tobytes()


def assert_correctly_rounded(function: Callable, fn: Callable, width: int,
                             bits: np.ndarray) -> None:
    """``function``'s IR on the reference gives MPFR's ``fn`` for every input of ``bits``
    (the first wrong ones named)."""
    got, want = on_reference(function, width, bits), mpfr(fn, bits, width)
    wrong = np.flatnonzero(got != want)
    digits = width // 4
    assert wrong.size == 0, f"{function.__name__} misrounds " + ", ".join(
        f"{int(bits[at]):0{digits}x}: got {int(got[at]):0{digits}x}, "
        f"want {int(want[at]):0{digits}x}" for at in wrong[:8])


def assert_exception_list(inputs: list[int], results: list[int], fn: Callable,
                          fast: Callable) -> None:
    """Sorted (the bisection needs it), each result MPFR's, and each entry needed: the
    function's fast path (``fast(k, x)``, before the list) gets every one wrong (an entry
    it gets right is a stale list)."""
    listed = np.array(inputs, np.uint32)
    assert np.all(np.diff(listed.astype(np.int64)) > 0)
    assert list(results) == mpfr(fn, listed, 32).tolist()
    assert not np.any(on_reference(fast, 32, listed) == np.array(results, np.uint32)), \
        "an exception the fast path gets right"
