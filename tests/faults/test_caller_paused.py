"""The caller's own process stopped (Ctrl-Z, SIGSTOP, starved) is not its workers' fault:
after it resumes, workers are not judged silent for the time nobody could hear them, and
the requests they were running complete.

Before: after SIGCONT the supervisor judged silence by its own clock before the heartbeats
queued meanwhile were read: every running request failed with "sent no heartbeat", idle
workers were killed and counted, and enough of them failed the pool.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest
from waiting import PATIENCE, stays_true, wait_for

from .child_script import PRELUDE

CHILD = PRELUDE + textwrap.dedent("""
    drv = vyre_core.Driver(workers=3,
                           timeouts=vyre_core.Timeouts(heartbeat=3.0, heartbeat_interval=0.2))
    drv.dispatch(PROGRAM, INPUTS, backend="faults")
    wait_until(lambda: all(w["state"] == "idle" for w in workers(drv, "faults")), "idle")
    pending = [drv.dispatch_async(PROGRAM, INPUTS, backend="faults",
                                  config=DispatchConfig(label="fault:sleep:6"))
               for _ in range(2)]
    wait_until(lambda: sum(w["running"] for w in workers(drv, "faults")) == 2, "running")
    report(ready=True, pids=[w["pid"] for w in workers(drv, "faults")])
    sys.stdin.readline()  # the test stops this process, resumes it, then says go on
    results = []
    for p in pending:
        try:
            results.append(p.result(timeout=60)[0].tobytes() == EXPECTED)
        except vyre_core.VyreError as exc:
            results.append(f"{type(exc).__name__}: {exc.cause}")
    status = drv.status()["pools"]["faults"]
    report(results=results, restarts=status["restarts"], state=status["state"],
           pids=[w["pid"] for w in status["workers"]])
    drv.close()
""")


@pytest.mark.timeout(90)
def test_a_stopped_caller_resumes_with_its_workers_and_requests_intact(tmp_path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, VYRE_RUNTIME_DIR=str(tmp_path)))
    try:
        first = json.loads(proc.stdout.readline())
        assert first["ready"]
        child = psutil.Process(proc.pid)
        workers = [psutil.Process(pid) for pid in first["pids"]]
        os.kill(proc.pid, signal.SIGSTOP)
        wait_for(lambda: child.status() == psutil.STATUS_STOPPED, PATIENCE,
                 "the caller stopped")
        # longer than Timeouts.heartbeat (3 s): the workers beat on, nobody reads them
        stays_true(lambda: child.status() == psutil.STATUS_STOPPED
                   and all(w.is_running() for w in workers), 5.0,
                   "the caller stopped, its workers running")
        os.kill(proc.pid, signal.SIGCONT)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        last = json.loads(proc.stdout.readline())
        assert proc.wait(timeout=30) == 0, proc.stderr.read()[-2000:]
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait(timeout=10)
    assert last["results"] == [True, True], last
    assert last["restarts"] == 0 and last["state"] == "running"
    assert last["pids"] == first["pids"]  # nobody was replaced
