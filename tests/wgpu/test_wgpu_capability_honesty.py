"""The wgpu backend's capability report, held against what the device really does
(BackendHost(vyre_wgpu.backend) in this process).

* Every capability reported true that a vyre program can exercise (f16, f64, workgroup
  memory up to its limit, the workgroup size per axis and in total, every atomic op,
  barriers) runs a kernel using it, with outputs exactly the reference's.
* Every capability reported false that a program could need is false because the IR
  cannot express it (bf16, tensor cores, subgroups), and ``supported_ops`` names only ops
  of the IR.
* Limits (workgroup axis, invocations, workgroup memory, workgroups per grid axis): a
  launch exactly at a reported limit runs; one just over it is refused with
  LaunchLimitError before the device is touched, and routing rejects the program shapes
  (workgroup and its memory) too.
* A device without f16/f64 (the adapter's features filtered, so they are never requested)
  reports them false and refuses f16/f64 programs at compile, with a Fix.
* The loop budget (lavapipe stops an invocation after 65,535 loop iterations): a run-time
  loop past it is an error and its outputs are discarded, one under it runs; routing
  refuses a static loop past the reported ``max_loop_trip``.
* f64 sin/cos/exp/log and the f64 -> f16 cast pass routing (an op set cannot say "not on
  f64") but are refused at compile, never run wrongly; the Driver routes around it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

import vyre_reference.backend as reference_backend
import vyre_wgpu.backend as backend
from vyre_core import ir
from vyre_core.compare import outputs_divergence
from vyre_core.config import DispatchConfig
from vyre_core.conformance import honesty
from vyre_core.errors import (
    LaunchLimitError,
    NoCapableBackendError,
    UnsupportedFeatureError,
)
from vyre_core.ir import ALL_OPS, AtomicOp, DType
from vyre_core.registry import register_plugin
from vyre_core.routing import Router, rejection_reasons
from vyre_reference import run as reference_run
from vyre_wgpu.adapter import request_adapter
from vyre_wgpu.device import Device
from vyre_wgpu.lowering import lower
from vyre_workers.backend_host import BackendHost

LAVAPIPE_LOOP_TRIP = 65535


@pytest.fixture
def caps(host):
    return host.capabilities()


@pytest.fixture
def untouched(monkeypatch):
    """Fails the test if the device compiles or runs anything: a refusal must come first."""
    calls: list[str] = []
    dev = backend.device()
    for name in ("compile_program", "run_program"):
        def spy(*args: Any, _name: str = name, **kwargs: Any) -> Any:
            calls.append(_name)
            raise AssertionError(f"the device was asked to {_name}")
        monkeypatch.setattr(dev, name, spy)
    yield calls
    assert calls == []


def run_exact(host, program: ir.Program, inputs: list[np.ndarray],
              config: DispatchConfig | None = None) -> list[np.ndarray]:
    """Dispatch on wgpu; every output byte-equal to the reference's."""
    config = config or DispatchConfig()
    got = host.dispatch(program, inputs, config)
    want = reference_run(program, inputs, grid=config.grid_override)
    assert len(got) == len(want)
    for buffer, g, w in zip(program.outputs, got, want, strict=True):
        assert g.dtype == w.dtype, buffer.name
        assert g.tobytes() == w.tobytes(), (buffer.name, g[:16], w[:16])
    return got


def refused_at_launch(host, program: ir.Program, inputs: list[np.ndarray], match: str,
                      config: DispatchConfig | None = None) -> LaunchLimitError:
    with pytest.raises(LaunchLimitError, match=match) as info:
        host.dispatch(program, inputs, config)
    assert "Fix:" in str(info.value)
    return info.value


# -- kernels ----------------------------------------------------------------------------------

def elementwise(dtype: DType, n: int) -> ir.Program:
    """sum = a + b and product = a * b, each rounded once in ``dtype``."""
    k = ir.Kernel(workgroup=(64,))
    a = k.read("a", dtype)
    b = k.read("b", dtype)
    total = k.output("sum", dtype, count=n)
    product = k.output("product", dtype, count=n)
    i = k.let("i", ir.global_id(0))
    total[i] = a[i] + b[i]
    product[i] = a[i] * b[i]
    return k.build()


def invocation_ids(workgroup: tuple[int, int, int], groups: int = 2) -> ir.Program:
    """Every invocation of ``groups`` workgroups (along x) writes 1 + its linear global
    id, computed from its global ids, to the slot of its local and workgroup ids."""
    wx, wy, wz = workgroup
    per_group = wx * wy * wz
    k = ir.Kernel(workgroup=workgroup)
    out = k.output("out", ir.u32, count=per_group * groups)
    local = k.let("local", ir.local_id(0) + ir.local_id(1) * wx + ir.local_id(2) * (wx * wy))
    slot = k.let("slot", ir.workgroup_id(0) * per_group + local)
    out[slot] = ir.global_id(0) + ir.global_id(1) * (groups * wx) \
        + ir.global_id(2) * (groups * wx * wy) + 1
    return k.build()


def assert_every_invocation_ran(out: np.ndarray, workgroup: tuple[int, int, int],
                                groups: int = 2) -> None:
    wx, wy, wz = workgroup
    wid, lz, ly, lx = np.meshgrid(np.arange(groups), np.arange(wz), np.arange(wy),
                                  np.arange(wx), indexing="ij")
    want = (wid * wx + lx) + ly * (groups * wx) + lz * (groups * wx * wy) + 1
    assert out.tolist() == want.reshape(-1).tolist()
    assert len(set(out.tolist())) == groups * wx * wy * wz


def workgroup_memory(words: int, workgroup: int = 256, groups: int = 2) -> ir.Program:
    """A workgroup buffer of ``words`` u32: every slot written (but the last of each
    invocation's share, to see the zero fill), a barrier, then read back reversed."""
    share = -(-words // workgroup)
    k = ir.Kernel(workgroup=(workgroup,))
    seed = k.read("seed", ir.u32)
    shared = k.workgroup_buffer("shared", ir.u32, count=words)
    out = k.output("out", ir.u32, count=words * groups)
    lid = k.let("lid", ir.local_id(0))
    wid = k.let("wid", ir.workgroup_id(0))
    with k.loop("j", 0, share - 1) as j:
        slot = k.let("slot", lid * share + j)
        shared[slot] = slot * 2654435761 + seed[wid]
    k.barrier()
    with k.loop("m", 0, share) as m:
        slot = k.let("rslot", lid * share + m)
        out[wid * words + slot] = shared[(words - 1) - slot]
    return k.build()


# -- what is reported true runs, exactly ------------------------------------------------------

def test_the_probed_report(caps, strict):
    """On lavapipe (CI) the report is what these tests exercise."""
    if strict:
        assert caps.supports_f16 and caps.supports_f64
        assert caps.max_workgroup_size == (1024, 1024, 1024)
        assert caps.max_invocations_per_workgroup == 1024
        assert caps.max_workgroup_memory_bytes == 32768
        assert caps.max_loop_trip == LAVAPIPE_LOOP_TRIP


@pytest.mark.parametrize("dtype", [ir.f16, ir.f64], ids=["f16", "f64"])
def test_a_float_type_reported_true_runs_exactly(host, caps, dtype):
    supported = caps.supports_f16 if dtype is ir.f16 else caps.supports_f64
    case = honesty.float_arithmetic(dtype)  # the conformance kit's probe
    if not supported:
        with pytest.raises(UnsupportedFeatureError, match="Fix:"):
            host.compile(case.program)
        return
    outputs = run_exact(host, case.program, list(case.inputs))
    assert outputs_divergence(case.program, case.expected, outputs) is None


def test_workgroup_memory_exactly_at_the_limit_runs(host, caps):
    limit = caps.max_workgroup_memory_bytes
    words = limit // 4
    assert limit > 0 and limit % 4 == 0 and words % 256 == 0
    program = workgroup_memory(words)
    assert program.requirements().workgroup_memory_bytes == limit
    out, = run_exact(host, program, [np.array([12345, 777], np.uint32)],
                     DispatchConfig(grid_override=(2, 1, 1)))
    assert (out == 0).sum() == 2 * 256  # the slot each invocation left unwritten reads 0
    assert out[words - 1] == 12345  # slot 0 of workgroup 0: 0 * k + seed[0]
    assert out[2 * words - 1] == 777  # slot 0 of workgroup 1


def test_workgroup_memory_over_the_limit_is_refused_before_running(host, caps, untouched):
    limit = caps.max_workgroup_memory_bytes
    program = workgroup_memory(limit // 4 + 1)
    refused_at_launch(host, program, [np.array([1, 2], np.uint32)],
                      f"workgroup memory is {limit + 4} bytes, the limit is {limit}",
                      DispatchConfig(grid_override=(2, 1, 1)))
    reasons = rejection_reasons(program.requirements(), caps)
    assert f"workgroup memory is {limit + 4} bytes, the limit is {limit}" in reasons


@pytest.mark.parametrize("axis", [0, 1, 2], ids=["x", "y", "z"])
def test_the_workgroup_size_limit_of_each_axis(host, caps, axis):
    limit = caps.max_workgroup_size[axis]
    assert limit <= caps.max_invocations_per_workgroup
    at = tuple(limit if a == axis else 1 for a in range(3))
    out, = run_exact(host, invocation_ids(at), [], DispatchConfig(grid_override=(2, 1, 1)))
    assert_every_invocation_ran(out, at)

    over = tuple(limit + 1 if a == axis else 1 for a in range(3))
    name = "xyz"[axis]
    dev = backend.device()
    before = dev.cache_snapshot()
    refused_at_launch(host, invocation_ids(over), [], f"workgroup axis {name} is {limit + 1}",
                      DispatchConfig(grid_override=(2, 1, 1)))
    assert dev.cache_snapshot() == before  # nothing was compiled
    assert f"workgroup axis {name} is {limit + 1}, the limit is {limit}" in \
        rejection_reasons(invocation_ids(over).requirements(), caps)


def _two_axes(total: int, caps) -> tuple[int, int, int] | None:
    """A workgroup (x, y, 1) of exactly ``total`` invocations within the axis limits,
    with y > 1 (so no single axis is at its limit)."""
    mx, my, _ = caps.max_workgroup_size
    for y in range(2, my + 1):
        if total % y == 0 and total // y <= mx and total // y > 1:
            return (total // y, y, 1)
    return None


def test_the_invocations_limit(host, caps):
    limit = caps.max_invocations_per_workgroup
    at = _two_axes(limit, caps)
    assert at is not None
    out, = run_exact(host, invocation_ids(at), [], DispatchConfig(grid_override=(2, 1, 1)))
    assert_every_invocation_ran(out, at)

    over = _two_axes(limit + 1, caps)
    assert over is not None, f"{limit + 1} invocations do not factor within the axes"
    refused_at_launch(host, invocation_ids(over), [],
                      f"has {limit + 1} invocations, the limit is {limit}",
                      DispatchConfig(grid_override=(2, 1, 1)))
    assert f"workgroup {over} has {limit + 1} invocations, the limit is {limit}" in \
        rejection_reasons(invocation_ids(over).requirements(), caps)


def test_the_invocations_limit_is_checked_before_the_device(host, caps, untouched):
    over = _two_axes(caps.max_invocations_per_workgroup + 1, caps)
    refused_at_launch(host, invocation_ids(over), [], "invocations",
                      DispatchConfig(grid_override=(2, 1, 1)))


def grid_rows(rows: int) -> ir.Program:
    """One single-invocation workgroup per row along y, each writing its row."""
    k = ir.Kernel(workgroup=(1,))
    out = k.output("out", ir.u32, count=rows)
    out[ir.workgroup_id(1)] = ir.workgroup_id(1) * 3 + 1
    return k.build()


def test_a_grid_exactly_at_the_workgroups_per_dimension_limit_runs(host, caps):
    limit = caps.max_workgroups_per_dimension
    out, = run_exact(host, grid_rows(limit), [], DispatchConfig(grid_override=(1, limit, 1)))
    assert out.tolist() == list(range(1, 3 * limit + 1, 3))


@pytest.mark.parametrize("launch", [(1, 1, 1), (0, 1, 1), (1, 0, 1), (0, 0, 1)],
                         ids=["y", "2-D x", "2-D x and y", "x and y past"])
def test_a_grid_past_the_workgroups_per_dimension_limit_is_folded_and_exact(host, caps,
                                                                            launch):
    """Any grid past the per-dimension limit is folded across axes (device fact
    max_grid_workgroups); the ids the program sees are the logical launch's."""
    limit = caps.max_workgroups_per_dimension
    grid = {(1, 1, 1): (1, limit + 1, 1), (0, 1, 1): (limit + 1, 2, 1),
            (1, 0, 1): (2, limit + 1, 1), (0, 0, 1): (limit + 2, 1, 2)}[launch]
    n = grid[0] * grid[1] * grid[2]
    k = ir.Kernel(workgroup=(1,))
    out = k.output("out", ir.u32, count=n)
    x, y, z = (k.let(a, ir.workgroup_id(i)) for i, a in enumerate("xyz"))
    out[x + grid[0] * (y + grid[1] * z)] = x + y * 1000 + z * 1000000
    got, = run_exact(host, k.build(), [], DispatchConfig(grid_override=grid))
    gx, gy, gz = np.meshgrid(*(np.arange(g, dtype=np.uint32) for g in grid), indexing="ij")
    want = (gx + gy * 1000 + gz * 1000000).transpose(2, 1, 0).reshape(-1)
    assert got.tobytes() == want.tobytes()


def test_a_grid_past_what_folds_is_refused(host, caps, untouched):
    limit = caps.max_workgroups_per_dimension
    refused_at_launch(host, grid_rows(1), [], "the most this backend runs in one launch",
                      DispatchConfig(grid_override=(limit + 1, limit, 1)))


def test_every_atomic_op_reported_runs_exactly(host, caps):
    atomics = {f"atomic.{op.value}" for op in AtomicOp}
    assert atomics <= caps.supported_ops
    n = 1024
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.i32)
    contended = k.read_write("contended", ir.i32, count=7)     # one slot per op, all lanes
    own = k.read_write("own", ir.i32, count=2 * n)             # uncontended: old values too
    # (n invocations exactly: the grid is not inferred from the 2n-long outputs)
    olds = k.output("olds", ir.i32, count=2 * n)
    counts = k.output("counts", ir.u32, count=16)
    hist = k.workgroup_buffer("hist", ir.u32, count=16)        # atomics on workgroup memory
    i = k.let("i", ir.global_id(0))
    v = k.let("v", x[i])
    for slot, op in enumerate((AtomicOp.ADD, AtomicOp.SUB, AtomicOp.MIN, AtomicOp.MAX,
                               AtomicOp.AND, AtomicOp.OR, AtomicOp.XOR)):
        contended.atomic(op, slot, v)
    olds[i] = own.atomic(AtomicOp.EXCHANGE, i, v)
    olds[i + n] = own.atomic(AtomicOp.COMPARE_EXCHANGE, i + n, v, comparand=i.cast(ir.i32))
    hist.atomic_add(ir.cast(v, ir.u32) & 15, 1)
    k.barrier()
    with k.if_(ir.local_id(0) < 16):
        counts.atomic_add(ir.local_id(0), hist[ir.local_id(0)])
    program = k.build()
    assert {"atomics", "barriers", "workgroup_memory"} <= program.requirements().features

    rng = np.random.default_rng(7)
    xs = rng.integers(-2**31, 2**31, n, dtype=np.int32)
    start = np.array([5, 1000, 2**31 - 1, -2**31, -1, 0, 0x5A5A5A5A], np.int32)
    own0 = np.concatenate([rng.integers(-100, 100, n, dtype=np.int32),
                           np.where(np.arange(n) % 2 == 0, np.arange(n), -1).astype(np.int32)])
    got_contended, got_own, got_olds, got_counts = run_exact(
        host, program, [xs, start, own0], DispatchConfig(grid_override=(n // 64, 1, 1)))
    total = int(xs.astype(np.int64).sum())
    wrap = lambda v: int(np.array(v, np.int64).astype(np.int32))  # noqa: E731
    assert got_contended.tolist() == [
        wrap(5 + total), wrap(1000 - total), int(xs.min()), int(xs.max()),
        int(np.bitwise_and.reduce(xs)), int(np.bitwise_or.reduce(xs)),
        int(np.bitwise_xor.reduce(np.append(xs, start[6])))]
    assert got_counts.tolist() == np.bincount(xs.view(np.uint32) & 15, minlength=16).tolist()
    assert got_olds[:n].tolist() == own0[:n].tolist()
    assert got_own[:n].tolist() == xs.tolist()
    even = np.arange(n) % 2 == 0  # compare_exchange: wrote where own held i (even i)
    assert got_olds[n:].tolist() == own0[n:].tolist()
    assert got_own[n:].tolist() == np.where(even, xs, -1).tolist()


def test_barriers_order_storage_and_workgroup_writes(host, caps):
    n, wg = 4096, 256
    k = ir.Kernel(workgroup=(wg,))
    x = k.read("x", ir.u32)
    scratch = k.read_write("scratch", ir.u32, count=n)
    shared = k.workgroup_buffer("shared", ir.u32, count=wg)
    out = k.output("out", ir.u32, count=n)
    i = k.let("i", ir.global_id(0))
    lid = k.let("lid", ir.local_id(0))
    base = k.let("base", ir.workgroup_id(0) * wg)
    scratch[i] = x[i] * 3
    shared[lid] = x[i] ^ 0xFFFF
    k.barrier()
    partner = k.let("partner", (lid + 97) % wg)
    out[i] = scratch[base + partner] + shared[wg - 1 - lid]
    program = k.build()
    assert "barriers" in program.requirements().features
    xs = np.random.default_rng(3).integers(0, 2**32, n, dtype=np.uint32)
    _, out_ = run_exact(host, program, [xs, np.zeros(n, np.uint32)])
    idx = np.arange(n)
    base_ = idx // wg * wg
    with np.errstate(over="ignore"):
        want = xs[base_ + (idx % wg + 97) % wg] * np.uint32(3) + \
            (xs[base_ + wg - 1 - idx % wg] ^ np.uint32(0xFFFF))
    assert out_.tolist() == want.tolist()


# -- what is reported false cannot be asked for -----------------------------------------------

def test_what_is_reported_false_is_not_expressible(caps):
    assert caps.supports_bf16 is False
    assert caps.supports_tensor_cores is False
    assert caps.supported_ops <= ALL_OPS
    # the IR has no type or op that would need them
    assert {t.value for t in DType} == {"u32", "i32", "f32", "bool", "f16", "f64", "u8", "u16",
                                        "i8", "i16", "u64", "i64"}
    assert ALL_OPS - caps.supported_ops == {"dtype.u64", "dtype.i64"}  # (WGSL has none)
    assert not any(word in op for op in ALL_OPS for word in ("bf16", "mma", "matrix", "tensor"))


def subgroup_sum(size: int, workgroup: tuple[int, ...] = (64,)) -> ir.Program:
    k = ir.Kernel(workgroup=workgroup, subgroup_size=size)
    out = k.output("out", ir.u32, count=128)
    i = k.let("i", ir.global_id(0))
    out[i] = k.subgroup("add", i)
    return k.build()


def test_subgroups_run_at_the_probed_size_and_no_other(host, caps, strict):
    """Reported true, they run, byte for byte the reference's; any other size, or a
    2-D workgroup (whose subgroups WGSL leaves unsaid), is refused at compile."""
    if not caps.supports_subgroup_ops:
        assert caps.subgroup_size_range is None
        with pytest.raises(UnsupportedFeatureError, match="runs subgroups of none"):
            host.compile(subgroup_sum(8))
        return
    size, high = caps.subgroup_size_range
    assert size == high and (not strict or size == 8)
    run_exact(host, subgroup_sum(size), [])
    other = 4 if size != 4 else 8
    with pytest.raises(UnsupportedFeatureError, match=f"needs {other}") as info:
        host.compile(subgroup_sum(other))
    assert "Fix:" in str(info.value)
    assert f"needs subgroups of {other} invocations (this backend runs {size})" in \
        rejection_reasons(subgroup_sum(other).requirements(), caps)
    with pytest.raises(UnsupportedFeatureError, match="1-D workgroups only"):
        host.compile(subgroup_sum(size, workgroup=(8, 8)))


# -- a device without f16 / f64 ---------------------------------------------------------------

class _AdapterWithout:
    """A real adapter that hides some of its features, so Device never requests them."""

    def __init__(self, adapter: Any, hidden: set[str]) -> None:
        self._adapter = adapter
        self.features = {f for f in adapter.features if str(f) not in hidden}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._adapter, name)


def test_a_pipeline_run_with_subgroups_of_another_size_is_an_error_not_a_result(host, caps):
    """The probe's size holds for the device, but a driver may choose one per pipeline:
    each pipeline checks the size it runs with. Lowered for 4 lanes (bypassing the
    compile check) and run where the device forms 8, its outputs are discarded."""
    program = subgroup_sum(4)
    lowered = lower(program)
    assert "@builtin(subgroup_size) vyre_subgroup_size: u32" in lowered.wgsl
    assert "if (vyre_subgroup_size != 4u)" in lowered.wgsl
    if not caps.supports_subgroup_ops:
        return  # (no device feature to compile it with)
    dev = backend.device()
    kernel = dev.compile_wgsl(lowered, label="other-size")
    with pytest.raises(UnsupportedFeatureError, match="subgroups of another size") as info:
        dev.run_program(kernel, program, [], (2, 1, 1))
    assert "Fix:" in str(info.value)
    run_exact(host, subgroup_sum(caps.subgroup_size_range[0]), [])  # (the device is fine)


@pytest.fixture
def without_subgroups(monkeypatch):
    dev = Device(_AdapterWithout(request_adapter(), {"subgroup"}))
    monkeypatch.setattr(backend, "_device", dev)
    yield dev
    dev.close()


def test_a_device_without_the_subgroup_feature_reports_none_and_refuses_them(
        without_subgroups):
    assert without_subgroups.probes["subgroups"].startswith("absent")
    host = BackendHost(backend)
    caps = host.capabilities()
    assert caps.supports_subgroup_ops is False and caps.subgroup_size_range is None
    with pytest.raises(UnsupportedFeatureError, match="runs subgroups of none"):
        host.compile(subgroup_sum(8))
    assert "needs subgroup operations (supports_subgroup_ops is false)" in \
        rejection_reasons(subgroup_sum(8).requirements(), caps)


@pytest.fixture
def without_f16_f64(monkeypatch):
    dev = Device(_AdapterWithout(request_adapter(), {"shader-f16", "shader-f64"}))
    monkeypatch.setattr(backend, "_device", dev)
    yield dev
    dev.close()


def test_a_device_without_f16_or_f64_refuses_them_at_compile(without_f16_f64, strict):
    dev = without_f16_f64
    assert not {"shader-f16", "shader-f64"} & dev.features
    assert dev.probes["f16"].startswith("absent") and dev.probes["f64"].startswith("absent")
    host = BackendHost(backend)
    caps = host.capabilities()
    assert caps.supports_f16 is False and caps.supports_f64 is False
    for dtype in (ir.f16, ir.f64):
        program = elementwise(dtype, 4)
        with pytest.raises(UnsupportedFeatureError, match="Fix:") as info:
            host.compile(program)
        assert f"does not run {dtype.value}" in str(info.value)
        assert f"supports_{dtype.value}" in info.value.fix
        data = [np.ones(4, dtype.storage_np)] * 2
        with pytest.raises(UnsupportedFeatureError):
            host.dispatch(program, data)
        assert f"needs {dtype.value} (supports_{dtype.value} is false)" in \
            rejection_reasons(program.requirements(), caps)
    # f32 still runs on it
    program = elementwise(ir.f32, 4)
    data = [np.array([1, 2, 3, 4], np.float32), np.array([0.5, 0.25, 2, -1], np.float32)]
    run_exact(host, program, data)


# -- the loop budget --------------------------------------------------------------------------

def counting_loop(trips: int | None) -> ir.Program:
    """out[0] = the iterations of one loop; ``trips`` static, or None: read at run time."""
    k = ir.Kernel(workgroup=(1,))
    bound = k.read("n", ir.u32, count=1) if trips is None else None
    out = k.output("out", ir.u32, count=1)
    c = k.let("c", ir.u32(0))
    with k.loop("i", 0, bound[0] if bound is not None else trips):
        k.assign(c, c + 1)
    out[0] = c
    return k.build()


def test_a_run_time_loop_past_the_budget_is_an_error_and_discarded(host, caps, strict):
    limit = caps.max_loop_trip
    if strict:
        assert limit == LAVAPIPE_LOOP_TRIP
    program = counting_loop(None)
    assert program.requirements().loop_trip_bound is None  # routing cannot see it
    assert host.dispatch(program, [np.array([60_000], np.uint32)])[0].tolist() == [60_000]
    if limit is None:  # a driver without a budget runs it
        assert host.dispatch(program, [np.array([70_000], np.uint32)])[0].tolist() == [70_000]
        return
    target = np.full(1, 0xDEADBEEF, np.uint32)
    with pytest.raises(UnsupportedFeatureError, match="cut a loop short") as info:
        host.dispatch_into(program, [np.array([70_000], np.uint32)], [target])
    assert "discarded" in str(info.value) and "Fix:" in str(info.value)
    assert info.value.details["loop_cut_short"] is True
    assert info.value.details["max_loop_trip"] == limit
    assert target.tolist() == [0xDEADBEEF]  # the truncated count never reached the caller
    assert not host.device_lost()
    assert host.dispatch(program, [np.array([60_000], np.uint32)])[0].tolist() == [60_000]


def test_routing_refuses_a_static_loop_past_the_reported_budget(host, caps):
    limit = caps.max_loop_trip
    wgpu = register_plugin(backend, name="wgpu")
    reference = register_plugin(reference_backend, name="reference")
    reference_caps = BackendHost(reference_backend).capabilities()
    router = Router(lambda: [(wgpu, caps), (reference, reference_caps)])
    fits, past = counting_loop(60_000), counting_loop(70_000)
    assert router.route(fits, "wgpu").backend == "wgpu"
    if limit is None:
        assert router.route(past, "wgpu").backend == "wgpu"
        return
    assert limit == LAVAPIPE_LOOP_TRIP < 70_000
    with pytest.raises(NoCapableBackendError, match="Fix:") as info:
        router.route(past, "wgpu")
    reason = f"loops run 70000 iterations, more than the {limit} this adapter allows"
    assert info.value.details["rejections"] == {"wgpu": [reason]}
    assert router.route(past).backend == "reference"  # unnamed: routed away
    by_id = {e.backend: e for e in router.explain(past)}
    assert not by_id["wgpu"].accepted and by_id["wgpu"].reasons == (reason,)
    # the backend refuses it at compile as well, should it be asked directly
    with pytest.raises(UnsupportedFeatureError, match="loop of 70000"):
        host.compile(past)
    assert host.dispatch(fits, [])[0].tolist() == [60_000]


# -- found: f64 ops the report claims but the lowering refuses ---------------------------

def test_f64_ops_the_lowering_cannot_express_are_refused_at_compile(host, caps):
    """With supports_f64 true, routing accepts wgpu for an f64 program whose ops it names
    (an op set cannot say "rem, but not on f64"), yet an exact f64 fmod needs 64-bit
    integers, which WGSL lacks, and an f64 -> f16 cast would round twice. The lowering
    refuses those at compile with UnsupportedFeatureError, never runs them wrongly; the
    Driver treats such a refusal as a late routing rejection and routes again
    (tests/faults/test_refusal_fallback.py). The math library's f64 functions (sin, cos,
    exp, log, pow, ...) are not offered to wgpu at all: written out, they use 64-bit
    integers, which routing sees."""
    assert caps.supports_f64, "only meaningful where f64 is reported"
    wgpu = register_plugin(backend, name="wgpu")
    hardware_caps = dataclasses.replace(  # what a non-software adapter reports
        caps, extra={k: v for k, v in caps.extra.items() if k != "software_adapter"})
    router = Router(lambda: [(wgpu, hardware_caps)])
    refused = []
    for name, op in (("rem", lambda v: v % (v + 1.0)),
                     ("cast to f16", lambda v: ir.cast(v, ir.f16))):
        k = ir.Kernel(workgroup=(4,))
        a = k.read("a", ir.f64)
        value = op(a[ir.global_id(0)])
        out = k.output("out", value.dtype, count=4)
        out[ir.global_id(0)] = value
        program = k.build()
        assert rejection_reasons(program.requirements(), caps) == []
        assert router.route(program).backend == "wgpu"
        with pytest.raises(UnsupportedFeatureError, match="Fix: ") as err:
            host.dispatch(program, [np.array([0.25, 0.5, 1.0, 2.0])])
        refused.append(name)
        assert "cannot express" in err.value.cause
    assert refused == ["rem", "cast to f16"]
    for op in (ir.sin, ir.cos, ir.exp, ir.log, lambda v: ir.pow(v, v)):
        k = ir.Kernel(workgroup=(4,))
        a, out = k.read("a", ir.f64), k.output("out", ir.f64, count=4)
        out[ir.global_id(0)] = op(a[ir.global_id(0)])
        with pytest.raises(NoCapableBackendError, match=r"dtype\.i64, dtype\.u64"):
            router.route(k.build())
