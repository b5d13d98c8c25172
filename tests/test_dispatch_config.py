"""``DispatchConfig``: bad values are refused at construction with a ``Fix:``, good ones
normalise, the object is frozen and crosses a process boundary as a dict, and every field
has an effect observed through ``BackendHost.dispatch`` on the reference backend."""

from __future__ import annotations

import dataclasses
import math

import msgpack
import numpy as np
import pytest
from counting_backend import CountingBackend

import vyre_reference
import vyre_reference.backend
from vyre_core import ir
from vyre_core.config import DispatchConfig
from vyre_core.errors import InvalidConfigError, LaunchLimitError
from vyre_core.pipeline import pipeline_cache_key
from vyre_workers.backend_host import BackendHost

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)

# -- helpers ----------------------------------------------------------------------------------


@pytest.fixture
def host() -> BackendHost:
    return BackendHost(vyre_reference.backend)


def counting_host() -> tuple[BackendHost, CountingBackend]:
    plugin = CountingBackend()
    return BackendHost(plugin, "counting"), plugin


def ids_kernel(workgroup=(4,), count: int = 8) -> ir.Program:
    """Writes local_id(0) and workgroup_id(0) of every invocation at its global id."""
    k = ir.Kernel(workgroup=workgroup)
    lid = k.output("lid", ir.u32, count)
    wid = k.output("wid", ir.u32, count)
    g = k.let("g", ir.global_id(0))
    lid[g] = ir.local_id(0)
    wid[g] = ir.workgroup_id(0)
    return k.build()


def ids_kernel_2d(width: int = 4, height: int = 4) -> ir.Program:
    """Writes local_id(1) and workgroup_id(1) at row-major index (gy * width + gx)."""
    k = ir.Kernel(workgroup=(1, 1))
    ly = k.output("ly", ir.u32, width * height)
    wy = k.output("wy", ir.u32, width * height)
    idx = k.let("idx", ir.global_id(1) * width + ir.global_id(0))
    with k.if_(ir.global_id(0) < width):
        ly[idx] = ir.local_id(1)
        wy[idx] = ir.workgroup_id(1)
    return k.build()


def counting_kernel(workgroup=(4,), out_count: int = 10) -> ir.Program:
    """Counts invocations with an atomic, and marks which global ids ran."""
    k = ir.Kernel(workgroup=workgroup)
    ran = k.output("ran", ir.u32, out_count)
    total = k.output("total", ir.u32, 1)
    total.atomic_add(0, 1)
    ran[ir.global_id(0)] = 1
    return k.build()


def saturating_kernel(limit: int = 5) -> ir.Program:
    """``acc[i] = min(acc[i] + 1, limit)`` over a read_write buffer."""
    k = ir.Kernel(workgroup=(4,))
    acc = k.read_write("acc", ir.u32)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < acc.len):
        acc[i] = ir.min(acc[i] + 1, limit)
    return k.build()


def total(outputs) -> int:
    return int(outputs[1][0])


# -- construction ------------------------------------------------------------------------------

BAD_AXES = [(0,), (4, 0), (1, 1, 0), (1, 2, 3, 4), (), (-1,), (4, -2), (True,), (4, False),
            True, (1.5,), (2.0, 1), 0, -3, 2.0, "4", (None,)]


@pytest.mark.parametrize("field", ["workgroup_override", "grid_override"])
@pytest.mark.parametrize("value", BAD_AXES, ids=repr)
def test_bad_axes_are_refused_with_a_fix(field, value):
    with pytest.raises(InvalidConfigError, match="Fix: ") as caught:
        DispatchConfig(**{field: value})
    assert field in caught.value.cause


@pytest.mark.parametrize("field, value", [
    ("dispatch_elements", 0), ("dispatch_elements", -1), ("dispatch_elements", 1.0),
    ("dispatch_elements", True),
    ("fixpoint_iterations", 0), ("fixpoint_iterations", -1), ("fixpoint_iterations", 2.0),
    ("fixpoint_iterations", None),
    ("ulp_budget", -1), ("ulp_budget", 0.5), ("ulp_budget", None), ("ulp_budget", False),
    ("max_output_bytes", -1), ("max_output_bytes", 1.0), ("max_output_bytes", True),
    ("profile", "yes"), ("profile", 1), ("profile", None),
    ("label", 5), ("label", b"name"),
    ("timeout", 0), ("timeout", -1), ("timeout", -0.5), ("timeout", math.inf),
    ("timeout", math.nan), ("timeout", True), ("timeout", "30"),
    ("retries", -1), ("retries", 1.0), ("retries", None), ("retries", True),
], ids=lambda v: repr(v))
def test_bad_scalar_values_are_refused_with_a_fix(field, value):
    with pytest.raises(InvalidConfigError, match="Fix: ") as caught:
        DispatchConfig(**{field: value})
    assert caught.value.cause.startswith(f"{field}=")


@pytest.mark.parametrize("value, normal", [
    ((4,), (4, 1, 1)), ([4], (4, 1, 1)), (4, (4, 1, 1)), ((2, 3), (2, 3, 1)),
    ([2, 3, 5], (2, 3, 5)), ((2**32 - 1,), (2**32 - 1, 1, 1)),
])
def test_good_axes_normalise_to_three(value, normal):
    assert DispatchConfig(grid_override=value).grid_override == normal
    assert DispatchConfig(workgroup_override=value).workgroup_override == normal


def test_defaults():
    cfg = DispatchConfig()
    assert cfg.workgroup_override is None and cfg.grid_override is None
    assert cfg.dispatch_elements is None and cfg.max_output_bytes is None
    assert cfg.fixpoint_iterations == 1 and cfg.retries == 1
    assert cfg.ulp_budget == 0
    assert cfg.profile is False and cfg.label is None and cfg.timeout is None


def test_good_edge_values_are_accepted():
    cfg = DispatchConfig(dispatch_elements=1, fixpoint_iterations=1, ulp_budget=0,
                         max_output_bytes=0, profile=True, label="", timeout=1e-9, retries=0)
    assert cfg.max_output_bytes == 0 and cfg.ulp_budget == 0 and cfg.retries == 0
    assert DispatchConfig(timeout=30).timeout == 30


def test_config_is_frozen():
    cfg = DispatchConfig()
    for field, value in [("label", "x"), ("grid_override", (1, 1, 1)), ("retries", 3)]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(cfg, field, value)
    assert cfg == DispatchConfig()


def test_replace_checks_the_new_values():
    cfg = DispatchConfig(label="a")
    assert cfg.replace(grid_override=(2,)).grid_override == (2, 1, 1)
    assert cfg.replace(retries=3).label == "a"
    with pytest.raises(InvalidConfigError, match="Fix: "):
        cfg.replace(retries=-1)


FULL = DispatchConfig(workgroup_override=(8, 2), grid_override=(3,), dispatch_elements=17,
                      fixpoint_iterations=4, ulp_budget=2, max_output_bytes=4096, profile=True,
                      label="full", timeout=12.5, retries=3)


@pytest.mark.parametrize("cfg", [DispatchConfig(), FULL], ids=["default", "full"])
def test_dict_round_trip(cfg):
    assert DispatchConfig.from_dict(cfg.to_dict()) == cfg
    over_the_wire = msgpack.unpackb(msgpack.packb(cfg.to_dict()), raw=False)
    assert DispatchConfig.from_dict(over_the_wire) == cfg


@pytest.mark.parametrize("cfg", [DispatchConfig(), FULL, DispatchConfig(dim=(403, 7)),
                                 DispatchConfig(constants={"k": -0.0}, fuse=True),
                                 DispatchConfig(timeout=1, tuned=True)],
                         ids=["default", "full", "dim", "constants", "int-timeout"])
def test_the_wire_form_carries_what_differs_from_the_defaults_and_gives_it_back(cfg):
    wire = cfg.to_wire()
    assert set(wire) == {name for name, value in cfg.to_dict().items()
                         if value != getattr(DispatchConfig(), name)}
    over_the_wire = msgpack.unpackb(msgpack.packb(wire), raw=False)
    again = DispatchConfig.from_dict(over_the_wire)
    assert again == cfg and msgpack.packb(again.to_wire()) == msgpack.packb(wire)
    assert len(msgpack.packb(wire)) <= len(msgpack.packb(cfg.to_dict()))


def test_to_dict_names_every_field():
    assert set(FULL.to_dict()) == {f.name for f in dataclasses.fields(DispatchConfig)}


def test_from_dict_refuses_unknown_fields():
    data = {**DispatchConfig().to_dict(), "turbo": True}
    with pytest.raises(InvalidConfigError, match="Fix: ") as caught:
        DispatchConfig.from_dict(data)
    assert "turbo" in caught.value.cause


def test_from_dict_checks_values():
    with pytest.raises(InvalidConfigError, match="Fix: "):
        DispatchConfig.from_dict({"retries": -1})


# timeout and retries are enforced by the worker supervisor, which does not exist yet:
# here only their validation (above) and their survival across to_dict/from_dict.
# Their effect (deadline kill + DispatchTimeoutError, crash re-runs + WorkerCrashedError)
# is tested with the supervisor.
@pytest.mark.parametrize("timeout, retries", [(None, 1), (0.25, 0), (30, 5), (1e6, 100)])
def test_timeout_and_retries_survive_the_round_trip(timeout, retries):
    cfg = DispatchConfig(timeout=timeout, retries=retries)
    back = DispatchConfig.from_dict(msgpack.unpackb(msgpack.packb(cfg.to_dict()), raw=False))
    assert (back.timeout, back.retries) == (timeout, retries)


# -- every field has an effect -------------------------------------------------------------


def test_workgroup_override_changes_local_and_workgroup_ids(host):
    prog = ids_kernel(workgroup=(4,), count=8)
    lid, wid = host.dispatch(prog, [])
    assert lid.tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
    assert wid.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    lid, wid = host.dispatch(prog, [], DispatchConfig(workgroup_override=(2,)))
    assert lid.tolist() == [0, 1, 0, 1, 0, 1, 0, 1]
    assert wid.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    lid, wid = host.dispatch(prog, [], DispatchConfig(workgroup_override=(8,)))
    assert lid.tolist() == list(range(8))
    assert wid.tolist() == [0] * 8


def test_workgroup_override_applies_to_every_axis(host):
    prog = ids_kernel_2d(width=4, height=4)
    cfg = DispatchConfig(workgroup_override=(2, 2), grid_override=(2, 2))
    ly, wy = host.dispatch(prog, [], cfg)
    rows = [gy for gy in range(4) for _ in range(4)]
    assert ly.tolist() == [gy % 2 for gy in rows]
    assert wy.tolist() == [gy // 2 for gy in rows]
    # Without the override the workgroup is (1, 1): every local id is 0.
    ly, wy = host.dispatch(prog, [], DispatchConfig(grid_override=(4, 4)))
    assert ly.tolist() == [0] * 16
    assert wy.tolist() == rows


def test_workgroup_override_changes_the_inferred_grid(host):
    prog = counting_kernel(workgroup=(4,), out_count=10)
    assert total(host.dispatch(prog, [])) == 12                      # 3 workgroups of 4
    assert total(host.dispatch(prog, [], DispatchConfig(workgroup_override=(8,)))) == 16
    assert total(host.dispatch(prog, [], DispatchConfig(workgroup_override=(1,)))) == 10


@pytest.mark.parametrize("grid, invocations", [
    ((1,), 4), ((2,), 8), ((5,), 20), ((2, 3), 24), ((2, 3, 2), 48),
])
def test_grid_override_decides_how_many_invocations_run(host, grid, invocations):
    prog = counting_kernel(workgroup=(4,), out_count=10)
    ran, count = host.dispatch(prog, [], DispatchConfig(grid_override=grid))
    assert count.tolist() == [invocations]
    covered = min(4 * grid[0], 10)  # global ids along x: 4 per workgroup along x
    assert ran.tolist() == [1] * covered + [0] * (10 - covered)


@pytest.mark.parametrize("elements, invocations", [
    (1, 4), (4, 4), (5, 8), (10, 12), (13, 16), (100, 100),
])
def test_dispatch_elements_decides_the_inferred_grid(host, elements, invocations):
    prog = counting_kernel(workgroup=(4,), out_count=10)
    out = host.dispatch(prog, [], DispatchConfig(dispatch_elements=elements))
    assert total(out) == invocations  # ceil(elements / 4) workgroups of 4


def test_dispatch_elements_counts_invocations_of_a_multi_axis_workgroup(host):
    prog = counting_kernel(workgroup=(2, 2), out_count=4)
    assert total(host.dispatch(prog, [], DispatchConfig(dispatch_elements=9))) == 12
    assert total(host.dispatch(prog, [], DispatchConfig(dispatch_elements=8))) == 8


def test_grid_override_wins_over_dispatch_elements(host):
    prog = counting_kernel(workgroup=(4,), out_count=10)
    cfg = DispatchConfig(grid_override=(1,), dispatch_elements=100)
    assert total(host.dispatch(prog, [], cfg)) == 4


@pytest.mark.parametrize("iterations, expected, dispatches", [
    (1, 1, 1), (3, 3, 3), (5, 5, 5), (6, 5, 6), (10, 5, 6), (100, 5, 6),
])
def test_fixpoint_iterations_reruns_until_read_write_buffers_stop_changing(
        iterations, expected, dispatches):
    h, plugin = counting_host()
    data = np.zeros(6, np.uint32)
    acc, = h.dispatch(saturating_kernel(5), [data],
                      DispatchConfig(fixpoint_iterations=iterations))
    assert acc.tolist() == [expected] * 6
    assert plugin.calls == dispatches  # 5 changing runs, then one that confirms the fixpoint
    assert data.tolist() == [0] * 6    # the caller's input is never written


@pytest.mark.parametrize("iterations, expected", [(1, 1), (3, 3), (10, 5)])
def test_fixpoint_iterations_on_the_reference(host, iterations, expected):
    acc, = host.dispatch(saturating_kernel(5), [np.zeros(4, np.uint32)],
                         DispatchConfig(fixpoint_iterations=iterations))
    assert acc.tolist() == [expected] * 4


def test_fixpoint_without_read_write_buffers_runs_once():
    h, plugin = counting_host()
    out = h.dispatch(counting_kernel(), [], DispatchConfig(fixpoint_iterations=10))
    assert total(out) == 12
    assert plugin.calls == 1


def test_fixpoint_starting_at_the_fixpoint_runs_once():
    h, plugin = counting_host()
    acc, = h.dispatch(saturating_kernel(5), [np.full(4, 5, np.uint32)],
                      DispatchConfig(fixpoint_iterations=10))
    assert acc.tolist() == [5] * 4
    assert plugin.calls == 1


def test_ulp_budget_defaults_to_zero_and_changes_the_pipeline_key(host):
    """0: every operation is exact or correctly rounded, so a shadow compares bytes."""
    assert DispatchConfig().ulp_budget == 0
    prog = counting_kernel()
    keys = {pipeline_cache_key(prog, DispatchConfig(ulp_budget=b), host.id(), host.version())
            for b in (0, 1, 4, 1000)}
    assert len(keys) == 4
    assert pipeline_cache_key(prog, DispatchConfig(), "reference", "0.1.0") == \
        pipeline_cache_key(prog, DispatchConfig(ulp_budget=0), "reference", "0.1.0")
    assert host.compile(prog, DispatchConfig(ulp_budget=0)).key != \
        host.compile(prog, DispatchConfig(ulp_budget=4)).key


def test_max_output_bytes_refuses_larger_outputs_before_running():
    h, plugin = counting_host()
    prog = counting_kernel(workgroup=(4,), out_count=10)  # 10 + 1 u32 words = 44 bytes
    with pytest.raises(LaunchLimitError, match="Fix: ") as caught:
        h.dispatch(prog, [], DispatchConfig(max_output_bytes=43))
    assert "44 bytes" in caught.value.cause
    assert "max_output_bytes=43" in caught.value.cause
    assert plugin.calls == 0
    assert total(h.dispatch(prog, [], DispatchConfig(max_output_bytes=44))) == 12
    assert total(h.dispatch(prog, [], DispatchConfig(max_output_bytes=45))) == 12
    assert plugin.calls == 2


def test_max_output_bytes_counts_read_write_buffers_at_their_bound_length(host):
    prog = saturating_kernel(5)
    data = np.zeros(6, np.uint32)  # 24 bytes back
    with pytest.raises(LaunchLimitError, match="24 bytes"):
        host.dispatch(prog, [data], DispatchConfig(max_output_bytes=23))
    acc, = host.dispatch(prog, [data], DispatchConfig(max_output_bytes=24))
    assert acc.tolist() == [1] * 6


def test_max_output_bytes_of_zero_refuses_any_output(host):
    with pytest.raises(LaunchLimitError, match="max_output_bytes=0"):
        host.dispatch(counting_kernel(), [], DispatchConfig(max_output_bytes=0))


def test_profile_returns_timing_with_the_label(host):
    out = host.dispatch(counting_kernel(), [], DispatchConfig(profile=True, label="count"))
    assert total(out) == 12
    assert out.timing is not None
    assert isinstance(out.timing.wall_ns, int) and out.timing.wall_ns > 0
    assert out.timing.label == "count"
    assert out.timing.device_ns is None  # the reference cannot measure device time


def test_profile_without_a_label(host):
    out = host.dispatch(counting_kernel(), [], DispatchConfig(profile=True))
    assert out.timing is not None and out.timing.wall_ns > 0 and out.timing.label is None


def test_no_profile_gives_no_timing(host):
    out = host.dispatch(counting_kernel(), [], DispatchConfig(label="count"))
    assert out.timing is None
    assert host.dispatch(counting_kernel(), []).timing is None


def test_profile_sums_the_time_of_every_fixpoint_run():
    h, plugin = counting_host()
    out = h.dispatch(saturating_kernel(5), [np.zeros(4, np.uint32)],
                     DispatchConfig(profile=True, label="fix", fixpoint_iterations=10))
    assert out[0].tolist() == [5] * 4
    assert plugin.calls == 6
    assert out.timing is not None and out.timing.wall_ns > 0 and out.timing.label == "fix"


def test_label_names_the_dispatch_in_errors(host):
    with pytest.raises(LaunchLimitError) as caught:
        host.dispatch(counting_kernel(), [], DispatchConfig(max_output_bytes=1, label="name"))
    assert caught.value.cause.startswith("dispatch 'name' would return 44 bytes")
    with pytest.raises(LaunchLimitError) as caught:
        host.dispatch(counting_kernel(), [], DispatchConfig(max_output_bytes=1))
    assert caught.value.cause.startswith("dispatch would return 44 bytes")


def test_label_and_describe():
    assert DispatchConfig(label="saxpy").describe() == "dispatch 'saxpy'"
    assert DispatchConfig().describe() == "dispatch"


# -- known bugs ------------------------------------------------------------------------------


def test_fixpoint_iterations_apply_to_dispatch_into_and_dispatch_async(host):
    """dispatch_into and dispatch_async honour fixpoint_iterations exactly like dispatch
    (they once called their hook a single time)."""
    cfg = DispatchConfig(fixpoint_iterations=10)
    expected, = host.dispatch(saturating_kernel(5), [np.zeros(4, np.uint32)], cfg)
    assert expected.tolist() == [5] * 4
    into = np.zeros(4, np.uint32)
    host.dispatch_into(saturating_kernel(5), [np.zeros(4, np.uint32)], [into], cfg)
    assert into.tolist() == [5] * 4
    pending = host.dispatch_async(saturating_kernel(5), [np.zeros(4, np.uint32)], cfg)
    assert pending.result()[0].tolist() == [5] * 4


def test_dispatch_resident_applies_workgroup_override_and_sets_the_grid():
    """The resident path is planned like any launch: the hook receives the program with
    the override applied and the grid to launch (hookspec module docstring)."""
    seen = []

    class Resident(CountingBackend):
        vyre_allocate_resident = staticmethod(vyre_reference.backend.vyre_allocate_resident)
        vyre_download_resident = staticmethod(vyre_reference.backend.vyre_download_resident)
        vyre_free_resident = staticmethod(vyre_reference.backend.vyre_free_resident)

        def vyre_dispatch_resident(self, program, handles, config):
            seen.append((program.workgroup, config.grid_override, config.workgroup_override))
            return vyre_reference.backend.vyre_dispatch_resident(program, handles, config)

    host = BackendHost(Resident(), "resident")
    handles = [host.allocate_resident(8 * 4), host.allocate_resident(8 * 4)]
    try:
        host.dispatch_resident(ids_kernel((4,), 8), handles,
                               DispatchConfig(workgroup_override=(2,)))
        assert seen == [((2, 1, 1), (4, 1, 1), None)]
        lid = np.frombuffer(host.download_resident(handles[0]), np.uint32)
        assert lid.tolist() == [0, 1] * 4
    finally:
        for h in handles:
            host.free_resident(h)
