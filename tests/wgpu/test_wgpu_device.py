"""The device layer (vyre_wgpu.device) on the real adapter, with hand-written WGSL and
hand-built ``Lowered``: adapter facts, probed limits and features, the loop-budget probe,
the pipeline cache, compile errors, buffer sizing, grid splitting, timestamps, the status
word, and device loss with recovery."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from vyre_core.errors import (
    DeviceLostError,
    KernelCompileError,
    LaunchLimitError,
    PipelineInvalidatedError,
    UnsupportedFeatureError,
    VyreError,
)
from vyre_wgpu import capabilities
from vyre_wgpu.adapter import request_adapter
from vyre_wgpu.buffers import Launch, padded_size
from vyre_wgpu.device import Device
from vyre_wgpu.submission import launch_grid
from vyre_wgpu.wgsl import BufferBinding, Lowered

#: out[i] = x[i] * 2 + 1 over a fold-aware 1-D grid of 64-wide workgroups;
#: params: [0] = (folded, logical x, y, z), [1].x = 0 (the lowering's opaque zero),
#: [1].y = len(x), [1].z = len(out).
DOUBLE = """
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> params: array<vec4<u32>, 2>;
@group(0) @binding(3) var<storage, read_write> status: array<atomic<u32>, 1>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    var w = wg.x;
    if (params[0].x != 0u) {
        w = wg.x + nwg.x * (wg.y + nwg.y * wg.z);
        if (w >= params[0].y) { return; }
    }
    let i = w * 64u + li;
    if (i < params[1].z) { out[i] = select(0u, x[i], i < params[1].y) * 2u + 1u; }
}
"""


def double_lowered(wgsl: str = DOUBLE) -> Lowered:
    return Lowered(wgsl, (BufferBinding("x", 0, "read", 4),
                          BufferBinding("out", 1, "read_write", 4)),
                   params_binding=2, params_words=8, status_binding=3, features=frozenset())


@pytest.fixture(scope="module")
def dev():
    device = Device()
    yield device
    device.close()


def run_double(dev: Device, kernel, x: np.ndarray, n_out: int, grid=None, timed=False):
    grid = grid or (max(1, -(-n_out // 64)), 1, 1)
    (out,), device_ns = dev.run(Launch(kernel, [x, None], (len(x), n_out), grid,
                                       (False, True)), timed=timed)
    return np.frombuffer(out, np.uint32), device_ns


# -- adapter and capabilities -------------------------------------------------------------


def test_a_vulkan_adapter_is_present(adapter_facts, strict):
    """Fails (never skips) without an adapter; on CI it must be lavapipe over Vulkan."""
    assert adapter_facts is not None
    if strict:
        assert adapter_facts["backend_type"] == "Vulkan"
        assert "llvmpipe" in adapter_facts["device"].lower()
        assert adapter_facts["adapter_type"] == "CPU"
        assert adapter_facts["software_adapter"] is True


def test_capabilities_are_the_device_limits(dev):
    limits = dict(dev.device.limits)
    caps = capabilities.fields(dev)
    assert caps["max_workgroup_size"] == (limits["max-compute-workgroup-size-x"],
                                          limits["max-compute-workgroup-size-y"],
                                          limits["max-compute-workgroup-size-z"])
    assert caps["max_invocations_per_workgroup"] == limits["max-compute-invocations-per-workgroup"]
    assert caps["max_workgroups_per_dimension"] == limits["max-compute-workgroups-per-dimension"]
    assert caps["max_workgroup_memory_bytes"] == limits["max-compute-workgroup-storage-size"]
    assert caps["max_storage_buffer_bytes"] == min(limits["max-storage-buffer-binding-size"],
                                                   limits["max-buffer-size"])
    assert caps["supports_subgroup_ops"] is (dev.subgroup_size is not None)
    assert dev.probes["subgroups"].startswith(("passed", "absent", "failed"))
    # the device got the adapter's own compute limits, not the WebGPU defaults; wgpu may
    # grant less than an adapter states of the others (an H200 states 2**32 - 1 bindings
    # per bind group, wgpu grants 1000), which is why the capabilities read the device's
    for name, value in dev.requested_limits.items():
        assert limits[name] == value if "compute" in name else limits[name] <= value, name


def test_f16_and_f64_are_reported_only_when_their_probe_passes(dev, strict):
    caps = capabilities.fields(dev)
    for dtype, feature in (("f16", "shader-f16"), ("f64", "shader-f64")):
        assert caps[f"supports_{dtype}"] == (dev.probes[dtype] == "passed")
        if feature not in dev.features:
            assert not caps[f"supports_{dtype}"]
    if strict:  # lavapipe has both, and computes both correctly
        assert dev.probes["f16"] == dev.probes["f64"] == "passed"


def test_the_loop_budget_probe(dev):
    """lavapipe stops an invocation's loops after 65,535 iterations, without an error."""
    if dev.software:
        assert dev.max_loop_trip == 65535, dev.probes["loop_trip"]
        assert capabilities.fields(dev)["max_loop_trip"] == 65535
        assert "max_loop_trip" not in capabilities.profile(dev)
    else:
        assert dev.max_loop_trip is None or dev.max_loop_trip > 0


def test_profile_is_plain_data(dev):
    import msgpack

    profile = capabilities.profile(dev)
    assert msgpack.unpackb(msgpack.packb(profile), strict_map_key=False) is not None
    for key in ("vendor", "device", "backend_type", "adapter_type", "software_adapter",
                "limits", "features", "probes"):
        assert key in profile
    assert profile["software_adapter"] is dev.software
    assert "MESA_SHADER_CACHE_DIR" in __import__("os").environ


# -- compile ----------------------------------------------------------------------------------


def test_the_pipeline_cache_counts_hits_and_misses(dev):
    before = dev.cache_snapshot()
    first = dev.compile_wgsl(double_lowered(), key="double")
    again = dev.compile_wgsl(double_lowered(), key="double")
    other = dev.compile_wgsl(double_lowered(DOUBLE.replace("2u + 1u", "3u")), key="triple")
    after = dev.cache_snapshot()
    assert first is again and other is not first
    assert (after.misses - before.misses, after.hits - before.hits) == (2, 1)
    assert after.entries == before.entries + 2


def test_broken_wgsl_is_a_kernel_compile_error_with_the_wgsl_error(dev):
    broken = DOUBLE.replace("out[i] = select", "out[i] = selekt")
    with pytest.raises(KernelCompileError) as info:
        dev.compile_wgsl(double_lowered(broken))
    err = info.value
    assert "selekt" in err.cause and "shader module creation" in err.cause
    assert err.fix and "Fix:" in str(err)
    assert err.details["wgsl"] == broken
    assert not dev.is_lost()  # a bad shader is not a lost device


def test_a_layout_the_shader_does_not_match_is_a_kernel_compile_error(dev):
    wrong = Lowered(DOUBLE, (BufferBinding("x", 0, "read_write", 4),  # shader: read
                             BufferBinding("out", 1, "read", 4)),     # shader: read_write
                    params_binding=2, params_words=8, status_binding=3, features=frozenset())
    with pytest.raises(KernelCompileError, match="pipeline creation"):
        dev.compile_wgsl(wrong)


def test_a_feature_the_device_lacks_is_refused(dev):
    lowered = Lowered(DOUBLE, double_lowered().buffers, 2, 8, 3,
                      frozenset({"no-such-feature"}))
    with pytest.raises(UnsupportedFeatureError, match="no-such-feature"):
        dev.compile_wgsl(lowered)


# -- dispatch ---------------------------------------------------------------------------------


def test_dispatch_uploads_reads_back_and_trims(dev):
    kernel = dev.compile_wgsl(double_lowered(), key="double")
    x = np.arange(1000, dtype=np.uint32)
    out, device_ns = run_double(dev, kernel, x, 1000)
    assert device_ns is None
    assert out.dtype == np.uint32 and out.tolist() == (x * 2 + 1).tolist()
    # outputs start zeroed and only the elements the kernel wrote change
    out, _ = run_double(dev, kernel, x[:10], 100, grid=(1, 1, 1))
    assert out.tolist() == [2 * i + 1 for i in range(10)] + [1] * 54 + [0] * 36


def test_an_empty_input_is_bound_as_four_bytes_with_length_zero(dev):
    kernel = dev.compile_wgsl(double_lowered(), key="double")
    out, _ = run_double(dev, kernel, np.zeros(0, np.uint32), 5)
    assert out.tolist() == [1] * 5
    assert padded_size(0) == 4 and padded_size(6) == 8 and padded_size(8) == 8


def test_odd_byte_counts_are_padded_to_words(dev):
    """An f16 buffer of odd length is not a whole number of 4-byte words."""
    if "shader-f16" not in dev.features:
        pytest.fail("the adapter has no shader-f16; this test needs it")
    wgsl = """
enable f16;
@group(0) @binding(0) var<storage, read> x: array<f16>;
@group(0) @binding(1) var<storage, read_write> out: array<f16>;
@group(0) @binding(2) var<uniform> params: array<vec4<u32>, 2>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < params[1].z) { out[g.x] = x[g.x] * 2.0h; }
}
"""
    lowered = Lowered(wgsl, (BufferBinding("x", 0, "read", 2),
                             BufferBinding("out", 1, "read_write", 2)),
                      2, 8, 3, frozenset({"shader-f16"}))
    kernel = dev.compile_wgsl(lowered)
    x = np.array([1.5, -2.0, 0.25], np.float16)
    (out,), _ = dev.run(Launch(kernel, [x, None], (3, 3), (1, 1, 1), (False, True)))
    assert len(out) == 6
    assert np.frombuffer(out, np.float16).tolist() == [3.0, -4.0, 0.5]


def test_timed_dispatch_reports_device_time(dev):
    kernel = dev.compile_wgsl(double_lowered(), key="double")
    out, device_ns = run_double(dev, kernel, np.arange(4096, dtype=np.uint32), 4096, timed=True)
    assert out[4095] == 2 * 4095 + 1
    if dev.timestamps:
        assert isinstance(device_ns, int) and device_ns > 0
    else:
        assert device_ns is None


def test_the_status_word_discards_the_outputs(dev):
    flagging = DOUBLE.replace("var w = wg.x;", "var w = wg.x;\n    atomicOr(&status[0], 1u);")
    kernel = dev.compile_wgsl(double_lowered(flagging))
    with pytest.raises(UnsupportedFeatureError, match="cut a loop short") as info:
        run_double(dev, kernel, np.arange(64, dtype=np.uint32), 64)
    assert info.value.details["loop_cut_short"] is True
    assert not dev.is_lost()


def folded_ids(grid: tuple[int, int, int], limit: int) -> list[tuple[int, int, int]]:
    """The logical workgroup ids a folded launch runs, mapped as the lowering's shader
    maps them (linear number x fastest, unflattened over ``grid``, padding dropped)."""
    (px, py, pz), folded = launch_grid(grid, limit)
    assert folded == 1 and max(px, py, pz) <= limit
    gx, gy, gz = grid
    ids = []
    for lin in range(px * py * pz):
        wid = (lin % gx, lin // gx % gy, lin // (gx * gy))
        if wid[2] < gz:
            ids.append(wid)
    return ids


def test_launch_grid_folds_any_axis_past_the_limit():
    assert launch_grid((10, 20, 30), 65535) == ((10, 20, 30), 0)
    assert launch_grid((65535, 1, 1), 65535) == ((65535, 1, 1), 0)
    (sx, sy, sz), folded = launch_grid((65536, 1, 1), 65535)
    assert (sy, sz, folded) == (2, 1, 1) and sx * sy >= 65536 and sx <= 65535
    for grid in ((10**9, 1, 1), (1, 65536, 1), (1, 1, 65536), (65536, 2, 1), (3, 70000, 5)):
        (sx, sy, sz), folded = launch_grid(grid, 65535)
        total = grid[0] * grid[1] * grid[2]
        assert folded and max(sx, sy, sz) <= 65535 and total <= sx * sy * sz < 2 * total
    with pytest.raises(LaunchLimitError, match="the most it runs in one launch is"):
        launch_grid((65536, 65535, 1), 65535)


@pytest.mark.parametrize("grid", [(50, 1, 1), (1, 50, 1), (1, 1, 50), (8, 9, 1), (3, 4, 20),
                                  (6, 6, 9)])
def test_a_folded_grid_runs_every_logical_workgroup_once(grid):
    """(A small per-axis limit of 7: the same arithmetic as 65535, every case cheap.)"""
    ids = folded_ids(grid, 7)
    assert sorted(ids) == sorted(itertools.product(*(range(g) for g in grid)))


def test_a_grid_over_the_per_dimension_limit_is_folded(dev):
    kernel = dev.compile_wgsl(double_lowered(), key="double")
    limit = dev.limit("max-compute-workgroups-per-dimension")
    groups = limit + 3
    n = groups * 64
    x = np.arange(n, dtype=np.uint32)
    out, _ = run_double(dev, kernel, x, n, grid=(groups, 1, 1))
    assert np.array_equal(out, x * 2 + 1)
    with pytest.raises(LaunchLimitError):
        run_double(dev, kernel, x[:64], 64, grid=(limit + 1, limit, 1))


def test_a_buffer_over_the_binding_limit_is_refused(dev):
    kernel = dev.compile_wgsl(double_lowered(), key="double")
    too_many = dev.limit("max-storage-buffer-binding-size") // 4 + 1
    with pytest.raises(LaunchLimitError, match="binds at most"):
        dev.run(Launch(kernel, [np.zeros(1, np.uint32), None], (1, too_many), (1, 1, 1),
                       (False, True)))


# -- device loss ---------------------------------------------------------------------------


def test_device_loss_is_detected_and_recovered():
    dev = Device(request_adapter())
    try:
        kernel = dev.compile_wgsl(double_lowered(), key="double")
        x = np.arange(256, dtype=np.uint32)
        assert run_double(dev, kernel, x, 256)[0].tolist() == (x * 2 + 1).tolist()
        before = dev.generation
        assert not dev.is_lost()

        dev.lose()  # the wgpu device is destroyed under the backend
        with pytest.raises(VyreError) as info:
            run_double(dev, kernel, x, 256)
        assert isinstance(info.value, DeviceLostError)
        assert info.value.details["generation"] == before
        assert dev.is_lost()
        with pytest.raises(DeviceLostError):  # stays lost until recovered
            dev.compile_wgsl(double_lowered(), key="double")

        dev.recover()
        assert not dev.is_lost() and dev.generation != before
        assert dev.cache_snapshot().entries == 0
        with pytest.raises(PipelineInvalidatedError):  # made before the loss
            run_double(dev, kernel, x, 256)
        kernel = dev.compile_wgsl(double_lowered(), key="double")
        assert run_double(dev, kernel, x, 256)[0].tolist() == (x * 2 + 1).tolist()
        assert capabilities.fields(dev)["max_workgroups_per_dimension"] > 0  # probed again
    finally:
        dev.close()


def test_a_closed_device_refuses_work():
    dev = Device(request_adapter(), probe=False)
    kernel = dev.compile_wgsl(double_lowered())
    dev.close()
    assert not dev.is_lost()
    with pytest.raises(VyreError, match="shut down"):
        run_double(dev, kernel, np.arange(4, dtype=np.uint32), 4)
