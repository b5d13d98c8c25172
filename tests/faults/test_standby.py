"""Hot standby with real worker processes: ``PoolOptions.standby`` spares start with the
pool, never serve, and take over a serving slot the moment its process dies (SIGKILL, a
crashing request), as the slot's next generation, keeping their pid; a new spare is then
started. A frozen spare is replaced by itself; close() leaves no process behind. The rules
themselves are checked one by one in tests/test_standby_rules.py."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psutil
import pytest
from child_process import fork_servers, worker_processes
from waiting import stays_true

import vyre_core
from vyre_core.config import DispatchConfig
from vyre_core.errors import PipelineInvalidatedError, WorkerCrashedError
from vyre_core.supervisor.local.pool import Pool

from .support import (
    PATIENCE,
    PROGRAM,
    Workers,
    assert_saxpy,
    driver,
    inputs,
    pool_status,
    wait_for,
    worker,
)

pytestmark = [pytest.mark.processes, pytest.mark.timeout(60)]


def dead(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie until its pool reaps it, or gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def kill(pid: int) -> None:
    """SIGKILL ``pid`` and wait until it has exited."""
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: dead(pid), PATIENCE, f"pid {pid} to die")


def exit_shown(pool: Pool, pid: int) -> bool:
    """Whether the pidfd ``pool`` holds for ``pid`` is readable: the process has exited
    (every thread gone), and the pool's next poll reports it."""
    (proc,) = [p for p in pool._processes.values() if p.pid == pid]
    poller = select.poll()
    poller.register(proc.pidfd, select.POLLIN)
    return bool(poller.poll(0))


@contextlib.contextmanager
def between_polls(pool: Pool, when: Callable[[dict[Any, int]], Any],
                  act: Callable[[], None]) -> Iterator[None]:
    """Run ``act`` once on ``pool``'s I/O thread, after the first poll whose events
    satisfy ``when`` and before the thread takes the pool's lock to handle them (the
    ``Pool.after_poll`` test seam): what ``act`` causes is seen by the next poll, never
    this one. On leaving the block, wait for ``act`` to have run and raise what it raised."""
    done = threading.Event()
    raised: list[BaseException] = []

    def hook(events: dict[Any, int]) -> None:
        if done.is_set() or not when(events):
            return
        try:
            act()
        except BaseException as exc:  # (raised here, it would end the I/O thread)
            raised.append(exc)
        finally:
            done.set()

    pool.after_poll = hook
    try:
        yield
        assert done.wait(PATIENCE), "the I/O thread never polled what was awaited"
    finally:
        del pool.after_poll  # (back to the class's None)
    if raised:
        raise raised[0]


def spare_ready(drv: vyre_core.Driver, backend: str, count: int = 1,
                timeout: float = PATIENCE) -> list[dict[str, Any]]:
    """The ready spares of ``backend`` once there are ``count``."""
    def ready() -> list[dict[str, Any]] | None:
        status = pool_status(drv, backend)
        spares = [w for w in status["workers"] if w["spare"] and w["state"] == "spare"]
        return spares if status["standby"] == count and len(spares) == count else None
    return wait_for(ready, timeout, f"{count} ready spare(s) of {backend!r}")


def serving_idle(drv: vyre_core.Driver, backend: str, index: int = 0) -> dict[str, Any]:
    return wait_for(lambda: (w := worker(drv, index, backend))["state"] == "idle" and w,
                    PATIENCE, f"worker {index} of {backend!r} to be idle")


def dispatch_exact(drv: vyre_core.Driver, seed: int, backend: str, **config: Any) -> None:
    data = inputs(seed)
    cfg = DispatchConfig(**config) if config else None
    assert_saxpy(drv.dispatch(PROGRAM, data, backend=backend, config=cfg), data)


# -- start-up ------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["reference", "faults"])
def test_a_spare_is_ready_after_start_and_serves_nobody(backend: str) -> None:
    with driver(standby=1) as drv:
        for seed in range(4):
            dispatch_exact(drv, seed, backend)
        (spare,) = spare_ready(drv, backend)
        status = pool_status(drv, backend)
        serving = status["workers"][0]
        assert [w["spare"] for w in status["workers"]] == [False, True]
        assert spare["index"] == 1 and spare["pid"] not in (None, serving["pid"])
        assert spare["served"] == 0 and serving["served"] == 4
        assert psutil.Process(spare["pid"]).is_running()
        assert status["restarts"] == 0


# -- promotion -----------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["reference", "faults"])
def test_sigkill_of_the_serving_worker_promotes_the_spare(backend: str) -> None:
    kills = 3
    with driver(standby=1, restart={"max_restarts": kills + 1, "window": 60.0}) as drv:
        dispatch_exact(drv, 100, backend)
        seen: set[int] = set()
        for round_ in range(1, kills + 1):
            (spare,) = spare_ready(drv, backend)
            before = serving_idle(drv, backend)
            seen |= {before["pid"], spare["pid"]}
            kill(before["pid"])
            after = wait_for(lambda old=before["pid"]: (w := worker(drv, 0, backend))["pid"]
                             != old and w, PATIENCE, "the death to be seen")
            assert after["pid"] == spare["pid"], "the slot did not get the spare's process"
            assert after["generation"] == before["generation"] + 1
            dispatch_exact(drv, 100 + round_, backend)  # on the promoted process
            assert worker(drv, 0, backend)["pid"] == spare["pid"]
            (fresh,) = spare_ready(drv, backend)
            assert fresh["pid"] not in seen and fresh["generation"] == spare["generation"] + 1
            status = pool_status(drv, backend)
            assert status["state"] == "running" and status["restarts"] == round_
            assert [w["restarts"] for w in status["workers"]] == [round_, 0]


def test_a_pipeline_compiled_before_the_promotion_is_invalidated() -> None:
    with driver(standby=1) as drv:
        pipeline = drv.compile(PROGRAM, backend="reference")
        data = inputs(200)
        assert_saxpy(pipeline.dispatch(data), data)
        (spare,) = spare_ready(drv, "reference")
        before = serving_idle(drv, "reference")
        assert pipeline.valid and pipeline.generation == before["generation"]
        kill(before["pid"])
        wait_for(lambda: worker(drv, 0, "reference")["pid"] == spare["pid"], PATIENCE,
                 "the spare's process to serve worker 0")
        assert not pipeline.valid
        with pytest.raises(PipelineInvalidatedError) as info:
            pipeline.dispatch(data)
        assert "Fix:" in str(info.value) and "Compile the program again" in str(info.value)
        assert info.value.details["generation"] == before["generation"]
        fresh = drv.compile(PROGRAM, backend="reference")
        after = worker(drv, 0, "reference")
        assert fresh.valid and fresh.generation == before["generation"] + 1
        assert after["pid"] == spare["pid"]
        data = inputs(201)
        assert_saxpy(fresh.dispatch(data), data)


def test_a_crashing_request_is_retried_on_the_promoted_spare(tmp_path) -> None:
    marker = tmp_path / "crashed-once"
    with driver(standby=1) as drv:
        dispatch_exact(drv, 300, "faults")
        (spare,) = spare_ready(drv, "faults")
        before = serving_idle(drv, "faults")
        # exits unless the marker exists (creating it): the retry, on the spare, succeeds
        dispatch_exact(drv, 301, "faults", label=f"fault:crash_once:{marker}", retries=1)
        assert marker.exists()
        after = worker(drv, 0, "faults")
        assert after["pid"] == spare["pid"]
        assert after["generation"] == before["generation"] + 1
        assert pool_status(drv, "faults")["restarts"] == 1


def test_fault_exit_with_one_retry_dies_on_the_serving_worker_then_on_the_spare() -> None:
    with driver(standby=1, restart={"max_restarts": 5}) as drv:
        dispatch_exact(drv, 310, "faults")
        (spare,) = spare_ready(drv, "faults")
        before = serving_idle(drv, "faults")
        with pytest.raises(WorkerCrashedError) as info:
            dispatch_exact(drv, 311, "faults", label="fault:exit", retries=1)
        text = str(info.value)
        assert "poison" in text and "exited with status 17" in text
        assert f"(pid {spare['pid']})" in text  # the retry ran on the promoted spare
        status = pool_status(drv, "faults")
        assert status["restarts"] == 2 and status["state"] == "running"
        assert worker(drv, 0, "faults")["generation"] == before["generation"] + 2
        dispatch_exact(drv, 312, "faults")


def test_two_serving_workers_killed_one_after_another_each_get_a_spare() -> None:
    with driver(workers=2, standby=1, restart={"max_restarts": 5}) as drv:
        pending = [drv.dispatch_async(PROGRAM, inputs(400 + i), backend="reference")
                   for i in range(4)]
        for i, future in enumerate(pending):
            assert_saxpy(future.result(timeout=20), inputs(400 + i))
        for round_, index in enumerate((0, 1), start=1):
            (spare,) = spare_ready(drv, "reference")
            before = serving_idle(drv, "reference", index)
            other = serving_idle(drv, "reference", 1 - index)
            kill(before["pid"])
            futures = [drv.dispatch_async(PROGRAM, inputs(410 + 10 * round_ + i),
                                          backend="reference") for i in range(6)]
            for i, future in enumerate(futures):
                assert_saxpy(future.result(timeout=20), inputs(410 + 10 * round_ + i))
            # (the other worker may have served all six before the pool saw the death)
            after = Workers(drv, "reference").wait_replaced(before)
            assert after["pid"] == spare["pid"]
            assert after["generation"] == before["generation"] + 1
            untouched = worker(drv, 1 - index, "reference")
            assert (untouched["pid"], untouched["generation"]) == (other["pid"],
                                                                    other["generation"])
        spare_ready(drv, "reference")
        # (the dispatches raced the deaths: see the next test for what that does to counts)


def test_serving_worker_and_spare_dying_together_leave_a_working_pool() -> None:
    """Both processes of a pool die at once (a device reset, the OOM killer, a signal to
    the group) and the pool's I/O thread sees both exits in one poll. It reports the
    serving slot's exit first: the rules promote the spare's process (still believed
    alive), then it reports the spare's exit under the spare slot, which the rules have
    already moved on (a new generation, spawning) and so ignore; carrying out the Promote
    then finds no process in the spare slot (KeyError, logged). The ADOPT to the dead
    process fails, worker 0 is stopped, and waits in "killing" for an exit that can never
    be reported (the shell has no process for slot 0): callers wait until their deadline
    (forever without one), and close() waits out its timeout.

    The test makes the one poll certain: both processes die, and their pidfds show it,
    between two polls of the I/O thread (``Pool.after_poll``)."""
    with driver(standby=1) as drv:
        dispatch_exact(drv, 500, "reference")
        (spare,) = spare_ready(drv, "reference")
        before = serving_idle(drv, "reference")
        pool = drv.pools.existing("reference")

        def kill_both() -> None:
            for pid in (before["pid"], spare["pid"]):
                kill(pid)
                wait_for(lambda pid=pid: exit_shown(pool, pid), PATIENCE, f"the pidfd of {pid}")

        with between_polls(pool, lambda events: True, kill_both):
            pass
        dispatch_exact(drv, 501, "reference", timeout=PATIENCE)  # (hung forever, without)
        spare_ready(drv, "reference")
        assert serving_idle(drv, "reference")["pid"] not in (before["pid"], spare["pid"])


def test_a_death_first_seen_as_an_unreachable_send_still_counts() -> None:
    """A worker's death can show first as its connection gone: a request sent to it in
    that window fails at once (EHOSTUNREACH), the rules stop the worker as planned (as for
    a transport that dropped a message, Defect 4), and its exit, seen next, is then not
    counted toward the restart intensity, though nobody planned it. The same happens
    without standby; dispatching right after a SIGKILL hit it in about 4 runs of 10.

    The test makes the order certain: the worker dies, and its pidfd shows it, after the
    poll that wakes the I/O thread for the request and before the thread handles it
    (``Pool.after_poll``), so the request is sent before the exit is read."""
    with driver(standby=1, restart={"max_restarts": 5}) as drv:
        dispatch_exact(drv, 550, "reference")
        spare_ready(drv, "reference")
        before = serving_idle(drv, "reference")
        pool = drv.pools.existing("reference")

        def kill_it() -> None:
            kill(before["pid"])
            wait_for(lambda: exit_shown(pool, before["pid"]), PATIENCE,
                     "the worker's pidfd to show its exit")

        data = inputs(551)
        with between_polls(pool, lambda events: pool._wake_fd in events and pool._inbox,
                           kill_it):
            pending = drv.dispatch_async(PROGRAM, data, backend="reference")
        assert_saxpy(pending.result(timeout=PATIENCE), data)
        status = pool_status(drv, "reference")
        assert status["workers"][0]["generation"] == before["generation"] + 1
        assert status["restarts"] == 1, (
            f"one SIGKILL, {status['restarts']} deaths counted toward the restart intensity")


# -- frozen spares, close -----------------------------------------------------------------------


def test_a_frozen_spare_is_replaced_without_disturbing_the_serving_worker() -> None:
    with driver(standby=1, timeouts={"heartbeat_interval": 0.1, "heartbeat": 2.0}) as drv:
        dispatch_exact(drv, 600, "reference")
        (spare,) = spare_ready(drv, "reference")
        serving = serving_idle(drv, "reference")
        frozen = psutil.Process(spare["pid"])
        os.kill(spare["pid"], signal.SIGSTOP)
        wait_for(lambda: frozen.status() == psutil.STATUS_STOPPED, PATIENCE,
                 "the spare to stop")
        seed = 601
        deadline = time.monotonic() + PATIENCE
        while worker(drv, 1, "reference")["pid"] == spare["pid"]:  # serving meanwhile
            assert time.monotonic() < deadline, "the frozen spare was never replaced"
            dispatch_exact(drv, seed, "reference")
            seed += 1
        wait_for(lambda: dead(spare["pid"]), PATIENCE, "the frozen spare to be killed")
        (fresh,) = spare_ready(drv, "reference")
        assert fresh["pid"] != spare["pid"] and fresh["generation"] == spare["generation"] + 1
        now = worker(drv, 0, "reference")
        assert (now["pid"], now["generation"]) == (serving["pid"], serving["generation"])
        status = pool_status(drv, "reference")
        assert status["restarts"] == 1 and [w["restarts"] for w in status["workers"]] == [0, 1]
        dispatch_exact(drv, seed, "reference")


def test_close_leaves_no_process() -> None:
    # (none, unless another test's driver runs)
    others = {p.pid for p in worker_processes() + fork_servers()}
    drv = driver(workers=2, standby=2)
    try:
        dispatch_exact(drv, 700, "reference")
        dispatch_exact(drv, 701, "faults")
        pids = set()
        for backend in ("reference", "faults"):
            spare_ready(drv, backend, count=2)
            pids |= {w["pid"] for w in pool_status(drv, backend)["workers"]}
        assert len(pids) == 8 and None not in pids
        assert pids <= {p.pid for p in worker_processes()}
    finally:
        drv.close()
    assert not [pid for pid in pids if psutil.pid_exists(pid)]
    assert [p for p in worker_processes() + fork_servers() if p.pid not in others] == []


# -- for the record: how long a death costs ------------------------------------------------------


def test_recovery_time_with_and_without_standby(capsys) -> None:
    """The time from SIGKILL of the only serving worker to the next dispatch's answer,
    with a ready spare and without (printed, not asserted: the machine may be busy)."""
    rounds = 3
    times: dict[int, list[float]] = {}
    for standby in (0, 1):
        with driver(standby=standby, restart={"max_restarts": rounds + 1, "window": 60.0}) as drv:
            dispatch_exact(drv, 800, "reference")
            for round_ in range(rounds):
                if standby:
                    spare_ready(drv, "reference")
                before = serving_idle(drv, "reference")
                stays_true(lambda: True, 0.05)  # (let the previous round's work settle)
                start = time.monotonic()
                kill(before["pid"])
                dispatch_exact(drv, 801 + round_, "reference")
                times.setdefault(standby, []).append(time.monotonic() - start)
    with capsys.disabled():
        print(f"\nrecovery after SIGKILL of the serving worker (reference, median of {rounds}):"
              f" standby=1 {1000 * statistics.median(times[1]):.0f} ms, standby=0 "
              f"{1000 * statistics.median(times[0]):.0f} ms "
              f"(all: {[round(1000 * t) for t in times[1]]} vs "
              f"{[round(1000 * t) for t in times[0]]})")
