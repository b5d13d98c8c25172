"""One worker per device, with real worker processes: the faults backend lists as many
devices as ``VYRE_FAULTS=devices:N`` says, and its ``fault:device`` dispatch answers with
the id of the device its worker was pinned to. The rules behind it: test_device_rules.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from vyre_core import RestartPolicy, Timeouts, ir
from vyre_core.config import DispatchConfig
from vyre_core.errors import InvalidConfigError, NoCapableBackendError
from vyre_core.supervisor.options import PoolOptions

from .support import PATIENCE, driver, pool_status, wait_for

N = 8
DEVICE = DispatchConfig(label="fault:device")


def words() -> ir.Program:
    k = ir.Kernel(workgroup=(N,))
    x = k.read("x", ir.u32, N)
    out = k.output("out", ir.u32, N)
    i = k.let("i", ir.global_id(0))
    out[i] = x[i]
    return k.build()


PROGRAM = words()
DATA = [np.arange(N, dtype=np.uint32)]


def device_of(drv) -> int:
    out, = drv.dispatch(PROGRAM, DATA, backend="faults", config=DEVICE)
    assert len(set(out.tolist())) == 1
    return int(out[0])


def test_all_devices_get_one_worker_each_pinned_to_its_own_device(monkeypatch):
    monkeypatch.setenv("VYRE_FAULTS", "devices:3")
    with driver(backend_options={"faults": PoolOptions(devices="all")}) as drv:
        # routing probes every device before the first call, which starts the pool; once
        # its three workers are up, three calls at once spread over three, each worker
        # answering from its own device (while one is still starting, a worker done with
        # its call takes the next: on a loaded machine that is not three)
        first = device_of(drv)
        wait_for(lambda: [w["state"] for w in pool_status(drv)["workers"]] == ["idle"] * 3,
                 PATIENCE, "the three workers up")
        pending = [drv.dispatch_async(PROGRAM, DATA, backend="faults",  # (each holds its
                                      config=DispatchConfig(label="fault:device:2"))  # worker
                   for _ in range(3)]  # longer than this loop may stall)
        assert sorted(int(p.result(60)[0][0]) for p in pending) == [0, 1, 2]
        status = pool_status(drv)
        assert [w["device"] for w in status["workers"]] == [0, 1, 2]
        assert [w["served"] for w in status["workers"]] == [1 + (i == first) for i in range(3)]
        assert len({w["pid"] for w in status["workers"]}) == 3
        assert [d["name"] for d in status["devices"]] == [f"fault device {i}" for i in range(3)]
        assert [d["software"] for d in status["devices"]] == [False, True, False]
        assert device_of(drv) == 0  # one at a time: the first worker, holding the program
        assert drv.route(PROGRAM, backend="faults").devices == (0, 1, 2)


def test_named_devices_and_workers_per_device(monkeypatch):
    monkeypatch.setenv("VYRE_FAULTS", "devices:4")
    options = PoolOptions(devices=[3, 1], workers=2)
    with driver(backend_options={"faults": options}) as drv:
        assert device_of(drv) in (1, 3)
        status = pool_status(drv)
        assert [w["device"] for w in status["workers"]] == [3, 3, 1, 1]
        assert len(status["devices"]) == 4


def test_without_devices_the_worker_is_not_pinned(monkeypatch):
    monkeypatch.setenv("VYRE_FAULTS", "devices:2")
    with driver() as drv:
        assert device_of(drv) == 2**32 - 1
        assert pool_status(drv)["workers"][0]["device"] is None
        assert len(pool_status(drv)["devices"]) == 2  # listed all the same


def test_a_device_the_backend_does_not_have_is_refused_with_the_devices_it_has(monkeypatch):
    """A configuration error, not a fault: the call fails at the first start with the
    backend's own Fix, and no restart is spent on it (max_restarts=0 would fail the pool)."""
    monkeypatch.setenv("VYRE_FAULTS", "devices:2")
    options = PoolOptions(devices=[5], restart=RestartPolicy(max_restarts=0),
                          timeouts=Timeouts(startup=30))
    with driver(backend_options={"faults": options}) as drv:
        with pytest.raises(InvalidConfigError) as err:
            drv.dispatch(PROGRAM, DATA, backend="faults")
        assert pool_status(drv)["state"] == "running"
    text = str(err.value)
    assert "no device 5; its devices: 0 (fault device 0), 1 (fault device 1)" in text
    assert "Fix: Name one of these ids in PoolOptions(devices=...)" in text


def test_a_backend_whose_devices_cannot_be_listed_runs_on_device_0(monkeypatch, caplog):
    monkeypatch.setenv("VYRE_FAULTS", "slow_devices")  # (its workers list them at once)
    options = PoolOptions(devices="all", timeouts=Timeouts(startup=2))
    with driver(backend_options={"faults": options}) as drv:
        assert device_of(drv) == 0
        assert [w["device"] for w in pool_status(drv)["workers"]] == [0]
    assert "took over 2 s" in caplog.text and "running on device 0 alone" in caplog.text


def test_the_device_lister_answers_in_json_and_says_why_not(monkeypatch):
    run = [sys.executable, "-m", "vyre_workers.devices", "--backend", "faults",
           "--parent-pid", str(os.getpid())]
    monkeypatch.setenv("VYRE_FAULTS", "devices:2")
    ok = subprocess.run([*run, "--entry-point", "faults"], capture_output=True, text=True,
                        timeout=60)
    assert json.loads(ok.stdout)["devices"][1]["name"] == "fault device 1"
    bad = subprocess.run([*run, "--entry-point", "nope"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 3
    assert json.loads(bad.stdout)["error"]["type"] == "PluginLoadError"


def test_a_worker_killed_is_restarted_on_its_own_device(monkeypatch):
    monkeypatch.setenv("VYRE_FAULTS", "devices:2")
    with driver(backend_options={"faults": PoolOptions(devices="all")}) as drv:
        drv.dispatch(PROGRAM, DATA, backend="faults")
        before = pool_status(drv)["workers"][1]
        os.kill(before["pid"], signal.SIGKILL)
        after = wait_for(lambda: (w := pool_status(drv)["workers"][1])["state"] == "idle"
                         and w["generation"] == 2 and w, 30, "device 1's worker to be back")
        assert after["device"] == 1 and after["pid"] != before["pid"]
        pending = [drv.dispatch_async(PROGRAM, DATA, backend="faults",
                                      config=DispatchConfig(label="fault:sleep:0.3"))
                   for _ in range(2)]
        for p in pending:
            p.result(30)
        assert pool_status(drv)["workers"][1]["served"] == 1


def f64_double() -> ir.Program:
    k = ir.Kernel(workgroup=(N,))
    x = k.read("x", ir.f64, N)
    out = k.output("out", ir.f64, N)
    i = k.let("i", ir.global_id(0))
    out[i] = x[i] * 2.0
    return k.build()


def test_capabilities_are_per_device_and_routing_keeps_work_to_capable_ones(monkeypatch):
    monkeypatch.setenv("VYRE_FAULTS", "devices:2,no_f64_on:1")
    program = f64_double()
    data = [np.arange(N, dtype=np.float64)]
    with driver(backend_options={"faults": PoolOptions(devices="all")}) as drv:
        assert drv.route(program, backend="faults").devices == (0,)
        assert drv.route(PROGRAM, backend="faults").devices == (0, 1)
        text = "\n".join(f"{e.backend} {e.device} {e.accepted} {e.reasons}"
                         for e in drv.explain(program) if e.backend == "faults")
        assert "faults 0 True ()" in text and "faults 1 False" in text and "f64" in text
        for _ in range(4):  # in parallel too: never on device 1
            pending = [drv.dispatch_async(program, data, backend="faults",
                                          config=DispatchConfig(label="fault:sleep:0.2"))
                       for _ in range(2)]
            for p in pending:
                assert p.result(30)[0].tobytes() == (data[0] * 2).tobytes()
        assert [w["served"] for w in pool_status(drv)["workers"]][1] == 0
        # a resident buffer on device 1 cannot take the f64 program there
        hold = drv.dispatch_async(PROGRAM, DATA, backend="faults",
                                  config=DispatchConfig(label="fault:sleep:1"))
        wait_for(lambda: pool_status(drv)["workers"][0]["running"], 10, "worker 0 busy")
        buffers = [drv.allocate_resident(8 * N, backend="faults")]
        buffers.append(drv.allocate_resident(8 * N, near=buffers[0]))
        hold.result(30)
        assert drv.pools.open("faults").device_of(buffers[0].slot) == 1
        with pytest.raises(NoCapableBackendError) as err:
            drv.dispatch_resident(program, buffers)
        assert "live on device 1 of 'faults'" in str(err.value) and "devices that can: 0" \
            in str(err.value)


def test_a_device_that_refuses_a_program_is_passed_over_for_it_alone(monkeypatch):
    monkeypatch.setenv("VYRE_FAULTS", "devices:2")
    monkeypatch.setenv("VYRE_FAULTS_PRECEDENCE", "10")  # routed to first, unnamed
    refusing = DispatchConfig(label="fault:unsupported_on:1")
    with driver(backend_options={"faults": PoolOptions(devices="all")}) as drv:
        assert drv.route(PROGRAM).devices == (0, 1)
        pending = [drv.dispatch_async(PROGRAM, DATA, config=refusing) for _ in range(4)]
        for p in pending:  # the ones sent to device 1 are refused there, and run on 0
            assert p.result(30)[0].tobytes() == DATA[0].tobytes()
        assert [w["served"] for w in pool_status(drv)["workers"]][1] >= 1  # it was tried
        assert drv.route(PROGRAM).devices == (0,)
        assert drv.route(words_plus_one()).devices == (0, 1)  # other work: both
        refused = [e for e in drv.explain(PROGRAM) if e.backend == "faults" and e.device == 1]
        assert "it refused this program at compile" in refused[0].reasons[0]


def words_plus_one() -> ir.Program:
    k = ir.Kernel(workgroup=(N,))
    x = k.read("x", ir.u32, N)
    out = k.output("out", ir.u32, N)
    i = k.let("i", ir.global_id(0))
    out[i] = x[i] + 1
    return k.build()
