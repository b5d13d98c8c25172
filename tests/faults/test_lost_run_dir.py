"""A run directory removed under a running driver (a temp cleaner, ``rm -rf``): the pool
makes it again and binds its socket anew, so a restarted worker can say hello, calls keep
succeeding and later pools of that driver start; when it cannot be made again, calls
fail with PoolFailedError and a Fix instead of timing out (issue 38 row 2).

Before: the ipc socket workers say hello through was gone with the directory, so after
any worker death no replacement could report in, every call timed out, the pool stayed
"running" with no PoolFailedError, and new pools failed with ENOENT."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from vyre_core.config import DispatchConfig
from vyre_core.errors import PoolFailedError

from .support import (
    PATIENCE,
    PROGRAM,
    assert_saxpy,
    driver,
    inputs,
    pool_status,
    wait_for,
    wait_idle,
)

BOUNDED = DispatchConfig(timeout=PATIENCE)


@pytest.fixture
def runtime(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("VYRE_RUNTIME_DIR", str(tmp_path))
    return tmp_path


def kill_and_wait_gone(drv, index: int = 0) -> None:
    victim = wait_idle(drv, index)
    os.kill(victim["pid"], signal.SIGKILL)
    wait_for(lambda: pool_status(drv)["workers"][index]["pid"] != victim["pid"], PATIENCE,
             "the death noticed")


@pytest.mark.timeout(120)
def test_a_restarted_worker_reports_in_after_the_run_directory_was_removed(runtime) -> None:
    """Fails on main before this commit: the call timed out."""
    with driver(workers=2) as drv:
        data = inputs(1)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        run_dir = drv.pools.rundir.path
        socket = next(run_dir.glob("*.sock"))
        shutil.rmtree(runtime)
        kill_and_wait_gone(drv, 0)
        for seed in range(2, 8):  # both workers serve: the restarted one and the live one
            data = inputs(seed)
            assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults", config=BOUNDED), data)
        wait_for(lambda: pool_status(drv)["workers"][0]["state"] == "idle", PATIENCE,
                 "the new worker 0 serving")
        assert socket.exists() and run_dir.is_dir()
        assert run_dir.stat().st_mode & 0o777 == 0o700
        wait_for(lambda: any(run_dir.glob("*.status.json")), PATIENCE,
                 "the status published again")
        data = inputs(9)  # a pool this driver had not started yet starts too
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="reference", config=BOUNDED), data)


@pytest.mark.timeout(120)
def test_a_run_directory_that_cannot_be_made_again_fails_calls_with_a_fix(runtime) -> None:
    """Fails on main before this commit: the call timed out (DispatchTimeoutError)."""
    with driver() as drv:
        data = inputs(11)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        base = drv.pools.rundir.path.parent
        shutil.rmtree(base)
        base.write_text("not a directory")  # nothing can be made under it
        kill_and_wait_gone(drv, 0)
        with pytest.raises(PoolFailedError) as info:
            drv.dispatch(PROGRAM, inputs(12), backend="faults", config=BOUNDED)
        assert "lost its run directory" in info.value.cause
        assert "VYRE_RUNTIME_DIR" in info.value.fix
        base.unlink()  # the cleaner's mess is gone: the next start succeeds
        data = inputs(13)
        assert_saxpy(wait_for(lambda: _served(drv, data), PATIENCE, "a start again"), data)


def _served(drv, data):
    try:
        return drv.dispatch(PROGRAM, data, backend="faults", config=BOUNDED)
    except PoolFailedError:
        return None
