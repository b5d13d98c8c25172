"""Races in the supervisor's shell: callers submitting while the driver closes (the
wake fd must never be written once it is closed, nor then into a reused fd), and worker
restarts (probed capabilities are kept, so routing never falls back to static claims and
never sends work to a backend it had demoted, and a probe always has an answer)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from waiting import Stalls, stays_true, wait_for

import vyre_core
from vyre_core import RestartPolicy, Timeouts
from vyre_core.contract.types import Capabilities
from vyre_core.errors import PoolFailedError, VyreError
from vyre_core.routing import Router, is_software_adapter

from .support import PROGRAM, driver, expected, inputs, worker

SUBMITTERS = 8
ROUNDS = 3
KILLS = 2
HOLD_AT_WRITE = 2.5  # seconds a caller is held at its wake write


# -- submitting while the driver closes --------------------------------------------------------

def _close_under_load(round_: int, stalls: Stalls) -> None:
    """Submitters keep calling until well after the pool's I/O thread has ended and closed
    its wake fd: compiled pipelines go straight to the pool (no driver-level closed check),
    so their submits straddle the moment the fd is closed."""
    drv = driver(workers=2)
    pipeline = drv.compile(PROGRAM, backend="reference")
    io_thread = drv.pools.existing("reference")._thread
    assert io_thread is not None
    warm = threading.Barrier(SUBMITTERS + 1)
    outcomes: list[list[object]] = [[] for _ in range(SUBMITTERS)]

    def call(index: int, seed: int) -> object:
        data = inputs(seed)
        try:
            if index % 2 == 0:
                out = pipeline.dispatch(data)
            elif seed % 2:
                out = drv.dispatch(PROGRAM, data, backend="reference")
            else:
                out = drv.dispatch_async(PROGRAM, data, backend="reference").result(60)
        except BaseException as exc:
            return exc
        return out[0].tobytes() == expected(data)

    def submit(index: int) -> None:
        seed = 100_000 * round_ + 1000 * index
        outcomes[index].append(call(index, seed))  # the pool runs before close starts
        warm.wait(timeout=60)
        after_io = 0  # calls made once the I/O thread (and its wake fd) is gone
        while after_io < 5:
            seed += 1
            ended = not io_thread.is_alive()
            outcomes[index].append(call(index, seed))
            after_io += ended

    threads = [threading.Thread(target=submit, args=(i,), daemon=True,
                                name=f"submitter-{i}") for i in range(SUBMITTERS)]
    try:
        for thread in threads:
            thread.start()
        warm.wait(timeout=60)  # every submitter has had an answer: close in mid-stream
        drv.close()
        assert not io_thread.is_alive()
        for thread in threads:
            thread.join(timeout=30)
        assert not [t.name for t in threads if t.is_alive()], "a call hung across close()"
    finally:
        drv.close()

    for index, seen in enumerate(outcomes):
        assert seen[0] is True, (index, seen[0])
        errors = [o for o in seen if o is not True]
        assert not [o for o in errors if o is False], f"submitter {index}: a wrong result"
        foreign = [repr(o) for o in errors if not isinstance(o, PoolFailedError)]
        assert not foreign, f"submitter {index}: {foreign[:3]}"
        first_error = seen.index(errors[0])
        assert all(o is not True for o in seen[first_error:]), f"submitter {index}: served " \
            "after it was refused"
    # the closed driver refuses at once, with a Fix
    for refused in (lambda: drv.dispatch(PROGRAM, inputs(1), backend="reference"),
                    lambda: drv.dispatch_async(PROGRAM, inputs(1), backend="reference")
                    .result(5),
                    lambda: pipeline.dispatch(inputs(1))):
        start = time.monotonic()
        with pytest.raises(PoolFailedError) as caught:
            refused()
        assert time.monotonic() - start < 1.0 + stalls.since(start), stalls
        assert "Driver" in caught.value.fix
    assert drv.status()["closed"] is True


@pytest.mark.timeout(180)
def test_callers_racing_close_all_end_with_a_result_or_a_vyre_error(vyre_stalls) -> None:
    for round_ in range(ROUNDS):
        _close_under_load(round_, vyre_stalls)


@pytest.mark.timeout(120)
def test_a_submit_paused_at_its_wake_write_never_writes_a_closed_fd(monkeypatch) -> None:
    """The race made deterministic: one caller is held at the very moment it wakes the
    pool's I/O thread (its ``os.write``/``os.eventfd_write``) while another thread closes
    the driver. Whatever the pool does, the descriptor that caller then writes must still
    be the one it meant (not closed, not reused), and its call must end."""
    drv = driver(workers=2)
    drv.dispatch(PROGRAM, inputs(1), backend="reference")
    io_thread = drv.pools.existing("reference")._thread
    assert io_thread is not None
    at_write = threading.Event()
    stale: list[str] = []
    held = threading.local()
    real = {"write": os.write, "eventfd_write": os.eventfd_write}

    def hold(name: str):
        def write(fd: int, *args: object) -> object:
            if getattr(held, "armed", False):
                held.armed = False
                before = os.fstat(fd)
                at_write.set()
                io_thread.join(HOLD_AT_WRITE)  # let close() run as far as it can meanwhile
                try:
                    after = os.fstat(fd)
                except OSError as exc:
                    stale.append(f"{name}({fd}) after the fd was closed ({exc})")
                else:
                    if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
                        stale.append(f"{name}({fd}) into a reused descriptor")
            return real[name](fd, *args)
        return write

    for name in real:
        monkeypatch.setattr(os, name, hold(name))
    outcome: list[object] = []

    def caller() -> None:
        data = inputs(7)
        held.armed = True
        try:  # (a call nobody waits on is the one that always wakes the I/O thread)
            pending = drv.dispatch_async(PROGRAM, data, backend="reference")
            outcome.append(pending.result(30)[0].tobytes() == expected(data))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=caller, daemon=True)
    try:
        thread.start()
        assert at_write.wait(30), "the caller never woke the pool"
        drv.close()
        thread.join(timeout=30)
        assert not thread.is_alive(), "the held caller's call never ended"
    finally:
        monkeypatch.undo()
        drv.close()
    assert not stale, stale
    assert outcome == [True] or isinstance(outcome[0], PoolFailedError), outcome


# -- capabilities kept across restarts --------------------------------------------------------

def _software_wgpu(drv: vyre_core.Driver) -> None:
    if "wgpu" not in [reg.id for reg in drv.backends()]:
        pytest.skip("the wgpu backend is not installed")
    try:
        caps = drv.probe("wgpu", timeout=60)
    except VyreError as exc:
        pytest.skip(f"the wgpu backend cannot start here: {exc.cause.splitlines()[0]}")
    if not is_software_adapter(caps):
        pytest.skip("wgpu runs on a hardware adapter here: routing does not demote it")


@pytest.mark.timeout(180)
def test_a_probe_returns_only_once_routing_was_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first routed call probes wgpu (a software adapter here, to be demoted) and
    routes again. The probe's caller is woken by the pool: routing must have heard of the
    probed capabilities before that, however slowly it is told (found in CI: the call ran
    on wgpu, routed on its static claims)."""
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5)) as probing:
        _software_wgpu(probing)
    real = Router.invalidate

    def slow_invalidate(self: Router) -> None:
        time.sleep(0.3)  # a thread switch at the worst moment, made certain
        real(self)

    monkeypatch.setattr(Router, "invalidate", slow_invalidate)
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=0.5)) as drv:
        assert drv.route(PROGRAM).backend == "cpu"


@pytest.mark.timeout(180)
def test_restarts_keep_capabilities_so_a_demoted_backend_stays_demoted() -> None:
    drv = vyre_core.Driver(restart=RestartPolicy(max_restarts=20, window=60),
                           timeouts=Timeouts(kill_grace=0.5, heartbeat=10))
    with drv:
        _software_wgpu(drv)
        assert drv.route(PROGRAM).backend == "cpu"
        data = inputs(1)
        assert drv.dispatch(PROGRAM, data)[0].tobytes() == expected(data)
        wgpu = drv.pools.existing("wgpu")
        probed = wgpu.capabilities
        assert probed is not None and is_software_adapter(probed)

        stop = threading.Event()
        wrong: list[str] = []
        checks = [0]

        def watch_routing() -> None:  # polls every 2 ms, leaving the GIL to the others
            while not stop.wait(0.002):
                try:
                    chosen = drv.route(PROGRAM).backend
                    status = drv.status()["pools"]["wgpu"]
                    caps = wgpu.capabilities
                except BaseException as exc:
                    wrong.append(f"routing raised {exc!r}")
                    return
                if chosen != "cpu":
                    wrong.append(f"routed to {chosen!r} while wgpu was in state "
                                 f"{[w['state'] for w in status['workers']]}")
                if caps is None:
                    wrong.append("the wgpu pool forgot its probed capabilities")
                checks[0] += 1

        watcher = threading.Thread(target=watch_routing, daemon=True)
        watcher.start()
        try:
            for _ in range(KILLS):
                before = worker(drv, 0, "wgpu")
                os.kill(before["pid"], signal.SIGKILL)
                # until its replacement has said hello (a new generation, idle)
                wait_for(lambda b=before: (w := worker(drv, 0, "wgpu"))["state"] == "idle"
                         and w["generation"] > b["generation"] and w["pid"] != b["pid"],
                         60, "the wgpu worker to be replaced")
                assert not wrong, wrong[:3]
        finally:
            stop.set()
            watcher.join(timeout=30)
        assert not watcher.is_alive()
        assert not wrong, wrong[:3]
        assert checks[0] > 0
        assert drv.status()["pools"]["wgpu"]["restarts"] == KILLS
        assert drv.route(PROGRAM).backend == "cpu"
        data = inputs(2)
        assert drv.dispatch(PROGRAM, data)[0].tobytes() == expected(data)


@pytest.mark.timeout(120)
def test_probe_right_after_a_worker_was_killed_answers() -> None:
    """With two workers, the other one answers the probe's ping while the killed one is
    being replaced: the probe still returns the pool's capabilities."""
    with driver(workers=2, restart={"max_restarts": 10}) as drv:
        first = drv.probe("reference", timeout=60)
        assert isinstance(first, Capabilities)
        for round_ in range(4):
            index = round_ % 2
            before = worker(drv, index, "reference")
            other = worker(drv, 1 - index, "reference")
            os.kill(before["pid"], signal.SIGKILL)
            # the supervisor has seen the death and started a replacement...
            wait_for(lambda b=before, i=index: worker(drv, i, "reference")["generation"]
                     > b["generation"], 30, "the killed worker to be replaced")
            # ...and the probe answers now, while the replacement may still be starting
            caps = drv.probe("reference", timeout=30)
            assert isinstance(caps, Capabilities)
            assert caps.to_dict() == first.to_dict()
            assert worker(drv, 1 - index, "reference")["pid"] == other["pid"]
            wait_for(lambda i=index: worker(drv, i, "reference")["state"] == "idle", 30,
                     "the replacement to say hello")
        stays_true(lambda: drv.pools.existing("reference").capabilities is not None, 0.2,
                   "the reference pool keeps its capabilities")
        data = inputs(5)
        assert drv.dispatch(PROGRAM, data, backend="reference")[0].tobytes() == expected(data)
