"""A benchmark run killed while its local Ray cluster runs (SIGKILL: a test's subprocess
timeout, say) leaves none of Ray's daemons and none of their files behind: a watchdog
kills them once the run has ended. Before it, they ran on for good, reparented to init,
and the suite's check for surviving children could not see them (they are no one's)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from vyre_core.testing import PATIENCE, wait_for

pytest.importorskip("ray")
pytestmark = pytest.mark.processes

FOLDER = re.compile(r"/[^=\s]*vyre-rb-[^/\s]+")  # (bench_ray's temporary folder)
RUN = """
from vyre_benchmarks import bench_ray
bench_ray.local_cluster(1, 1)
print("up", flush=True)
import time
time.sleep(600)
"""


@pytest.mark.timeout(300)
def test_a_killed_benchmark_run_leaves_no_ray_daemon_or_file():
    run = subprocess.Popen([sys.executable, "-c", RUN], stdout=subprocess.PIPE, text=True)
    try:
        assert run.stdout.readline().strip() == "up"  # (the cluster started: minutes, loaded)
        daemons = psutil.Process(run.pid).children(recursive=True)
        folders = {Path(found[0]) for d in daemons if not _is_watchdog(d)
                   for part in _cmdline(d) if (found := FOLDER.search(part))}
        assert folders, daemons  # (the daemons of the cluster, in its folder)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
        run.stdout.close()
    wait_for(lambda: not any(d.is_running() and d.status() != psutil.STATUS_ZOMBIE
                             for d in daemons), PATIENCE, "Ray's daemons to be gone")
    wait_for(lambda: not any(folder.exists() for folder in folders), PATIENCE,
             "the cluster's folder to be removed")


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def _is_watchdog(process: psutil.Process) -> bool:
    return any("pidfd_open" in part for part in _cmdline(process))
