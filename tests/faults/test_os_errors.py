"""The supervisor never dies of the operating system (issue 11, defect 7): when the OS
refuses what a restart needs (here: file descriptors, EMFILE), the waiting call fails with
SystemResourceError and a Fix naming the resource, the pool keeps running, and once the
resource is back the restart is retried on its own (with back-off) and calls succeed.

Before: the OSError was raised inside the pool's I/O thread while it opened the restarted
worker's log; the pool was failed for good, even after the resource was freed.

The driver runs in a child process: lowering the file-descriptor limit of the pytest
process itself would disturb everything else it does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent('''
    import json, os, resource, signal, sys
    import numpy as np
    import vyre_core
    from vyre_core import DispatchConfig, ir

    k = ir.Kernel(workgroup=(64,))
    x, y = k.read("x", ir.f32), k.read("y", ir.f32)
    out = k.output("out", ir.f32, count=64)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = x[i] + y[i]
    prog = k.build()
    data = [np.arange(64, dtype=np.float32), np.ones(64, np.float32)]
    want = (data[0] + data[1]).tobytes()
    report = {}
    with vyre_core.Driver(kill_grace=0.5, max_restarts=5) as drv:
        report["before"] = drv.dispatch(prog, data, backend="faults")[0].tobytes() == want
        pid = drv.status()["pools"]["faults"]["workers"][0]["pid"]

        # Use up every file descriptor: fill the holes below the highest one, then set the
        # limit right there. Any new descriptor (memfd, pipe, pidfd) now fails with EMFILE.
        fillers = []
        highest = max(int(n) for n in os.listdir("/proc/self/fd"))
        while True:
            fd = os.open("/dev/null", os.O_RDONLY)
            fillers.append(fd)
            if fd > highest:
                break
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (fillers[-1], hard))
        os.kill(pid, signal.SIGKILL)  # its restart will be refused
        try:
            drv.dispatch(prog, data, backend="faults", config=DispatchConfig(timeout=20))
            report["during"] = "ok"
        except vyre_core.VyreError as exc:
            report["during"] = [type(exc).__name__, exc.cause, exc.fix]
        report["state_during"] = drv.status()["pools"]["faults"]["state"]

        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))  # the resource is back
        for fd in fillers:
            os.close(fd)
        out = drv.dispatch(prog, data, backend="faults", config=DispatchConfig(timeout=30))
        report["after"] = out[0].tobytes() == want
        worker = drv.status()["pools"]["faults"]["workers"][0]
        report["state_after"] = drv.status()["pools"]["faults"]["state"]
        report["new_pid"] = worker["pid"] not in (None, pid)
    print(json.dumps(report), flush=True)
''')


@pytest.mark.timeout(120)
def test_emfile_while_restarting_fails_the_call_clearly_and_the_pool_recovers(tmp_path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["before"] is True
    kind, cause, fix = report["during"]
    assert kind == "SystemResourceError", report
    assert "EMFILE" in cause and "worker 0" in cause
    assert "ulimit -n" in fix
    assert report["state_during"] == "running"  # not failed: the OS, not the backend
    assert report["after"] is True and report["new_pid"] is True
    assert report["state_after"] == "running"
