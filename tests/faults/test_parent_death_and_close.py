"""Lifecycle faults: the driver's process dies (SIGKILL) or exits without close(), or
close() runs with work in flight. No worker may outlive its driver, even one stuck in
native code; the next driver removes run directories left behind; close() never hangs
and leaves neither processes nor socket files; nothing goes through shared memory."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest
from child_process import fork_servers, started_by, worker_processes
from waiting import wait_running

import vyre_core
from vyre_core import DispatchConfig, Timeouts
from vyre_core.errors import PoolFailedError, VyreError

from .child_script import PRELUDE
from .support import saxpy

pytestmark = pytest.mark.timeout(120)

CHILD_TIMEOUT = 60.0
KILL_GRACE = 0.5

# The child builds the same saxpy program as the tests below.


PROGRAM = saxpy(16, workgroup=16)
INPUTS = [np.arange(16, dtype=np.float32), np.ones(16, dtype=np.float32),
          np.array([2.0], dtype=np.float32)]
EXPECTED = (np.float32(2.0) * INPUTS[0] + INPUTS[1]).tobytes()


# -- helpers --------------------------------------------------------------------------------

def start_child(tmp_path: Path, body: str, env: dict[str, str] | None = None
                ) -> subprocess.Popen:
    script = tmp_path / "child.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    with open(tmp_path / "child.err", "wb") as err:
        return subprocess.Popen([sys.executable, str(script)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=err,
                                env=dict(os.environ, **(env or {})), text=True)


def read_report(proc: subprocess.Popen, tmp_path: Path,
                timeout: float = CHILD_TIMEOUT) -> dict[str, Any]:
    """The child's JSON report line, waiting at most ``timeout`` seconds."""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise AssertionError(f"no report from the child within {timeout} s; stderr:\n"
                                 f"{(tmp_path / 'child.err').read_text()[-3000:]}")
    line = proc.stdout.readline()
    assert line, f"child said nothing; stderr:\n{(tmp_path / 'child.err').read_text()[-3000:]}"
    return json.loads(line)


def processes(pids: list[int]) -> list[psutil.Process]:
    return [psutil.Process(pid) for pid in pids]


def running(proc: psutil.Process) -> bool:
    """Still alive: same process (not a reused pid) and not a zombie awaiting its reaper."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_all_gone(procs: list[psutil.Process], within: float) -> list[psutil.Process]:
    """Those of ``procs`` still running after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        alive = [p for p in procs if running(p)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def kill_all(procs: list[psutil.Process]) -> None:
    for p in procs:
        if running(p):
            p.kill()


def stop_child(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)
    proc.stdout.close()


def in_native_sleep(pid: int, within: float = 5.0) -> bool:
    """Whether the process's main thread is blocked in the kernel's nanosleep (where
    ``fault:hang_native`` puts it); True when the kernel does not say."""
    deadline = time.monotonic() + within
    while True:
        try:
            wchan = Path(f"/proc/{pid}/wchan").read_text().strip()
        except OSError:
            return True
        if wchan in ("", "0") or "nanosleep" in wchan:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def run_dirs(root: Path, pid: int) -> list[Path]:
    return sorted((root / f"vyre-{os.getuid()}").glob(f"{pid}-*"))


# -- the driver's process is killed ---------------------------------------------------------

SIGKILLED_CHILD = """
    drv = vyre_core.Driver(workers=2, timeouts=vyre_core.Timeouts(kill_grace=0.5, heartbeat=600))
    drv.dispatch(PROGRAM, INPUTS, backend="faults")
    pending = drv.dispatch_async(PROGRAM, INPUTS, backend="faults",
                                 config=DispatchConfig(label="fault:hang_native"))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        workers = drv.status()["pools"]["faults"]["workers"]
        states = sorted(w["state"] for w in workers)
        # "running": the busy worker's main thread has the request (its progress page)
        if states == ["busy", "idle"] and all(w["pid"] for w in workers) \
                and any(w["running"] for w in workers):
            break
        time.sleep(0.02)
    workers = drv.status()["pools"]["faults"]["workers"]
    report(pids=[w["pid"] for w in workers], states=[w["state"] for w in workers],
           busy=[w["pid"] for w in workers if w["state"] == "busy"],
           rundir=str(drv.pools.rundir.path))
    time.sleep(3600)
"""


def test_sigkilled_driver_takes_its_workers_along_and_next_driver_cleans_up(
        tmp_path, monkeypatch, vyre_stalls):
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    child = start_child(tmp_path, SIGKILLED_CHILD, {"VYRE_RUNTIME_DIR": str(runtime)})
    workers: list[psutil.Process] = []
    try:
        info = read_report(child, tmp_path)
        assert sorted(info["states"]) == ["busy", "idle"], info
        workers = processes(info["pids"])
        assert len(workers) == 2 and all(running(w) for w in workers)
        assert all(started_by(w, child.pid) for w in workers)
        servers = fork_servers(psutil.Process(child.pid))
        busy = psutil.Process(info["busy"][0])
        assert running(busy)
        assert in_native_sleep(busy.pid), "the busy worker is not blocked in native sleep()"

        stale = run_dirs(runtime, child.pid)
        assert [str(d) for d in stale] == [info["rundir"]]
        assert list(stale[0].glob("*.sock"))

        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL
        start = time.monotonic()
        alive = wait_all_gone(workers + servers, within=5.0)
        assert not alive, f"workers or fork servers outlived their SIGKILLed driver: {alive}"
        assert time.monotonic() - start < 5.0 + vyre_stalls.since(start), vyre_stalls

        # the dead driver's run directory and socket are still there ...
        assert stale[0].is_dir() and list(stale[0].glob("*.sock"))
        # ... until the next driver starts (same runtime root), which removes them
        monkeypatch.setenv("VYRE_RUNTIME_DIR", str(runtime))
        with vyre_core.Driver(timeouts=Timeouts(kill_grace=KILL_GRACE)) as drv:
            assert not stale[0].exists()
            assert run_dirs(runtime, child.pid) == []
            own = run_dirs(runtime, os.getpid())
            assert len(own) == 1
            out = drv.dispatch(PROGRAM, INPUTS, backend="faults")
            assert out[0].tobytes() == EXPECTED
            assert list(own[0].glob("*.sock"))
        assert not own[0].exists()
    finally:
        stop_child(child)
        kill_all(workers)


def test_stale_dir_of_a_live_driver_is_kept(tmp_path, monkeypatch):
    """Only dead drivers' directories are removed: a running driver's stays usable."""
    monkeypatch.setenv("VYRE_RUNTIME_DIR", str(tmp_path))
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=KILL_GRACE)) as first:
        first.dispatch(PROGRAM, INPUTS, backend="faults")
        mine = run_dirs(tmp_path, os.getpid())
        assert len(mine) == 1
        with vyre_core.Driver(timeouts=Timeouts(kill_grace=KILL_GRACE)) as second:
            assert mine[0].is_dir()
            assert len(run_dirs(tmp_path, os.getpid())) == 2
            assert second.dispatch(PROGRAM, INPUTS, backend="faults")[0].tobytes() == EXPECTED
        assert first.dispatch(PROGRAM, INPUTS, backend="faults")[0].tobytes() == EXPECTED
        assert mine[0].is_dir()
    assert run_dirs(tmp_path, os.getpid()) == []
    base = tmp_path / f"vyre-{os.getuid()}"
    assert base.stat().st_mode & 0o777 == 0o700


# -- close() with work in flight --------------------------------------------------------------

def test_close_with_work_in_flight(tmp_path, monkeypatch, vyre_stalls):
    monkeypatch.setenv("VYRE_RUNTIME_DIR", str(tmp_path))
    drv = vyre_core.Driver(timeouts=Timeouts(kill_grace=KILL_GRACE))
    try:
        assert drv.dispatch(PROGRAM, INPUTS, backend="faults")[0].tobytes() == EXPECTED
        worker = psutil.Process(drv.status()["pools"]["faults"]["workers"][0]["pid"])
        (rundir,) = run_dirs(tmp_path, os.getpid())
        assert list(rundir.glob("*.sock"))

        pending = drv.dispatch_async(PROGRAM, INPUTS, backend="faults",
                                     config=DispatchConfig(label="fault:sleep:3"))
        queued = drv.dispatch_async(PROGRAM, INPUTS, backend="faults")  # behind it
        deadline = time.monotonic() + 10
        while drv.status()["pools"]["faults"]["workers"][0]["state"] != "busy":
            assert time.monotonic() < deadline
            time.sleep(0.01)

        start = time.monotonic()
        drv.close()
        closing = time.monotonic() - start
        assert closing < KILL_GRACE + 2.0 + vyre_stalls.since(start), (closing, vyre_stalls)

        for handle in (pending, queued):
            assert handle.is_ready()
            with pytest.raises(PoolFailedError):
                handle.result(timeout=1)
        start = time.monotonic()
        drv.close()  # a second close is a no-op
        assert time.monotonic() - start < 0.1 + vyre_stalls.since(start), vyre_stalls
        assert drv.status()["closed"] is True

        assert not running(worker)
        assert worker_processes() == [] and fork_servers() == []
        assert not rundir.exists()
        assert not list(tmp_path.rglob("*.sock"))
        with pytest.raises(PoolFailedError):
            drv.dispatch(PROGRAM, INPUTS, backend="faults")
        with pytest.raises(PoolFailedError):
            drv.dispatch_async(PROGRAM, INPUTS, backend="faults").result(timeout=1)
    finally:
        drv.close()


def test_close_from_another_thread_wakes_a_blocked_caller(tmp_path, monkeypatch, vyre_stalls):
    monkeypatch.setenv("VYRE_RUNTIME_DIR", str(tmp_path))
    outcome: list[BaseException | None] = []
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=KILL_GRACE)) as drv:
        drv.dispatch(PROGRAM, INPUTS, backend="faults")

        def blocked() -> None:
            try:
                drv.dispatch(PROGRAM, INPUTS, backend="faults",
                             config=DispatchConfig(label="fault:hang_native"))
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=blocked, daemon=True)
        thread.start()
        wait_running(drv, "faults")  # the hang really runs in the worker
        assert not outcome
        start = time.monotonic()
        drv.close()
        thread.join(timeout=10)
        assert not thread.is_alive()
        assert time.monotonic() - start < KILL_GRACE + 3 + vyre_stalls.since(start), vyre_stalls
    assert len(outcome) == 1 and isinstance(outcome[0], VyreError), outcome
    assert worker_processes() == [] and fork_servers() == []


# -- exit without close(): atexit ----------------------------------------------------------

ATEXIT_CHILD = """
    drv = vyre_core.Driver(workers=2, timeouts=vyre_core.Timeouts(kill_grace=0.5))
    out = drv.dispatch(PROGRAM, INPUTS, backend="faults")
    in_flight = os.environ.get("IN_FLIGHT") == "1"
    if in_flight:
        pending = drv.dispatch_async(PROGRAM, INPUTS, backend="faults",
                                     config=DispatchConfig(label="fault:sleep:5"))
        deadline = time.monotonic() + 30
        while not any(w["running"] for w in drv.status()["pools"]["faults"]["workers"]):
            assert time.monotonic() < deadline, "the dispatch never reached its worker"
            time.sleep(0.01)
    workers = drv.status()["pools"]["faults"]["workers"]
    report(pids=[w["pid"] for w in workers if w["pid"]], rundir=str(drv.pools.rundir.path),
           ok=out[0].tobytes() == (2.0 * INPUTS[0] + INPUTS[1]).tobytes())
    deadline = time.monotonic() + 30
    while not os.path.exists(os.environ["GO_FILE"]) and time.monotonic() < deadline:
        time.sleep(0.01)  # until the test has looked at the workers
    sys.exit(0)  # no close(): the driver's atexit hook must clean up
"""


@pytest.mark.parametrize("in_flight", [False, True], ids=["idle", "in_flight"])
def test_exit_without_close_leaves_nothing_behind(tmp_path, in_flight, vyre_stalls):
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    go = tmp_path / "go"
    child = start_child(tmp_path, ATEXIT_CHILD, {"VYRE_RUNTIME_DIR": str(runtime),
                                                  "IN_FLIGHT": "1" if in_flight else "0",
                                                  "GO_FILE": str(go)})
    workers: list[psutil.Process] = []
    try:
        info = read_report(child, tmp_path)
        assert info["ok"] is True
        rundir = Path(info["rundir"])
        assert rundir.parent == runtime / f"vyre-{os.getuid()}"
        workers = [p for p in processes(info["pids"]) if running(p)]
        assert len(workers) == 2
        assert all(started_by(w, child.pid) for w in workers)
        servers = fork_servers(psutil.Process(child.pid))
        go.touch()
        start = time.monotonic()
        assert child.wait(timeout=30) == 0, (tmp_path / "child.err").read_text()
        assert time.monotonic() - start < KILL_GRACE + 5 + vyre_stalls.since(start)  # no hang
        assert not wait_all_gone(workers + servers, within=5.0)
        assert not rundir.exists(), list(rundir.iterdir())
        assert not list(runtime.rglob("*.sock"))
        assert "Traceback" not in (tmp_path / "child.err").read_text()
    finally:
        stop_child(child)
        kill_all(workers)


# -- no shared memory --------------------------------------------------------------------------

def _shm_maps(pid: int) -> list[str]:
    try:
        text = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return []
    return [line for line in text.splitlines() if "/dev/shm/" in line]


def _my_shm_files() -> set[str]:
    uid = os.getuid()
    names = set()
    for entry in os.scandir("/dev/shm"):
        try:
            if entry.stat(follow_symlinks=False).st_uid == uid:
                names.add(entry.name)
        except OSError:
            pass
    return names


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
def test_no_shared_memory_segments(tmp_path, monkeypatch):
    monkeypatch.setenv("VYRE_RUNTIME_DIR", str(tmp_path))
    before = _my_shm_files()
    # (what this process mapped before, e.g. a multiprocessing lock another test made)
    already = set(_shm_maps(os.getpid()))
    big = 1 << 20  # large frames take the zero-copy path
    program = saxpy(big, workgroup=256)
    rng = np.random.default_rng(0)
    data = [rng.random(big, dtype=np.float32), rng.random(big, dtype=np.float32),
            np.array([0.5], dtype=np.float32)]
    mapped: list[str] = []
    with vyre_core.Driver(workers=2, timeouts=Timeouts(kill_grace=KILL_GRACE)) as drv:
        for backend in ("reference", "faults"):
            for _ in range(3):
                out = drv.dispatch(program, data, backend=backend)
                assert out[0].tobytes() == (np.float32(0.5) * data[0] + data[1]).tobytes()
        drv.dispatch(PROGRAM, INPUTS, backend="faults",
                     config=DispatchConfig(label="fault:leak:8"))
        pools = drv.status()["pools"]
        pids = [w["pid"] for b in ("reference", "faults") for w in pools[b]["workers"]
                if w["pid"]]
        assert len(pids) == 4
        for pid in [os.getpid(), *pids]:
            mapped += [m for m in _shm_maps(pid) if m not in already]
        during = _my_shm_files()
    after = _my_shm_files()
    assert mapped == []
    assert during - before == set()
    assert after - before == set()


def test_close_while_the_pool_is_still_starting(tmp_path, monkeypatch, vyre_stalls):
    """close() right after the first request, before the worker has said hello."""
    monkeypatch.setenv("VYRE_RUNTIME_DIR", str(tmp_path))
    with vyre_core.Driver(timeouts=Timeouts(kill_grace=KILL_GRACE)) as drv:
        pending = drv.dispatch_async(PROGRAM, INPUTS, backend="faults")
        start = time.monotonic()
        drv.close()
        assert time.monotonic() - start < KILL_GRACE + 3 + vyre_stalls.since(start), vyre_stalls
        try:
            out = pending.result(timeout=1)
        except PoolFailedError:
            pass
        else:  # it may have been answered just before the close
            assert out[0].tobytes() == EXPECTED
    assert worker_processes() == [] and fork_servers() == []
    assert run_dirs(tmp_path, os.getpid()) == []


# -- bugs ----------------------------------------------------------------------------------

FORKING_CHILD = """
    drv = vyre_core.Driver(timeouts=vyre_core.Timeouts(kill_grace=0.5, startup=10))
    drv.dispatch(PROGRAM, INPUTS, backend="faults")
    rundir = drv.pools.rundir.path
    pid = os.fork()
    if pid == 0:
        sys.exit(0)  # an ordinary exit of a forked child runs the inherited atexit hooks
    os.waitpid(pid, 0)
    kept = rundir.is_dir()
    # the worker crashes (its request is not retried) and must be replaced
    try:
        drv.dispatch(PROGRAM, INPUTS, backend="faults",
                     config=DispatchConfig(label="fault:exit", retries=0))
    except vyre_core.errors.WorkerCrashedError:
        pass
    try:
        out = drv.dispatch(PROGRAM, INPUTS, backend="faults", config=DispatchConfig(timeout=20))
        after = "ok" if out[0].tobytes() == (2.0 * INPUTS[0] + INPUTS[1]).tobytes() else "wrong"
    except vyre_core.VyreError as exc:
        after = f"{type(exc).__name__}: {exc.cause}"
    report(kept=kept, after=after, failure=drv.status()["pools"]["faults"]["failure"])
    drv.close()
"""


def test_forked_child_exit_leaves_the_parents_driver_alone(tmp_path):
    """A forked child inherits the Driver object but not its workers: its exit (atexit
    close) must not remove the parent's run directory or stop its pools."""
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    child = start_child(tmp_path, FORKING_CHILD, {"VYRE_RUNTIME_DIR": str(runtime)})
    try:
        info = read_report(child, tmp_path)
        assert child.wait(timeout=30) == 0
    finally:
        stop_child(child)
    assert info["kept"], f"the forked child's exit removed the parent's run dir; then: {info}"
    assert info["after"] == "ok", info


def test_close_does_not_wait_out_the_grace_for_replies_nobody_reads(monkeypatch) -> None:
    """Found by a hostile pass: with large replies riding the lanes (shared memory off), a
    worker that got SIGTERM while computing went on to send its reply to a parent that no
    longer read it, and sat there until the SIGKILL: every close() took the whole kill
    grace. Once asked to stop, a worker waits little for room (0.25 s)."""
    monkeypatch.setenv("VYRE_SHARED_MEMORY", "0")
    n = 2_000_000
    program = saxpy(n, workgroup=256)
    rng = np.random.default_rng(4)
    inputs = [rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32),
              np.array([1.5], dtype=np.float32)]
    durations = []
    for _ in range(3):
        drv = vyre_core.Driver(workers=2, timeouts=Timeouts(kill_grace=5.0))
        drv.dispatch(program, inputs, backend="faults")
        stop = threading.Event()
        done = threading.Semaphore(0)  # released once per finished call

        def caller(drv=drv, stop=stop, done=done) -> None:
            while not stop.is_set():
                try:
                    drv.dispatch(program, inputs, backend="faults")
                    done.release()
                except PoolFailedError:
                    return  # closed under it

        callers = [threading.Thread(target=caller) for _ in range(4)]
        for t in callers:
            t.start()
        for _ in range(8):  # both workers busy computing and replying, over and over
            assert done.acquire(timeout=30), "the calls never got going"
        started = time.monotonic()
        drv.close()
        durations.append(time.monotonic() - started)
        stop.set()
        for t in callers:
            t.join(10)
    assert max(durations) < 2.5, durations  # (before: the 5 s grace, nearly every time)
