"""Device loss on the real wgpu backend, in real worker processes: the ``faults-wgpu``
backend of the vyre-faults distribution is ``vyre_wgpu.backend`` losing its device on
request (see ``plugins/vyre-faults/vyre_faults/wgpu.py``).

* Soft loss (``fault:destroy_device``): the wgpu device is destroyed and the dispatch
  fails on it. The worker replies DeviceLostError, the pool sends TRY_RECOVER and the
  worker opens a new device in place: same process, next generation.
* Hard loss (``fault:destroy_then_submit``): work is submitted to the destroyed device,
  wgpu-native aborts the process (SIGABRT). The caller still gets DeviceLostError, the
  worker is replaced (new process, next generation), and the restart is not charged.

Either way the handles compiled before are invalidated and the next dispatch is exact."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from waiting import wait_for

import vyre_core
from vyre_core import Timeouts, ir
from vyre_core.config import DispatchConfig
from vyre_core.errors import DeviceLostError, PipelineInvalidatedError
from vyre_reference import run as reference_run

BACKEND = "faults-wgpu"
N = 1000
SOFT = DispatchConfig(label="fault:destroy_device")
HARD = DispatchConfig(label="fault:destroy_then_submit")


# -- helpers ----------------------------------------------------------------------------------

def mix(n: int = N) -> ir.Program:
    """``out[i] = x[i] * a + (y[i] ^ i)`` in u32 (wrapping): exact on every device."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.u32)
    y = k.read("y", ir.u32)
    a = k.uniform("a", ir.u32)
    out = k.output("out", ir.u32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = x[i] * a[0] + (y[i] ^ i)
    return k.build()


PROGRAM = mix()


def inputs(seed: int, n: int = N) -> list[np.ndarray]:
    """Distinct inputs per seed, so a stale or misdelivered result is caught."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 2**32, n, dtype=np.uint32),
            rng.integers(0, 2**32, n, dtype=np.uint32),
            np.array([0x9E3779B1 + seed], dtype=np.uint32)]


def assert_exact(outputs: Any, data: list[np.ndarray]) -> None:
    expected = reference_run(PROGRAM, data)
    assert len(outputs) == len(expected) == 1
    assert outputs[0].dtype == np.uint32
    assert outputs[0].tobytes() == expected[0].tobytes()
    x, y, a = data
    with np.errstate(over="ignore"):
        assert outputs[0].tolist() == (x * a[0] + (y ^ np.arange(N, dtype=np.uint32))).tolist()


def driver() -> vyre_core.Driver:
    return vyre_core.Driver(timeouts=Timeouts(kill_grace=1, heartbeat=10))


def pool_status(drv: vyre_core.Driver) -> dict[str, Any]:
    return drv.status()["pools"][BACKEND]


def worker(drv: vyre_core.Driver) -> dict[str, Any]:
    return pool_status(drv)["workers"][0]


def wait_idle(drv: vyre_core.Driver, timeout: float = 10.0) -> dict[str, Any]:
    return wait_for(lambda: (w := worker(drv))["state"] == "idle" and w, timeout,
                    "the worker to be idle")


def warm_up(drv: vyre_core.Driver) -> tuple[Any, dict[str, Any]]:
    """A normal dispatch and a compiled pipeline, both exact; the idle worker."""
    data = inputs(1)
    assert_exact(drv.dispatch(PROGRAM, data, backend=BACKEND), data)
    pipeline = drv.compile(PROGRAM, backend=BACKEND)
    data = inputs(2)
    assert_exact(pipeline.dispatch(data), data)
    return pipeline, wait_idle(drv)


def assert_invalidated(pipeline: Any, generation: int) -> None:
    assert not pipeline.valid
    with pytest.raises(PipelineInvalidatedError, match="Fix:") as info:
        pipeline.dispatch(inputs(3))
    assert "Compile the program again" in str(info.value)
    assert info.value.details["generation"] == generation


def assert_works_again(drv: vyre_core.Driver, generation: int, deaths: int = 0) -> None:
    for seed in (4, 5):
        data = inputs(seed)
        assert_exact(drv.dispatch(PROGRAM, data, backend=BACKEND), data)
    fresh = drv.compile(PROGRAM, backend=BACKEND)
    assert fresh.generation == generation
    data = inputs(6)
    assert_exact(fresh.dispatch(data), data)
    status = pool_status(drv)
    assert status["state"] == "running"
    # a loss recovered in place costs no process; a runtime that aborts the process is a
    # death like any other, charged to the restart intensity
    assert status["restarts"] == deaths


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VYRE_FAULTS", raising=False)
    monkeypatch.delenv("VYRE_FAULTS_WGPU_PRECEDENCE", raising=False)
    monkeypatch.setenv("RUST_BACKTRACE", "0")  # keeps wgpu's panic in the stderr tail


# -- registration -----------------------------------------------------------------------------

def test_faults_wgpu_is_registered_last_and_never_routed() -> None:
    with driver() as drv:
        registration = drv.registry.get(BACKEND)
        assert registration.precedence == 6000
        assert registration.entry_point == "faults-wgpu = vyre_faults.wgpu"
        assert registration.claims == drv.registry.get("wgpu").claims
        assert drv.routing.router.route(PROGRAM).backend != BACKEND
        assert pool_status(drv)["state"] == "not started"


def test_registration_imports_no_wgpu() -> None:
    code = ("import sys, vyre_faults.wgpu as w, vyre_core.registry as r; "
            "r.register_plugin(w); assert 'wgpu' not in sys.modules, "
            "sorted(m for m in sys.modules if 'wgpu' in m)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr


# -- soft loss: recovered in place ------------------------------------------------------------

@pytest.mark.timeout(60)
def test_soft_loss_recovers_in_place() -> None:
    with driver() as drv:
        pipeline, before = warm_up(drv)

        with pytest.raises(DeviceLostError) as info:
            drv.dispatch(PROGRAM, inputs(7), backend=BACKEND, config=SOFT)
        error = info.value
        assert error.code == 1202
        assert error.details["generation"] == before["generation"]
        assert f"generation {before['generation']}" in str(error)
        assert "Fix:" in str(error)

        after = wait_for(lambda: (w := worker(drv))["generation"] == before["generation"] + 1
                         and w["state"] == "idle" and w, 10.0, "recovery in place")
        assert after["pid"] == before["pid"]  # try_recover opened a new device, no restart
        assert_invalidated(pipeline, before["generation"])
        assert_works_again(drv, after["generation"])
        assert worker(drv)["pid"] == before["pid"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("via", ["pipeline", "profiled"])
def test_soft_loss_through_every_dispatch_hook(via: str) -> None:
    """The label is honoured by compiled pipelines and by vyre_dispatch_timed too."""
    with driver() as drv:
        pipeline, before = warm_up(drv)
        with pytest.raises(DeviceLostError) as info:
            if via == "pipeline":
                pipeline.dispatch(inputs(8), SOFT)
            else:
                drv.dispatch(PROGRAM, inputs(8), backend=BACKEND,
                             config=SOFT.replace(profile=True))
        assert info.value.code == 1202
        assert info.value.details["generation"] == before["generation"]
        after = wait_for(lambda: (w := worker(drv))["generation"] == before["generation"] + 1
                         and w["state"] == "idle" and w, 10.0, "recovery in place")
        assert after["pid"] == before["pid"]
        assert_invalidated(pipeline, before["generation"])
        data = inputs(9)
        out = drv.dispatch(PROGRAM, data, backend=BACKEND, config=DispatchConfig(profile=True))
        assert_exact(out, data)
        assert out.timing is not None


# -- hard loss: the runtime aborts, the worker is replaced ------------------------------------

@pytest.mark.timeout(60)
def test_hard_loss_aborts_and_the_worker_is_replaced() -> None:
    with driver() as drv:
        pipeline, before = warm_up(drv)

        with pytest.raises(DeviceLostError) as info:
            drv.dispatch(PROGRAM, inputs(10), backend=BACKEND, config=HARD)
        error = info.value
        assert error.code == 1202
        assert error.details["generation"] == before["generation"]
        assert "SIGABRT" in str(error) and "Fix:" in str(error)
        # a real abort of wgpu-native (a panic in wgpuQueueSubmit), not the fallback
        stderr = error.details["stderr"]
        assert "wgpuQueueSubmit" in stderr and "aborting" in stderr
        assert "aborting by hand" not in stderr

        after = wait_for(lambda: (w := worker(drv))["pid"] not in (None, before["pid"])
                         and w["state"] == "idle" and w, 15.0, "a replacement worker")
        assert after["generation"] == before["generation"] + 1
        assert_invalidated(pipeline, before["generation"])
        assert_works_again(drv, after["generation"], deaths=1)
        assert worker(drv)["pid"] == after["pid"]


@pytest.mark.timeout(60)
def test_hard_loss_in_a_compiled_pipeline() -> None:
    with driver() as drv:
        pipeline, before = warm_up(drv)
        with pytest.raises(DeviceLostError) as info:
            pipeline.dispatch(inputs(11), HARD)
        assert info.value.details["generation"] == before["generation"]
        assert "wgpuQueueSubmit" in info.value.details["stderr"]
        after = wait_for(lambda: (w := worker(drv))["pid"] not in (None, before["pid"])
                         and w["state"] == "idle" and w, 15.0, "a replacement worker")
        assert after["generation"] == before["generation"] + 1
        assert_invalidated(pipeline, before["generation"])
        assert_works_again(drv, after["generation"], deaths=1)
