"""One wgpu worker per device, for real: each Vulkan (Metal, D3D12) adapter wgpu lists is a
device (on CI one: Mesa's lavapipe; OpenGL's llvmpipe, the same CPU again, is not); a pool
with ``devices="all"`` opens each in a worker of its own, and work spread over them gives
the reference's bytes on every one. Several devices with real workers:
tests/faults/test_devices.py."""

from __future__ import annotations

from vyre_core import Driver, PoolOptions
from vyre_examples.saxpy import inputs as saxpy_inputs
from vyre_examples.saxpy import program as saxpy
from vyre_wgpu.adapter import adapter_facts, adapter_for, devices

N = 4096


def test_the_devices_are_the_adapters_listed_without_opening_one(strict):
    listed = devices()
    assert [d.id for d in listed] == list(range(len(listed)))
    facts = [adapter_facts(adapter_for(d.id)) for d in listed]
    assert [d.name for d in listed] == [f"{f['device']} ({f['backend_type']})" for f in facts]
    assert [d.software for d in listed] == [f["software_adapter"] for f in facts]
    assert [d.software for d in listed] == sorted(d.software for d in listed)  # hardware first
    if strict:  # one device: lavapipe over Vulkan (the GL adapter is the same CPU again)
        assert [f["backend_type"] for f in facts] == ["Vulkan"] and listed[0].software


def test_every_adapter_gets_a_worker_and_all_give_the_reference_bytes():
    with Driver(backend_options={"wgpu": PoolOptions(devices="all")}) as drv:
        listed = drv.devices("wgpu")
        program = saxpy(N)
        data = [saxpy_inputs(N, seed) for seed in range(4 * len(listed))]
        expected = [drv.dispatch(program, d, backend="reference")[0].tobytes() for d in data]
        pending = [drv.dispatch_async(program, d, backend="wgpu") for d in data]
        got = [p.result(120)[0].tobytes() for p in pending]
        assert got == expected
        workers = drv.status()["pools"]["wgpu"]["workers"]
        assert [w["device"] for w in workers] == [d.id for d in listed]
        assert all(w["served"] >= 1 for w in workers), workers  # spread over every adapter
        assert drv.route(program, backend="wgpu").devices == tuple(d.id for d in listed)
