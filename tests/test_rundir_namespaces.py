"""A driver's run directory is live while that driver lives, seen from any PID namespace:
a driver in a container (``unshare -p``) looks dead by pid from the host, and its
directory must still never be cleaned away under it (issue 38, row 3)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from child_process import REPORT_LIMIT

import vyre_core
from vyre_core.supervisor import rundir

pytestmark = [
    pytest.mark.processes,
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                       reason="a new PID namespace needs root and util-linux's unshare"),
]

# Makes a run directory inside the namespace, says where, and lives until stdin closes.
INNER = """
import sys
from vyre_core.supervisor.rundir import RunDir
print(RunDir().path, flush=True)
sys.stdin.read()
"""


def test_a_driver_in_another_pid_namespace_keeps_its_run_dir(tmp_path: Path,
                                                             monkeypatch) -> None:
    monkeypatch.setenv(rundir.ENV, str(tmp_path))
    inner = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", INNER],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=dict(os.environ, **{rundir.ENV: str(tmp_path)}))
    try:
        line = _first_line(inner)
        live = Path(line)
        assert live.is_dir() and live.parent == rundir.base_dir()
        assert int(live.name.split("-")[0]) < 10  # (its pid as the new namespace numbers it)

        assert rundir.stale_dirs(live.parent) == []
        assert rundir.remove_stale(live.parent) == [] and live.is_dir()
        vyre_core.Driver().close()  # (every new driver cleans stale directories)
        assert live.is_dir()
        assert [path for path, _ in rundir.live_dirs(live.parent)] == [live]
    finally:
        inner.stdin.close()
        inner.wait(REPORT_LIMIT)
    # gone with its driver (which never removed it): now stale, cleaned
    assert rundir.remove_stale(live.parent) == [live] and not live.exists()


def _first_line(proc: subprocess.Popen) -> str:
    """The child's first stdout line, within REPORT_LIMIT seconds (the read happens on a
    thread so that a silent child fails the test instead of hanging it)."""
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        reading = pool.submit(proc.stdout.readline)
        try:
            line = reading.result(REPORT_LIMIT).decode().strip()
        except concurrent.futures.TimeoutError:
            proc.kill()
            raise
    assert line, proc.stderr.read().decode(errors="replace")
    return line
