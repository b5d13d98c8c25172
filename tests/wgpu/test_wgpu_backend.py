"""The wgpu backend behind the contract: BackendHost(vyre_wgpu.backend) in this process
(prepare, probed capabilities, device profile, pipeline cache, dispatch variants, loop
budget, device loss and recovery), and once through a real worker process."""

from __future__ import annotations

import numpy as np
import pytest

import vyre_wgpu.backend as backend
from vyre_core import ir
from vyre_core.compare import first_divergence
from vyre_core.config import DispatchConfig
from vyre_core.errors import (
    DeviceLostError,
    PipelineInvalidatedError,
    UnsupportedFeatureError,
    VyreError,
)
from vyre_examples.saxpy import inputs as saxpy_inputs
from vyre_examples.saxpy import program as saxpy
from vyre_reference import run as reference_run
from vyre_workers.backend_host import BackendHost


def increment(n: int) -> ir.Program:
    """A read_write buffer: every element + 1."""
    k = ir.Kernel(workgroup=(64,))
    v = k.read_write("v", ir.u32)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < v.len):
        v[i] = v[i] + 1
    return k.build()


def counting_loop(trips) -> ir.Program:
    """out[0] = number of iterations of one loop; ``trips`` a literal or a buffer."""
    k = ir.Kernel(workgroup=(1,))
    bound = k.read("n", ir.u32, count=1) if trips is None else None
    out = k.output("out", ir.u32, count=1)
    c = k.let("c", ir.u32(0))
    with k.loop("i", 0, bound[0] if bound is not None else trips):
        k.assign(c, c + 1)
    out[0] = c
    return k.build()


def assert_matches_reference(program, inputs, outputs, ulp=0):
    expected = reference_run(program, inputs)
    for buffer, want, got in zip(program.outputs, expected, outputs, strict=True):
        assert first_divergence(want, got, buffer.dtype, ulp) is None


# -- identity and capabilities --------------------------------------------------------------


def test_identity(host):
    assert host.id() == "wgpu"
    assert host.version() == "0.1.0"
    assert host.precedence() == 100
    assert not host.is_reference_oracle()


def test_capabilities_come_from_the_probed_device(host, strict):
    caps = host.capabilities()
    limits = dict(backend.device().device.limits)
    assert caps.max_workgroup_size == (limits["max-compute-workgroup-size-x"],
                                       limits["max-compute-workgroup-size-y"],
                                       limits["max-compute-workgroup-size-z"])
    assert caps.max_invocations_per_workgroup == limits["max-compute-invocations-per-workgroup"]
    assert caps.max_workgroups_per_dimension == limits["max-compute-workgroups-per-dimension"]
    assert caps.max_workgroup_memory_bytes == limits["max-compute-workgroup-storage-size"]
    assert caps.max_storage_buffer_bytes == min(limits["max-storage-buffer-binding-size"],
                                                limits["max-buffer-size"])
    probed = backend.device().subgroup_size
    assert caps.supports_subgroup_ops is (probed is not None)
    assert caps.subgroup_size_range == (None if probed is None else (probed, probed))
    if strict:  # lavapipe: more than the WebGPU defaults of the static claims, f16/f64 probed
        assert caps.subgroup_size_range == (8, 8)  # (llvmpipe's 256 bits: 8 lanes of 32)
        assert caps.max_workgroup_size == (1024, 1024, 1024)
        assert caps.max_workgroup_memory_bytes == 32768
        assert caps.supports_f16 and caps.supports_f64
        assert caps.extra["software_adapter"] is True
        assert caps.max_loop_trip == 65535


def test_static_claims_are_the_webgpu_defaults():
    claims = backend.vyre_backend_claims()
    assert claims["max_workgroup_size"] == (256, 256, 64)
    assert claims["max_invocations_per_workgroup"] == 256
    assert claims["max_workgroups_per_dimension"] == 65535
    assert claims["max_storage_buffer_bytes"] == 134217728
    assert claims["max_workgroup_memory_bytes"] == 16384
    assert not claims["supports_f16"] and not claims["supports_f64"]


def test_device_profile_names_the_adapter(host, strict):
    profile = host.device_profile()
    assert profile["backend"] == "wgpu"
    for key in ("vendor", "device", "backend_type", "adapter_type"):
        assert isinstance(profile[key], str)
    assert isinstance(profile["software_adapter"], bool)
    assert profile["limits"]["max-compute-workgroups-per-dimension"] == \
        host.capabilities().max_workgroups_per_dimension
    assert profile["max_workgroup_size"] == list(host.capabilities().max_workgroup_size)
    if strict:
        assert profile["vendor"] == "llvmpipe" and profile["backend_type"] == "Vulkan"
        assert profile["adapter_type"] == "CPU" and profile["software_adapter"] is True


# -- dispatch -------------------------------------------------------------------------------


def test_saxpy_end_to_end(host):
    n = 100_003
    prog, data = saxpy(n), saxpy_inputs(n)
    out, = host.dispatch(prog, data)
    assert out.dtype == np.float32 and out.shape == (n,)
    assert_matches_reference(prog, data, [out], ulp=1)  # a * x + y may be fused


def test_read_write_buffers_come_back_and_inputs_are_untouched(host):
    v = np.arange(1000, dtype=np.uint32)
    out, = host.dispatch(increment(1000), [v])
    assert out.tolist() == (v + 1).tolist()
    assert v.tolist() == list(range(1000))
    fixed = host.dispatch(increment(10), [np.zeros(10, np.uint32)],
                          DispatchConfig(fixpoint_iterations=3))
    assert fixed[0].tolist() == [3] * 10


def test_an_empty_input(host):
    out, = host.dispatch(saxpy(4), [np.zeros(0, np.float32), np.zeros(0, np.float32),
                                    np.array([1.0], np.float32)])
    assert out.tolist() == [0.0] * 4


def test_profiled_dispatch_reports_device_time(host):
    prog, data = saxpy(4096), saxpy_inputs(4096)
    out = host.dispatch(prog, data, DispatchConfig(profile=True, label="saxpy"))
    assert out.timing.label == "saxpy" and out.timing.wall_ns > 0
    if backend.device().timestamps:
        assert isinstance(out.timing.device_ns, int) and out.timing.device_ns > 0


def test_dispatch_into_and_async(host):
    prog, data = saxpy(1000), saxpy_inputs(1000)
    target = np.empty(1000, np.float32)
    host.dispatch_into(prog, data, [target])
    pending = host.dispatch_async(prog, data)
    assert pending.result(30)[0].tobytes() == target.tobytes()


def test_pipeline_cache_counts_real_hits_and_misses(host):
    before = host.pipeline_cache_snapshot()
    first = host.compile(saxpy(777))
    second = host.compile(saxpy(777))
    middle = host.pipeline_cache_snapshot()
    host.compile(saxpy(778))
    after = host.pipeline_cache_snapshot()
    assert (middle.misses - before.misses, middle.hits - before.hits) == (1, 1)
    assert (after.misses - middle.misses, after.hits - middle.hits) == (1, 0)
    assert after.entries >= 2
    data = saxpy_inputs(777)
    assert first.dispatch(data)[0].tobytes() == second.dispatch(data)[0].tobytes()
    # a dispatch of a compiled program is a cache hit too
    host.dispatch(saxpy(777), data)
    assert host.pipeline_cache_snapshot().hits == after.hits + 1


def test_a_loop_over_the_adapter_budget_is_refused_at_compile(host):
    limit = host.capabilities().max_loop_trip
    if limit is None:
        assert host.dispatch(counting_loop(70_000), [])[0].tolist() == [70_000]
        return
    assert host.dispatch(counting_loop(limit), [])[0].tolist() == [limit]
    with pytest.raises(UnsupportedFeatureError, match=f"loop of {limit + 1}"):
        host.compile(counting_loop(limit + 1))


def test_a_run_time_loop_the_adapter_cuts_short_is_an_error_not_a_result(host):
    prog = counting_loop(None)
    assert host.dispatch(prog, [np.array([1000], np.uint32)])[0].tolist() == [1000]
    limit = host.capabilities().max_loop_trip
    if limit is None:
        return
    with pytest.raises(UnsupportedFeatureError, match="cut a loop short"):
        host.dispatch(prog, [np.array([limit + 1], np.uint32)])
    assert not host.device_lost()


def counting_while(limit: int) -> ir.Program:
    """out[0] = passes of a while loop that ends when c reaches n (read at run time), or
    by a break at ``limit``; its declared bound (2**32-1) is no trip count."""
    k = ir.Kernel(workgroup=(1,))
    n = k.read("n", ir.u32, count=1)
    out = k.output("out", ir.u32, count=1)
    c = k.let("c", ir.u32(0))
    with k.while_(c < n[0], max_trips=2**32 - 1):
        with k.if_(c == limit):
            k.break_()
        k.assign(c, c + 1)
    out[0] = c
    return k.build()


def test_a_while_loop_is_not_refused_for_its_bound_and_a_cut_one_is_an_error(host):
    """A while loop's declared bound is a ceiling, not its trip count: routing and the
    compile check leave it alone, and the status word still catches the adapter cutting
    it short. A break ends a loop as its own condition does: no false alarm."""
    prog = counting_while(limit=1_000_000)
    assert prog.requirements().loop_trip_bound is None
    assert host.dispatch(prog, [np.array([1000], np.uint32)])[0].tolist() == [1000]
    assert host.dispatch(counting_while(limit=7), [np.array([9], np.uint32)])[0].tolist() == [7]
    limit = host.capabilities().max_loop_trip
    if limit is None:
        return
    assert host.dispatch(prog, [np.array([limit], np.uint32)])[0].tolist() == [limit]
    with pytest.raises(UnsupportedFeatureError, match="cut a loop short"):
        host.dispatch(prog, [np.array([limit + 1], np.uint32)])
    assert host.dispatch(counting_while(limit=limit - 1),
                         [np.array([limit + 5], np.uint32)])[0].tolist() == [limit - 1]


def test_f16_and_f64_run_where_reported(host):
    caps = host.capabilities()
    for dtype, supported in ((ir.f16, caps.supports_f16), (ir.f64, caps.supports_f64)):
        k = ir.Kernel(workgroup=(64,))
        a = k.read("a", dtype)
        out = k.output("out", dtype, count=100)
        i = k.let("i", ir.global_id(0))
        out[i] = a[i] * a[i] + a[i]
        prog = k.build()
        data = [np.linspace(-3, 3, 100).astype(dtype.storage_np)]
        if supported:
            assert_matches_reference(prog, data, host.dispatch(prog, data), ulp=1)
        else:
            with pytest.raises(UnsupportedFeatureError):
                host.dispatch(prog, data)


# -- device loss -------------------------------------------------------------------------------


def test_device_loss_soft_path(host):
    prog, data = saxpy(5000), saxpy_inputs(5000)
    good, = host.dispatch(prog, data)
    compiled = host.compile(prog)
    native = backend.vyre_compile(prog, DispatchConfig())
    generation = host.generation

    backend.device().lose()  # the device is destroyed mid-run
    with pytest.raises(VyreError) as info:
        host.dispatch(prog, data)
    assert isinstance(info.value, DeviceLostError)
    assert host.device_lost()

    host.try_recover()
    assert host.generation == generation + 1
    assert not host.device_lost()
    again, = host.dispatch(prog, data)
    assert again.tobytes() == good.tobytes()
    with pytest.raises(PipelineInvalidatedError):
        compiled.dispatch(data)
    with pytest.raises(PipelineInvalidatedError):
        native.dispatch(data, DispatchConfig(grid_override=(20, 1, 1)))
    assert host.compile(prog).dispatch(data)[0].tobytes() == good.tobytes()


# -- a real worker process --------------------------------------------------------------------


def test_through_a_worker_process(strict):
    from vyre_core.driver import Driver
    from vyre_core.registry import Registry

    prog, data = saxpy(10_000), saxpy_inputs(10_000)
    with Driver(Registry.discover("wgpu,reference")) as drv:
        out, = drv.dispatch(prog, data, backend="wgpu")
        assert_matches_reference(prog, data, [out], ulp=1)
        workers = drv.status()["pools"]["wgpu"]["workers"]
        assert workers and workers[0]["pid"]
        if strict:  # probed as a software adapter: routing demotes it below the reference
            wgpu_row = next(e for e in drv.explain(prog) if e.backend == "wgpu")
            assert wgpu_row.demoted
            assert drv.route(prog).backend == "reference"


def test_a_program_its_static_claims_reject_is_probed_before_routing_passes_it_over(strict):
    """wgpu's static claims are a floor (no f64, workgroups of 256): a fresh Driver starts
    and probes it before deciding, so a device that can run the program is not passed over
    for what it was never asked."""
    import numpy as np

    from vyre_core import ir
    from vyre_core.driver import Driver
    from vyre_core.registry import Registry

    k = ir.Kernel(workgroup=(512,))
    x = k.read("x", ir.f64)
    out = k.output("out", ir.f64, count=1024)
    i = k.let("i", ir.global_id(0))
    out[i] = x[i] * 2.0
    prog = k.build()
    registry = Registry.discover("wgpu,reference")
    claims = registry.get("wgpu").claims
    assert not claims.supports_f64 and claims.max_invocations_per_workgroup < 512
    with Driver(registry) as drv:
        wgpu_row = next(e for e in drv.explain(prog) if e.backend == "wgpu")
        caps = drv.probe("wgpu")
        assert wgpu_row.accepted == (caps.supports_f64 and caps.max_invocations_per_workgroup
                                     >= 512), wgpu_row
        if strict:  # lavapipe has f64 and 1024 invocations, and is a software adapter
            assert wgpu_row.accepted and wgpu_row.demoted
        data = np.arange(1024, dtype=np.float64) / 3
        out, = drv.dispatch(prog, [data], backend="wgpu") if wgpu_row.accepted \
            else drv.dispatch(prog, [data])
        assert out.tobytes() == (data * 2.0).tobytes()


def test_a_one_dimensional_grid_past_the_per_dimension_limit_is_folded_and_exact():
    """wgpu states how many workgroups it folds into its per-axis limit (device fact
    max_grid_workgroups): the launch check lets them through and the folded launch
    computes every element."""
    import numpy as np

    import vyre_wgpu.backend
    from vyre_core import ir
    from vyre_wgpu.submission import max_grid_workgroups

    host = BackendHost(vyre_wgpu.backend)
    limit = host.capabilities().max_workgroups_per_dimension
    assert host.capabilities().extra["max_grid_workgroups"] == max_grid_workgroups(limit)
    k = ir.Kernel(workgroup=(1,))
    out = k.output("out", ir.u32, count=limit + 5)
    i = k.let("i", ir.global_id(0))
    out[i] = i * 3 + 1
    prog = k.build()
    assert host.plan(prog, []).grid == (limit + 5, 1, 1)
    got, = host.dispatch(prog, [])
    assert got.tobytes() == (np.arange(limit + 5, dtype=np.uint32) * 3 + 1).tobytes()


def where_nonzero(n: int) -> ir.Program:
    """out[i] = x[i] only where x[i] is not zero: the rest of ``out`` is never written."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.u32)
    out = k.output("out", ir.u32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len), k.if_(x[i] != 0):
        out[i] = x[i]
    return k.build()


def test_a_launch_reuses_its_buffers_and_still_starts_from_zeros(host) -> None:
    """Non-resident dispatches keep the buffers and bind group of a (kernel, sizes, grid)
    for the next one like it (issue 13): outputs nobody uploads still start as zeros,
    never as what the previous dispatch left there."""
    n = 512
    dev = backend.device()
    kept = len(dev.launches)
    ones = np.ones(n, dtype=np.uint32)
    assert host.dispatch(where_nonzero(n), [ones])[0].tolist() == ones.tolist()
    assert len(dev.launches) == kept + 1
    for _ in range(3):  # the same launch again: kept buffers, zeroed output
        assert host.dispatch(where_nonzero(n), [np.zeros(n, np.uint32)])[0].tolist() == [0] * n
    assert len(dev.launches) == kept + 1
    half = np.arange(n, dtype=np.uint32) % 2
    (got,) = host.dispatch(where_nonzero(n), [half])
    assert got.tobytes() == reference_run(where_nonzero(n), [half])[0].tobytes()


def test_its_static_claims_name_every_op_as_its_probe_does(host):
    """Found in review: the claims left supported_ops out, so registration took the
    contract's default (no op newer than the contract) while the hook and the probe said
    every op: routing before a probe saw less than the backend runs."""
    from vyre_core.registry import register_plugin

    every = ir.ALL_OPS - {"dtype.u64", "dtype.i64"}  # (WGSL has no 64-bit integers)
    assert register_plugin(backend).claims.supported_ops == every
    assert host.capabilities().supported_ops == every
