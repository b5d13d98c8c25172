"""Launch validation against a backend's limits: every limit refuses a launch one past it
with a LaunchLimitError that names the axis or buffer and the limit, and accepts a launch
exactly at it. Nothing runs when a launch is refused."""

from __future__ import annotations

import numpy as np
import pytest
from counting_backend import CountingBackend

import vyre_reference
import vyre_reference.backend
from vyre_core import ir
from vyre_core.config import DispatchConfig
from vyre_core.contract.types import Capabilities
from vyre_core.errors import LaunchLimitError
from vyre_core.launch import check_limits, plan_launch
from vyre_workers.backend_host import BackendHost

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)

CAPS = Capabilities(max_workgroup_size=(64, 32, 16), max_invocations_per_workgroup=256,
                    max_workgroups_per_dimension=100, max_storage_buffer_bytes=4096,
                    max_workgroup_memory_bytes=1024)


def caps(**changes) -> Capabilities:
    fields = {name: getattr(CAPS, name) for name in (
        "max_workgroup_size", "max_invocations_per_workgroup", "max_workgroups_per_dimension",
        "max_storage_buffer_bytes", "max_workgroup_memory_bytes")}
    return Capabilities(**{**fields, **changes})


def marking_kernel(workgroup=(1,), out_count: int = 1) -> ir.Program:
    k = ir.Kernel(workgroup=workgroup)
    out = k.output("out", ir.u32, out_count)
    out[0] = 1
    return k.build()


def copy_kernel(count: int | None = None, out_count: int = 4) -> ir.Program:
    k = ir.Kernel(workgroup=(4,))
    src = k.read("src", ir.u32, count)
    dst = k.output("dst", ir.u32, out_count)
    i = k.let("i", ir.global_id(0))
    dst[i] = src[i]
    return k.build()


def shared_kernel(words: int) -> ir.Program:
    """Uses ``words`` u32 of workgroup memory."""
    k = ir.Kernel(workgroup=(4,))
    out = k.output("out", ir.u32, 4)
    tile = k.workgroup_buffer("tile", ir.u32, words)
    lid = k.let("lid", ir.local_id(0))
    tile[lid] = lid
    k.barrier()
    out[ir.global_id(0)] = tile[lid]
    return k.build()


def plan(program: ir.Program, inputs=(), config: DispatchConfig | None = None,
         capabilities: Capabilities = CAPS):
    return plan_launch(program, list(inputs), config or DispatchConfig(), capabilities,
                       backend="x")


def refused(program, inputs=(), config=None, capabilities: Capabilities = CAPS) -> str:
    with pytest.raises(LaunchLimitError) as caught:
        plan(program, inputs, config, capabilities)
    text = str(caught.value)
    assert text.startswith("[E1104] backend 'x': ")
    assert "\nFix: " in text and text.splitlines()[-1].startswith("Fix: ")
    return caught.value.cause


# -- workgroup size ------------------------------------------------------------------------


@pytest.mark.parametrize("workgroup, axis, size, limit", [
    ((65, 1, 1), "x", 65, 64), ((1, 33, 1), "y", 33, 32), ((1, 1, 17), "z", 17, 16),
    ((1000, 1, 1), "x", 1000, 64),
])
def test_workgroup_axis_over_the_limit_names_axis_and_limit(workgroup, axis, size, limit):
    cause = refused(marking_kernel(workgroup))
    assert f"workgroup axis {axis} is {size}, the limit is {limit}" in cause


@pytest.mark.parametrize("workgroup", [(64, 1, 1), (1, 32, 1), (1, 1, 16), (4, 4, 16)])
def test_workgroup_axis_at_the_limit_passes(workgroup):
    assert plan(marking_kernel(workgroup)).program.workgroup == workgroup


def test_workgroup_override_is_checked_not_the_programs_workgroup():
    cause = refused(marking_kernel((1,)), config=DispatchConfig(workgroup_override=(1, 33)))
    assert "workgroup axis y is 33, the limit is 32" in cause
    launch = plan(marking_kernel((128,)), config=DispatchConfig(workgroup_override=(64,)))
    assert launch.program.workgroup == (64, 1, 1)
    assert launch.config.workgroup_override is None


def test_invocations_over_the_limit_are_refused():
    cause = refused(marking_kernel((16, 16, 2)))  # every axis within its limit
    assert "512 invocations, the limit is 256" in cause


@pytest.mark.parametrize("workgroup", [(16, 16, 1), (64, 4, 1), (8, 2, 16)])
def test_invocations_at_the_limit_pass(workgroup):
    plan(marking_kernel(workgroup))


# -- grid ----------------------------------------------------------------------------------


@pytest.mark.parametrize("grid, axis", [((101,), "x"), ((1, 101), "y"), ((1, 1, 101), "z"),
                                        ((100, 100, 101), "z")])
def test_grid_axis_over_the_limit_names_axis_and_limit(grid, axis):
    cause = refused(marking_kernel(), config=DispatchConfig(grid_override=grid))
    assert f"grid axis {axis} has 101 workgroups, the limit is 100" in cause


def test_grid_at_the_limit_passes():
    launch = plan(marking_kernel(), config=DispatchConfig(grid_override=(100, 100, 100)))
    assert launch.grid == (100, 100, 100)
    assert launch.config.grid_override == (100, 100, 100)


def test_inferred_grid_is_checked_too():
    # 404 invocations of workgroup 4 -> 101 workgroups along x
    cause = refused(copy_kernel(out_count=4),
                    [np.zeros(4, np.uint32)], DispatchConfig(dispatch_elements=404))
    assert "grid axis x has 101 workgroups, the limit is 100" in cause
    launch = plan(copy_kernel(out_count=4), [np.zeros(4, np.uint32)],
                  DispatchConfig(dispatch_elements=400))
    assert launch.grid == (100, 1, 1)


# -- storage buffers -----------------------------------------------------------------------


def test_input_buffer_over_the_storage_limit_names_buffer_and_limit():
    cause = refused(copy_kernel(), [np.zeros(1025, np.uint32)],
                    DispatchConfig(grid_override=(1,)))
    assert "buffer 'src' is 4100 bytes, the limit is 4096" in cause


def test_output_buffer_over_the_storage_limit_names_buffer_and_limit():
    cause = refused(copy_kernel(out_count=1025), [np.zeros(4, np.uint32)],
                    DispatchConfig(grid_override=(1,)))
    assert "buffer 'dst' is 4100 bytes, the limit is 4096" in cause


def test_declared_count_is_what_is_checked_not_the_short_input():
    cause = refused(copy_kernel(count=1025), [np.zeros(1, np.uint32)],
                    DispatchConfig(grid_override=(1,)))
    assert "buffer 'src' is 4100 bytes" in cause


def test_buffers_at_the_storage_limit_pass():
    launch = plan(copy_kernel(out_count=1024), [np.zeros(1024, np.uint32)],
                  DispatchConfig(grid_override=(1,)))
    assert launch.lengths == {"src": 1024, "dst": 1024}


def test_storage_limit_zero_means_not_reported_and_is_not_checked():
    unreported = caps(max_storage_buffer_bytes=0)
    launch = plan(copy_kernel(out_count=10**6), [np.zeros(4, np.uint32)],
                  DispatchConfig(grid_override=(1,)), unreported)
    assert launch.lengths["dst"] == 10**6


def test_workgroup_buffers_are_not_storage_buffers():
    # 256 u32 = 1024 bytes of workgroup memory: within the workgroup memory limit, over a
    # storage limit of 512 that applies only to storage buffers.
    plan(shared_kernel(256), capabilities=caps(max_storage_buffer_bytes=512))


# -- workgroup memory ----------------------------------------------------------------------


def test_workgroup_memory_over_the_limit_is_refused():
    cause = refused(shared_kernel(257))
    assert "workgroup memory is 1028 bytes, the limit is 1024" in cause


def test_workgroup_memory_at_the_limit_passes():
    plan(shared_kernel(256))


def test_check_limits_directly():
    prog = marking_kernel((64,))
    check_limits(prog, (100, 1, 1), {"out": 1}, CAPS, "x")
    with pytest.raises(LaunchLimitError, match=r"backend 'y': grid axis x has 101"):
        check_limits(prog, (101, 1, 1), {"out": 1}, CAPS, "y")


def test_no_capabilities_means_no_limit_checks():
    launch = plan_launch(marking_kernel((4096,)), [], DispatchConfig(), None)
    assert launch.grid == (1, 1, 1)


# -- through the backend host --------------------------------------------------------------


def test_reference_host_refuses_a_workgroup_of_2048_before_running():
    host = BackendHost(vyre_reference.backend)
    with pytest.raises(LaunchLimitError, match="Fix: ") as caught:
        host.dispatch(marking_kernel((2048,)), [])
    assert "backend 'reference': workgroup axis x is 2048, the limit is 1024" in \
        caught.value.cause
    with pytest.raises(LaunchLimitError, match="workgroup axis x is 2048"):
        host.dispatch(marking_kernel((4,)), [], DispatchConfig(workgroup_override=(2048,)))
    out, = host.dispatch(marking_kernel((1024,)), [])
    assert out.tolist() == [1]


def test_refused_launch_never_reaches_the_backend():
    plugin = CountingBackend()
    host = BackendHost(plugin, "counting")
    with pytest.raises(LaunchLimitError, match="workgroup axis x is 2048, the limit is 1024"):
        host.dispatch(marking_kernel((2048,)), [])
    with pytest.raises(LaunchLimitError, match="2048 invocations, the limit is 1024"):
        host.dispatch(marking_kernel((64, 32)), [])
    assert plugin.calls == 0
    host.dispatch(marking_kernel((32, 32)), [])
    assert plugin.calls == 1


def test_conservative_defaults_refuse_anything_bigger_than_one_invocation():
    class Minimal:
        VYRE_CONTRACT = 1

        def vyre_backend_id(self) -> str:
            return "minimal"

        def vyre_dispatch(self, program, inputs, config):
            return vyre_reference.run(program, inputs, grid=config.grid_override)

    host = BackendHost(Minimal(), "minimal")
    with pytest.raises(LaunchLimitError, match="workgroup axis x is 2, the limit is 1"):
        host.dispatch(marking_kernel((2,)), [])
    with pytest.raises(LaunchLimitError, match="grid axis x has 2 workgroups, the limit is 1"):
        host.dispatch(marking_kernel((1,)), [], DispatchConfig(grid_override=(2,)))
    out, = host.dispatch(marking_kernel((1,)), [])
    assert out.tolist() == [1]


# -- known bugs ------------------------------------------------------------------------------


def test_dispatch_resident_checks_launch_limits():
    """The resident path is refused before running when it exceeds a limit, like
    dispatch (a (2048,) workgroup is over the reference's (1024, 1024, 64))."""
    host = BackendHost(vyre_reference.backend)
    handle = host.allocate_resident(4)
    try:
        with pytest.raises(LaunchLimitError, match="workgroup axis x is 2048"):
            host.dispatch_resident(marking_kernel((2048,)), [handle])
        assert host.download_resident(handle) == bytes(4)  # nothing ran
    finally:
        host.free_resident(handle)


# -- one wording ---------------------------------------------------------------------------


@pytest.mark.parametrize("program", [
    marking_kernel(workgroup=(65,)),
    marking_kernel(workgroup=(16, 16, 2)),
    shared_kernel(257),
    copy_kernel(count=1025, out_count=1025),
], ids=["axis", "invocations", "workgroup-memory", "storage-buffer"])
def test_routing_and_the_launch_refuse_a_limit_in_the_same_words(program):
    """A limit routing sees in a program's declarations is refused at launch with the same
    cause (after the backend's name), so a user reads one message whichever caught it."""
    from vyre_core.routing.rank import rejection_reasons

    reasons = rejection_reasons(program.requirements(), CAPS)
    cause = refused(program, [np.zeros(1025, np.uint32)] if program.inputs else [],
                    DispatchConfig(grid_override=(1, 1, 1)))
    assert cause == f"backend 'x': {reasons[0]}"
