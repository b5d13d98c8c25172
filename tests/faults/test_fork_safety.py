"""A Driver inherited through fork (``os.fork``, a multiprocessing "fork" pool) works in
the child: the child starts worker pools of its own, gets exact outputs, and takes its
workers along when it ends, while the parent's driver keeps its own workers, sockets and
run directory untouched."""

from __future__ import annotations

import json
import multiprocessing
import os
import select
import signal
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import psutil
import pytest

import vyre_core

from .support import PROGRAM, driver, expected, inputs, worker

CHILD_LIMIT = 60.0  # a hang in the child is the defect: waited for, bounded

# The driver a multiprocessing "fork" pool's workers inherit (as a module global would be).
_INHERITED: vyre_core.Driver | None = None


def _worker_pids(drv: vyre_core.Driver, backend: str) -> list[list[float]]:
    """[pid, create_time] of each live worker of ``backend``: a pid alone may be reused."""
    found = []
    for w in drv.status()["pools"][backend]["workers"]:
        if w["pid"]:
            found.append([w["pid"], psutil.Process(w["pid"]).create_time()])
    return found


def _still_running(pid: int, created: float) -> bool:
    try:
        proc = psutil.Process(pid)
        return proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(pids: list[list[float]], within: float = 10.0) -> list[int]:
    """Those of ``pids`` still running after ``within`` seconds (polled)."""
    deadline = time.monotonic() + within
    while True:
        alive = [pid for pid, created in pids if _still_running(int(pid), created)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.02)


def _kill_leftovers(pids: list[list[float]]) -> None:
    for pid, created in pids:
        if _still_running(int(pid), created):
            os.kill(int(pid), signal.SIGKILL)


def _run_dirs(root: Path, pid: int) -> list[Path]:
    return sorted((root / f"vyre-{os.getuid()}").glob(f"{pid}-*"))


# -- os.fork ----------------------------------------------------------------------------------

def _in_forked_child(drv: vyre_core.Driver, write_fd: int) -> None:
    """The child's side: dispatch with the inherited driver, close it, report as JSON."""
    report: dict[str, Any] = {}
    try:
        data = inputs(11)
        out = drv.dispatch(PROGRAM, data, backend="faults")
        report["exact"] = out[0].tobytes() == expected(data)
        report["pids"] = _worker_pids(drv, "faults")
        report["rundir"] = str(drv.pools.rundir.path)
        more = [inputs(20 + i) for i in range(4)]
        report["exact_again"] = all(drv.dispatch(PROGRAM, d, backend="faults")[0].tobytes()
                                    == expected(d) for d in more)
        drv.close()
        report["rundir_removed"] = not Path(report["rundir"]).exists()
    except BaseException:
        report["error"] = traceback.format_exc()
    os.write(write_fd, json.dumps(report).encode())


def _fork_and_report(drv: vyre_core.Driver) -> tuple[int, dict[str, Any]]:
    """Fork; the child runs ``_in_forked_child`` and always leaves with os._exit. Returns the
    child's exit status and its report; the wait for it is bounded (the child is killed
    past CHILD_LIMIT, which fails the test)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.close(read_fd)
            _in_forked_child(drv, write_fd)
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    pidfd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([pidfd], [], [], CHILD_LIMIT)
        if not ready:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        text = b""
        while chunk := os.read(read_fd, 65536):
            text += chunk
    finally:
        os.close(pidfd)
        os.close(read_fd)
    assert ready, f"the forked child hung for {CHILD_LIMIT} s using the inherited Driver"
    return os.waitstatus_to_exitcode(status), json.loads(text or b"{}")


@pytest.mark.timeout(120)
def test_forked_child_uses_the_inherited_driver_with_pools_of_its_own(
        tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("VYRE_RUNTIME_DIR", str(tmp_path))
    child_pids: list[list[float]] = []
    with driver() as drv:
        data = inputs(1)
        assert drv.dispatch(PROGRAM, data, backend="faults")[0].tobytes() == expected(data)
        before = worker(drv)
        parent_pids = _worker_pids(drv, "faults")
        (parent_dir,) = _run_dirs(tmp_path, os.getpid())
        try:
            code, report = _fork_and_report(drv)
            child_pids = report.get("pids", [])
            assert "error" not in report, report["error"]
            assert code == 0, report
            assert report["exact"] is True and report["exact_again"] is True, report
            # the child's workers were its own, and are gone with it
            assert child_pids and not {p for p, _ in child_pids} & {p for p, _ in parent_pids}
            assert not _wait_gone(child_pids), f"the forked child's workers outlived it: {report}"
            # the child's run directory was its own, and removed by its close()
            assert report["rundir"] != str(parent_dir)
            assert report["rundir_removed"] is True
        finally:
            _kill_leftovers(child_pids)

        # the parent's driver is untouched: same worker, same run directory, exact outputs
        assert parent_dir.is_dir() and list(parent_dir.glob("*.sock"))
        for seed in (2, 3, 4):
            data = inputs(seed)
            assert drv.dispatch(PROGRAM, data, backend="faults")[0].tobytes() == expected(data)
        after = worker(drv)
        assert (after["pid"], after["generation"]) == (before["pid"], before["generation"])
        assert after["restarts"] == 0
        assert _worker_pids(drv, "faults") == parent_pids
    assert not parent_dir.exists()


# -- multiprocessing "fork" pool -----------------------------------------------------------

def _dispatch_in_pool_worker(seed: int) -> tuple[int, bytes, list[list[float]]]:
    """Runs in a multiprocessing worker: dispatch with the inherited global driver."""
    assert _INHERITED is not None
    out = _INHERITED.dispatch(PROGRAM, inputs(seed), backend="faults")
    return os.getpid(), out[0].tobytes(), _worker_pids(_INHERITED, "faults")


@pytest.mark.timeout(120)
def test_multiprocessing_fork_pool_uses_the_inherited_global_driver(
        tmp_path, monkeypatch) -> None:
    global _INHERITED
    monkeypatch.setenv("VYRE_RUNTIME_DIR", str(tmp_path))
    seeds = list(range(100, 108))
    child_pids: list[list[float]] = []
    results: list[tuple[int, bytes, list[list[float]]]] = []
    with driver() as drv:
        data = inputs(1)
        assert drv.dispatch(PROGRAM, data, backend="faults")[0].tobytes() == expected(data)
        before = worker(drv)
        parent_pids = _worker_pids(drv, "faults")
        (parent_dir,) = _run_dirs(tmp_path, os.getpid())
        _INHERITED = drv
        pool = multiprocessing.get_context("fork").Pool(2)
        try:
            results = pool.map_async(_dispatch_in_pool_worker, seeds, chunksize=1).get(
                timeout=CHILD_LIMIT)
            pool.close()
            joiner = threading.Thread(target=pool.join, daemon=True)
            joiner.start()
            joiner.join(CHILD_LIMIT)
            assert not joiner.is_alive(), "the multiprocessing pool's workers did not exit"
        except multiprocessing.TimeoutError:
            pytest.fail(f"the pool's children hung for {CHILD_LIMIT} s using the inherited "
                        "Driver")
        finally:
            _INHERITED = None
            pool.terminate()
            for _, _, pids in results:
                child_pids += pids
            _kill_leftovers(child_pids)

        assert len(results) == len(seeds)
        for seed, (_, outputs, _) in zip(seeds, results, strict=True):
            assert outputs == expected(inputs(seed)), f"seed {seed}"
        children = {pid for pid, _, _ in results}
        assert os.getpid() not in children
        # each pool child ran its own workers: none of the parent's, all gone with it
        assert child_pids
        assert not {p for p, _ in child_pids} & {p for p, _ in parent_pids}
        assert not _wait_gone(child_pids), "a pool child's vyre workers outlived it"
        # the children's run directories were removed when they exited
        for pid in children:
            assert _run_dirs(tmp_path, pid) == []

        # the parent's driver still works, on the same worker and run directory
        assert parent_dir.is_dir()
        for seed in (2, 3):
            data = inputs(seed)
            assert drv.dispatch(PROGRAM, data, backend="faults")[0].tobytes() == expected(data)
        after = worker(drv)
        assert (after["pid"], after["generation"]) == (before["pid"], before["generation"])
        assert _worker_pids(drv, "faults") == parent_pids
