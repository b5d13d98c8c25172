"""The fault-injection kit as its users meet it: the worked example of
docs/fault-injection.md run as written (a pytest of its own, with the fixtures pytest
loads from vyre and the vyre-faults distribution installed), and the kit's parts the
example does not reach."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from fresh_env import fresh_env

from vyre_core.config import DispatchConfig
from vyre_core.errors import InvalidConfigError
from vyre_core.testing import DiskUnavailable, SmallDisk, Workers, fault

from .support import PROGRAM, assert_saxpy, driver, inputs

DOC = Path(__file__).resolve().parents[2] / "docs" / "fault-injection.md"


@pytest.mark.timeout(180)
def test_the_worked_example_passes_as_written(tmp_path):
    example, = [b for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
                if "def double(" in b]
    (tmp_path / "test_resilience.py").write_text(example)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           "test_resilience.py"], cwd=tmp_path, env=fresh_env(),
                          capture_output=True, text=True, timeout=170)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    if can_mount():  # (the full-disk test mounts a tmpfs)
        assert "5 passed" in out, out
    else:
        assert "4 passed, 1 skipped" in out and "vyre_full_disk: " in out, out


def can_mount() -> bool:
    """Whether this process may mount a small tmpfs (root is not enough in a container
    without CAP_SYS_ADMIN)."""
    try:
        with SmallDisk():
            return True
    except DiskUnavailable:
        return False


@pytest.mark.timeout(90)
def test_a_misspelt_fault_is_refused_and_the_worker_serves_on():
    with driver() as drv:
        workers = Workers(drv)
        data = inputs(1)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        before = workers.wait_idle()
        with pytest.raises(InvalidConfigError, match="unknown dispatch fault 'exitt'"):
            drv.dispatch(PROGRAM, data, backend="faults",
                         config=DispatchConfig(label="fault:exitt"))
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        after = workers.wait_idle()
        assert (after["pid"], after["generation"]) == (before["pid"], before["generation"])


@pytest.mark.timeout(90)
def test_a_frozen_worker_resumed_in_time_serves_on():
    with driver(timeouts={"heartbeat": 20.0}) as drv:
        workers = Workers(drv)
        data = inputs(2)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        frozen = workers.freeze()
        assert psutil.Process(frozen["pid"]).status() == psutil.STATUS_STOPPED
        workers.resume(frozen)
        assert psutil.Process(frozen["pid"]).status() != psutil.STATUS_STOPPED
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults",
                                  config=fault("sleep", 0)), data)
        assert workers.row()["pid"] == frozen["pid"]


@pytest.mark.timeout(90)
def test_losing_a_device_of_a_backend_without_fault_labels_says_so():
    with driver() as drv, pytest.raises(AssertionError, match="does not obey fault labels"):
        Workers(drv, "reference").lose_device()


@pytest.mark.timeout(60)
def test_killing_twice_kills_two_generations():
    """Found in review: a second kill right after the first could find the first one's
    dead pid still reported and return at once, killing nothing."""
    with driver() as drv:
        workers = Workers(drv)
        data = inputs(3)
        assert_saxpy(drv.dispatch(PROGRAM, data, backend="faults"), data)
        first = workers.kill()
        second = workers.kill()
        assert second["pid"] != first["pid"]
        third = workers.wait_idle()
        assert third["generation"] == first["generation"] + 2
        assert workers.pool()["restarts"] == 2


@pytest.mark.timeout(60)
def test_a_wgpu_device_is_lost_through_the_kit():
    with driver() as drv:
        error = Workers(drv, "faults-wgpu").lose_device(kind="destroy_device")
        assert error.code == 1202 and "Fix:" in str(error)


@pytest.mark.timeout(90)
def test_a_pool_not_started_yet_is_named_with_what_to_do():
    with driver() as drv:
        with pytest.raises(AssertionError, match="pool 'faults' has no worker 0 \\(it is "
                                                 "not started\\): dispatch to it, or probe"):
            Workers(drv).kill()
        with pytest.raises(AssertionError, match="no backend 'fault' is registered"):
            Workers(drv, "fault").row()
