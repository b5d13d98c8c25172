"""The integer types u8, u16, i8, i16, u64 and i64 beside u32 and i32: every integer op and
cast against the corpus's model in Python integers (vyre_core.conformance.cases_widths) over
random and edge values, on the reference in this process and on every backend that claims
the type through workers; u64 and i64 are gated (``dtype.u64``/``dtype.i64`` ops), so a
backend without them is never routed them; 8- and 16-bit buffers of odd lengths, stored
from every invocation at once and in workgroup memory."""

from __future__ import annotations

import numpy as np
import pytest

from vyre_core import Driver, ir
from vyre_core.config import DispatchConfig
from vyre_core.conformance.cases_widths import INT_TYPES as TYPES
from vyre_core.conformance.cases_widths import WIDE, edges, split_case
from vyre_core.errors import NoCapableBackendError, UnsupportedFeatureError, ValidationError
from vyre_reference import run as reference_run

N = 2048


def inputs(t: ir.DType) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(t.bits + t.is_signed)
    lo, hi = t.int_range
    a = rng.integers(lo, hi, N, dtype=t.value_np, endpoint=True)
    b = rng.integers(lo, hi, N, dtype=t.value_np, endpoint=True)
    e = np.array(edges(t), t.value_np)
    a[:e.size ** 2] = np.repeat(e, e.size)  # every pair of edge values
    b[:e.size ** 2] = np.tile(e, e.size)
    b[-64:] = rng.integers(-3, 4, 64).astype(t.value_np) if t.is_signed else b[-64:] % 5
    s = rng.integers(0, 2**32, N, dtype=np.uint32)
    s[:80] = np.arange(80)
    return a, b, s


def check(t: ir.DType, run, where: str, types: tuple = tuple(TYPES), per: int = 24) -> None:
    a, b, s = inputs(t)
    for case in split_case(t.value, t, a.tolist(), b.tolist(), s.tolist(), types, per):
        got = run(case.program, list(case.inputs))
        for out, want, have in zip(case.program.outputs, case.expected, got, strict=True):
            bad = np.flatnonzero(want.view(f"u{want.itemsize}") != have.view(f"u{have.itemsize}"))
            assert bad.size == 0, (f"{where} {t.value} {out.name}: a={a[bad[0]]} b={b[bad[0]]} "
                                   f"s={s[bad[0]]}: got {have[bad[0]]}, want {want[bad[0]]} "
                                   f"({bad.size} differ)")


@pytest.mark.fast
@pytest.mark.parametrize("t", TYPES, ids=str)
def test_the_reference_follows_the_integer_model(t):
    check(t, reference_run, "reference")


@pytest.fixture(scope="module")
def driver():
    with Driver() as drv:
        yield drv


@pytest.mark.parametrize("t", TYPES, ids=str)
def test_every_backend_claiming_the_type_follows_the_model(driver, t):
    # (cpu binds any number of buffers: every output in one program, one numba compile a
    # type where 24 to a program made two; for u16, 8.5 s against 12.6 s on a busy machine)
    check(t, lambda prog, args: driver.dispatch(prog, args, backend="cpu"), "cpu", per=1000)
    if t not in WIDE:
        check(t, lambda prog, args: driver.dispatch(prog, args, backend="wgpu"), "wgpu",
              tuple(d for d in TYPES if d not in WIDE))


def narrow_program(t: ir.DType, n: int, workgroup: int = 64) -> ir.Program:
    """out[i] = in[i] * 3 + in[i + 1] (past the end: 0), through workgroup memory of ``t``
    with a barrier between the store and the neighbour's load; ``inc`` bumped in place."""
    k = ir.Kernel(workgroup=(workgroup,))
    x = k.read("x", t)
    inc = k.read_write("inc", t)
    out = k.output("out", t, n)
    tile = k.workgroup_buffer("tile", t, workgroup + 1)
    i = k.let("i", ir.global_id())
    lid = k.let("lid", ir.local_id())
    tile[lid] = x[i]
    with k.if_(lid == workgroup - 1):
        tile[lid + 1] = x[i + 1]
    k.barrier()
    with k.if_(i < n):
        out[i] = tile[lid] * 3 + tile[lid + 1]
        inc[i] = inc[i] + 1
    return k.build()


@pytest.mark.parametrize("t", [ir.u8, ir.i8, ir.u16, ir.i16], ids=str)
@pytest.mark.parametrize("n", [1, 1003])
def test_packed_buffers_of_odd_lengths_and_workgroup_memory(driver, t, n):
    """Every invocation stores its own element (up to four to a word, all at once), loads
    past the end read 0, the last word's padding is neither read nor returned. 1: one
    invocation, a word of padding; 1003: a ragged last workgroup, three 8-bit values or
    one 16-bit value in the last word (3 did that in one workgroup, a compile each)."""
    rng = np.random.default_rng(n)
    lo, hi = t.int_range
    x = rng.integers(lo, hi, n, dtype=t.value_np, endpoint=True)
    inc = rng.integers(lo, hi, n, dtype=t.value_np, endpoint=True)
    prog = narrow_program(t, n)
    wide = x.astype(np.int64)
    neighbour = np.append(wide[1:], 0)
    out = ((wide * 3 + neighbour) & ((1 << t.bits) - 1)).astype(t.storage_np.str.replace(
        "i", "u")).view(t.value_np)
    bumped = (inc.astype(np.int64) + 1).astype(t.value_np)
    for backend in ("reference", "cpu", "wgpu"):
        got_inc, got_out = driver.dispatch(prog, [x, inc], backend=backend)  # (declaration order)
        assert got_out.dtype == t.value_np and len(got_out) == n and len(got_inc) == n
        assert got_out.tobytes() == out.tobytes(), backend
        assert got_inc.tobytes() == bumped.tobytes(), backend


def wide_program() -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.u64)
    out = k.output("out", ir.u64, 4)
    i = k.let("i", ir.global_id())
    with k.if_(i < 4):
        out[i] = x[i] * 3 + ir.u64(2**63)
    return k.build()


def test_64_bit_integers_route_around_a_backend_without_them(driver):
    x = np.array([1, 2**63, 2**64 - 1, 5], np.uint64)
    want = (x * np.uint64(3) + np.uint64(2**63)).astype(np.uint64)
    prog = wide_program()
    assert "dtype.u64" in prog.requirements().ops
    assert driver.dispatch(prog, [x])[0].tobytes() == want.tobytes()  # (cpu or reference)
    assert driver.route(prog).backend in ("cpu", "reference")
    with pytest.raises(NoCapableBackendError, match=r"dtype\.u64"):
        driver.dispatch(prog, [x], backend="wgpu")


@pytest.mark.fast
def test_a_backend_claiming_the_default_ops_is_never_given_them():
    """Written before them, a plugin claims ir.DEFAULT_OPS: no dtype.<name> op among them."""
    assert {f"dtype.{t.value}" for t in (ir.u8, ir.u16, ir.i8, ir.i16, ir.u64, ir.i64)} <= \
        ir.NEWER_OPS & ir.ALL_OPS
    assert not any(op.startswith("dtype.") for op in ir.DEFAULT_OPS)


@pytest.mark.fast
@pytest.mark.parametrize(("make", "code"), [
    (lambda a, b, u: -a, "V010"),                       # u8 has no negation
    (lambda a, b, u: a + b, "V007"),                    # u8 + i16: no implicit widening
    (lambda a, b, u: a << b, "V007"),                   # shift amounts are u32
    (lambda a, b, u: ir.cast(a, ir.u32) + u, None),     # (fine: cast first)
    (lambda a, b, u: ir.fma(a, a, a), "V010"),  # fma is for floats
])
def test_misused_integer_types_are_refused_with_a_code(make, code):
    k = ir.Kernel()
    a, b, u = k.read("a", ir.u8), k.read("b", ir.i16), k.read("u", ir.u32)
    out = k.output("out", ir.u32, 1)
    k.let("x", make(a[0], b[0], u[0]))
    out[0] = u[0]
    if code is None:
        k.build()
        return
    with pytest.raises(ValidationError) as caught:
        k.build()
    assert [f["code"] for f in caught.value.findings] == [code]
    assert "Fix:" in str(caught.value)


@pytest.mark.fast
def test_literals_out_of_a_narrow_range_are_refused_with_a_fix():
    for t, value in ((ir.u8, 256), (ir.i8, -129), (ir.u16, -1), (ir.i64, 2**63), (ir.u64, -1)):
        with pytest.raises(ValueError, match=f"does not fit in {t.value}.*Fix:"):
            ir.lit(value, t)
    k = ir.Kernel()
    a = k.read("a", ir.u8)
    with pytest.raises(ValueError, match=r"300 does not fit in u8 .* make the other operand "
                                         r"u16 with \.cast\(ir\.u16\)"):
        a[0] + 300
    with pytest.raises(ValueError, match=r"does not fit in u32 .* operand u64 with"):
        ir.lit(np.uint64(2**63))                  # (a plain int: too big for u32)
    with pytest.raises(ValueError, match=r"-1 does not fit in u64 .* operand i64 with"):
        ir.lit(-1, ir.u64)
    assert (a[0] + 255).dtype is ir.u8
    assert ir.lit(np.int64(7)).dtype is ir.u32      # numpy's default int: a plain int
    assert ir.lit(np.int8(-7)).dtype is ir.i8       # a chosen width is kept


@pytest.mark.fast
def test_atomics_and_subgroup_reductions_stay_32_bit():
    k = ir.Kernel(workgroup=(8,))
    buf = k.read_write("b", ir.u8)
    k.let("old", buf.atomic_add(0, ir.u8(1)))
    with pytest.raises(ValidationError, match="V017: atomic add on u8"):
        k.build()
    k = ir.Kernel(workgroup=(8,), subgroup_size=8)
    buf = k.read_write("b", ir.u8)
    with pytest.raises(TypeError, match=r"subgroup add is not defined .*U8.*Fix:"):
        k.subgroup("add", buf[0])


def test_wgpu_refuses_workgroup_buffers_it_would_declare_too_big(driver):
    """WebGPU rounds each workgroup variable up to 16 bytes, and wgpu packs 8/16-bit ones
    into whole words: buffers the program counts at exactly the device's limit do not fit
    as declared, so wgpu refuses them at compile (a Fix naming why) and routing runs them
    elsewhere."""
    import vyre_wgpu.backend
    from vyre_workers.backend_host import BackendHost

    host = BackendHost(vyre_wgpu.backend)
    host.prepare()
    try:
        limit = host.capabilities().max_workgroup_memory_bytes
        k = ir.Kernel(workgroup=(64,))
        out = k.output("out", ir.u8, 64)
        big = k.workgroup_buffer("big", ir.u8, limit - 4)
        small = k.workgroup_buffer("small", ir.u8, 2)
        half = k.workgroup_buffer("half", ir.i16, 1)
        i = k.let("i", ir.local_id())
        big[i] = ir.u8(1)
        small[i % 2] = ir.u8(2)
        half[0] = ir.i16(-1)
        k.barrier()
        out[i] = big[i] + small[0] + half[0].cast(ir.u8)
        prog = k.build()
        assert prog.requirements().workgroup_memory_bytes == limit  # (what routing checks)
        with pytest.raises(UnsupportedFeatureError, match=r"(?s)as WGSL declares them.*Fix:"):
            host.dispatch(prog, [], DispatchConfig())
    finally:
        host.shutdown()
    assert driver.dispatch(prog, [])[0].tobytes() == np.full(64, 2, np.uint8).tobytes()
