"""``vyre status``: what running drivers publish (``supervisor/published.py``) and the
command that reads it, spares included. The pure half runs in the fast tier; the rest
runs a real driver with a hot spare and the command as a user runs it."""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from waiting import wait_for

from vyre_core import ir
from vyre_core.cli import output
from vyre_core.cli import status as status_command
from vyre_core.driver import Driver
from vyre_core.supervisor import published, rundir

TIMEOUT = 60


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(rundir.ENV, str(tmp_path))
    return rundir.base_dir()


@pytest.mark.fast
def test_a_live_drivers_snapshots_are_found_and_a_dead_ones_are_not(base: Path) -> None:
    mine = rundir.RunDir()
    published.publish(mine.path / f"p0{published.SUFFIX}", {"backend": "reference", "x": 1})
    (mine.path / f"p1{published.SUFFIX}").write_text("{not json")  # being written: skipped
    (mine.path / f"p2{published.SUFFIX}.new").write_text("{}")
    dead = base / "999999999-abc-0000"  # a pid that does not run
    dead.mkdir(mode=0o700)
    published.publish(dead / f"p0{published.SUFFIX}", {"backend": "reference"})
    found = published.running_drivers(base)
    assert found == [{"pid": os.getpid(), "run_dir": str(mine.path),
                      "pools": {"reference": {"backend": "reference", "x": 1}}}]
    assert oct((mine.path / f"p0{published.SUFFIX}").stat().st_mode & 0o777) == "0o600"
    mine.remove()
    assert published.running_drivers(base) == []


@pytest.mark.fast
def test_rows_show_spares_and_failures_and_print_what_another_process_wrote_as_it_is() -> None:
    pools = {"[bold]evil": {"state": "failed", "failure": "it [red]broke[/]", "workers": [
        {"index": 0, "pid": 11, "generation": 3, "state": "idle", "served": 5, "restarts": 2,
         "in_flight": 0, "spare": False},
        {"index": 1, "pid": 12, "generation": 1, "state": "spare", "served": 0,
         "restarts": 0, "in_flight": 0, "spare": True, "device": 2}]}}
    rows = status_command.rows(pools)
    assert rows == [
        ["[bold]evil", "0", "-", "11", "3", "idle", "5", "2", "0"],
        ["[bold]evil", "1", "2", "12", "1", "spare", "0", "0", "0"],
        ["[bold]evil", "-", "-", "-", "-", "pool failed: it [red]broke[/]", "", "", ""]]
    with output.console.capture() as printed:  # (two columns: no wrapping at 80)
        output.print_table(["backend", "state"], [[rows[2][0], rows[2][5]]])
    assert "[bold]evil" in printed.get() and "it [red]broke[/]" in printed.get()


@pytest.mark.fast
def test_a_failed_pool_shows_the_end_of_what_its_last_worker_wrote(
        base: Path, capsys: pytest.CaptureFixture) -> None:
    mine = rundir.RunDir()
    trace = "\n".join(f"line {i}" for i in range(30)) + "\nImportError: no [cuda] here"
    published.publish(mine.path / f"p0{published.SUFFIX}", {
        "backend": "gpu", "state": "failed", "failure": "its workers cannot start",
        "failure_output": trace, "workers": [], "published": time.time()})
    published.publish(mine.path / f"p1{published.SUFFIX}", {
        "backend": "reference", "state": "running", "failure_output": None, "workers": [],
        "published": time.time()})
    try:
        assert status_command.run(argparse.Namespace(json=False)) == 0
    finally:
        mine.remove()
    out = capsys.readouterr().out
    assert "pool 'gpu' failed; its last worker's output, its last 12 lines:" in out
    assert "ImportError: no [cuda] here" in out and "line 19" in out
    assert "line 18\n" not in out and "'reference' failed" not in out


def one_store() -> ir.Program:
    k = ir.Kernel(workgroup=(1,))
    out = k.output("out", ir.u32, 1)
    out[0] = 7
    return k.build()


def vyre_status(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vyre_core.cli", "status", *args],
                          capture_output=True, text=True, timeout=TIMEOUT, env=os.environ)


@pytest.mark.processes
@pytest.mark.timeout(120)
def test_status_shows_a_running_drivers_workers_and_its_ready_spare(base: Path) -> None:
    with Driver(standby=1) as drv:
        assert drv.dispatch(one_store(), [], backend="reference")[0].tolist() == [7]

        def pool() -> dict:
            drivers = published.running_drivers(base)
            return drivers[0]["pools"].get("reference", {}) if drivers else {}

        def settled() -> bool:
            # a snapshot taken while the dispatch ran stays up to a second: wait for one
            # taken after it, showing the spare ready and worker 0 back to idle
            now = pool()
            return now.get("standby") == 1 and any(
                w["index"] == 0 and w["state"] == "idle" for w in now.get("workers", []))

        wait_for(settled, TIMEOUT, "the idle worker and its spare to be published")
        out = vyre_status("--json")
        assert out.returncode == 0, out.stderr
        (driver,) = json.loads(out.stdout)["drivers"]
        assert driver["pid"] == os.getpid()
        workers = driver["pools"]["reference"]["workers"]
        assert [(w["index"], w["state"], w["spare"]) for w in workers] == [
            (0, "idle", False), (1, "spare", True)]
        live = {w["pid"] for w in drv.status()["pools"]["reference"]["workers"]}
        assert {w["pid"] for w in workers} == live
        table = vyre_status()
        assert table.returncode == 0 and "spare" in table.stdout, table.stdout
        assert f"driver pid {os.getpid()}" in table.stdout
    out = vyre_status()
    assert out.returncode == 0 and "no running vyre driver" in out.stdout, out.stdout


@pytest.mark.processes
@pytest.mark.timeout(120)
def test_a_snapshot_that_cannot_be_written_is_logged_once_and_the_pool_serves_on(
        base: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="vyre.supervisor")
    with Driver() as drv:
        blocker = drv.pools.rundir.path / f"p0{published.SUFFIX}.new"
        blocker.mkdir()  # where the snapshot is written aside: a directory now
        for _ in range(3):
            assert drv.dispatch(one_store(), [], backend="reference")[0].tolist() == [7]
        wait_for(lambda: any("cannot publish" in r.getMessage() for r in caplog.records),
                 TIMEOUT, "the failure to be logged")
        deadline = time.monotonic() + 2.5 * published.EVERY
        while time.monotonic() < deadline:  # more failed rounds: still one warning
            assert drv.dispatch(one_store(), [], backend="reference")[0].tolist() == [7]
        assert sum("cannot publish" in r.getMessage() for r in caplog.records) == 1
        blocker.rmdir()
        wait_for(lambda: published.running_drivers(base)[0]["pools"], TIMEOUT,
                 "the snapshot once it can be written")
