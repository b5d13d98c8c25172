"""A chatty worker costs the parent a bounded tail of its output, never a log that grows:
nothing is written to disk, ``status`` keeps the tails of the last three generations
(64 KiB each at most), and a crash error carries the last 4 KiB of what the worker wrote."""

from __future__ import annotations

import stat

import psutil
import pytest

from vyre_core import DispatchConfig
from vyre_core.errors import WorkerCrashedError

from .support import PROGRAM, assert_saxpy, driver, inputs, wait_for, worker

OUTPUT_TAIL_BYTES = 64 * 1024
ERROR_TAIL_BYTES = 4096
CHATTER = "vyre_faults: chatter "
CRASH_EXIT = "exited with status 17"  # fault:exit


def chatter(mib: float) -> DispatchConfig:
    return DispatchConfig(label=f"fault:chatter:{mib:g}")


CRASH = DispatchConfig(label="fault:exit", retries=0)


@pytest.mark.timeout(120)
def test_chatty_dispatches_cost_no_memory_and_no_disk() -> None:
    with driver() as drv:
        data = inputs(1)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults", config=chatter(1)), data)
        rss_before = psutil.Process().memory_info().rss
        for seed in range(2, 22):  # 20 MiB of output in all
            data = inputs(seed)
            assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults", config=chatter(1)), data)
        growth = psutil.Process().memory_info().rss - rss_before
        assert growth < 15 * 2**20, f"the parent grew by {growth / 2**20:.1f} MiB"

        sockets = [p for p in drv.pools.rundir.path.iterdir() if stat.S_ISSOCK(p.lstat().st_mode)]
        assert [p.name for p in sockets] == ["p0.sock"]  # the pool's only (lanes: no name)
        assert sorted(p.name for p in drv.pools.rundir.path.iterdir() if p.suffix != ".new") == [
            "p0.sock", "p0.status.json"]  # and no output on disk (.new: a snapshot written)
        assert worker(drv)["history"] == []  # no generation has ended yet


@pytest.mark.timeout(120)
def test_history_keeps_three_bounded_generations() -> None:
    crashes = 4
    with driver(restart={"max_restarts": 10}) as drv:
        for seed in range(crashes):
            data = inputs(seed)  # served by the replacement of the worker crashed last
            assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults", config=chatter(0.25)),
                         data)
            generation = worker(drv)["generation"]
            with pytest.raises(WorkerCrashedError):
                drv.dispatch(PROGRAM, data, backend="faults", config=CRASH)
            wait_for(lambda g=generation: (h := worker(drv)["history"])
                     and h[-1]["generation"] == g, 10.0, f"generation {generation} to end")

        history = worker(drv)["history"]
        assert len(history) == 3, [h["generation"] for h in history]
        assert [h["generation"] for h in history] == [crashes - 2, crashes - 1, crashes]
        for entry in history:
            assert len(entry["output"].encode()) <= OUTPUT_TAIL_BYTES
            assert CHATTER in entry["output"]
            assert entry["exit"] == CRASH_EXIT
        assert worker(drv)["generation"] == crashes + 1


@pytest.mark.timeout(60)
def test_crash_error_carries_the_last_output() -> None:
    with driver() as drv:
        data = inputs(9)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults", config=chatter(0.5)), data)
        with pytest.raises(WorkerCrashedError) as info:
            drv.dispatch(PROGRAM, data, backend="faults", config=CRASH)
        error = info.value
        assert CRASH_EXIT in error.cause
        stderr = error.details["stderr"]
        assert CHATTER in stderr
        assert 0 < len(stderr.encode()) <= ERROR_TAIL_BYTES
        assert stderr.endswith("x" * 100)  # the very end of what it wrote
