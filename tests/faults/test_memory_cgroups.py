"""Memory is a budget, not a hope (issue 38 rows 1 and 7), in real memory cgroups.

A child Python process runs in a fresh memory cgroup (v1 ``memory.limit_in_bytes``, or v2
``memory.max``) under this one, so its workers are there too. The issue's sizes (a 1 GiB
group; 64, 160, 256 MiB calls; four threads x 160 MiB) are halved with the limit: the
same failure on main (the caller SIGKILLed by the OOM killer), at half the memory.
Needs root and a memory controller: skipped with the reason elsewhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vyre_core.memory import memory_cgroup
from vyre_core.testing import wait_for

pytestmark = [pytest.mark.processes, pytest.mark.slow]

MiB = 1 << 20

CALLS_CHILD = textwrap.dedent('''
    import json, sys, threading
    import numpy as np
    import vyre_core
    from vyre_core.errors import VyreError
    from vyre_examples.saxpy import program

    sizes = [int(x) for x in sys.argv[1].split(",")]
    threads = int(sys.argv[2])
    report = []

    def call(drv, mib, x):
        n = mib << 18  # float32: mib MiB per array
        try:
            out = drv.dispatch(program(n), [x, x, np.array([2.0], np.float32)],
                               backend="reference")
            report.append([mib, "ok" if out[0][0] == 3.0 and out[0][-1] == 3.0 else "wrong"])
        except VyreError as exc:
            report.append([mib, type(exc).__name__, exc.cause, exc.fix])

    with vyre_core.Driver() as drv:
        for mib in sizes:
            xs = [np.ones(mib << 18, np.float32) for _ in range(threads)]  # made first
            workers = [threading.Thread(target=call, args=(drv, mib, x)) for x in xs]
            for t in workers:
                t.start()
            for t in workers:
                t.join()
            del xs
    print(json.dumps(report), flush=True)
''')

OOM_CHILD = textwrap.dedent('''
    import json
    import numpy as np
    import vyre_core
    from vyre_core import DispatchConfig
    from vyre_core.errors import VyreError
    from vyre_examples.saxpy import program

    report = {}
    x = np.ones(64, np.float32)
    data = [x, x, np.array([2.0], np.float32)]
    with vyre_core.Driver(restart=vyre_core.RestartPolicy(max_restarts=20)) as drv:
        drv.dispatch(program(64), data, backend="faults")
        try:  # the worker keeps far more than its group allows: the OOM killer takes it
            drv.dispatch(program(64), data, backend="faults",
                         config=DispatchConfig(label="fault:leak:400", retries=1))
            report["error"] = None
        except VyreError as exc:
            report["error"] = [type(exc).__name__, exc.cause, exc.fix, exc.details]
        status = drv.status()["pools"]["faults"]
        report["restarts"] = status["restarts"]
        out = drv.dispatch(program(64), data, backend="faults")
        report["after"] = float(out[0][0])
    print(json.dumps(report, default=str), flush=True)
''')


def _group(name: str, limit: int) -> Path:
    """A fresh memory cgroup under this process's own, limited to ``limit`` bytes."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make a memory cgroup")
    found = memory_cgroup()
    if found is None:
        pytest.skip("no memory cgroup controller (v1 or v2) on this machine")
    parent, v2 = found
    group = parent / name
    try:
        group.mkdir()
        (group / ("memory.max" if v2 else "memory.limit_in_bytes")).write_text(str(limit))
    except OSError as exc:
        if group.exists():
            group.rmdir()
        pytest.skip(f"cannot make a memory cgroup under {parent}: {exc}")
    return group


def _run_in(group: Path, script: str, *args: str) -> subprocess.CompletedProcess:
    procs = group / "cgroup.procs"
    try:
        return subprocess.run(
            [sys.executable, "-c", script, *args], capture_output=True, text=True,
            timeout=240, preexec_fn=lambda: procs.write_text(str(os.getpid())))
    finally:
        for pid in procs.read_text().split():  # (a worker left behind by a killed caller)
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        wait_for(lambda: not procs.read_text().split(), what="the group to empty")
        os.rmdir(group)


def _report(proc: subprocess.CompletedProcess) -> object:
    assert proc.returncode == 0, (f"the caller died ({proc.returncode}; -9: the OOM "
                                  f"killer):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _clear(entry: list) -> None:
    """A call either succeeded or failed with the clear error: SystemResourceError, its
    cause naming the memory, a Fix."""
    if entry[1] == "ok":
        return
    kind, cause, fix = entry[1:]
    assert kind == "SystemResourceError", entry
    assert "memory" in cause and "memory" in fix, entry


@pytest.mark.timeout(300)
@pytest.mark.parametrize("sizes,threads", [("32,80,128", 1), ("80", 4)],
                         ids=["growing-calls", "four-threads"])
def test_the_caller_survives_big_dispatches_in_a_memory_cgroup(sizes, threads) -> None:
    """Row 1: on main the caller was SIGKILLed by the OOM killer (the second call of the
    growing ones; the four threads at once)."""
    group = _group(f"vyre-test-{os.getpid()}-{threads}", 512 * MiB)
    report = _report(_run_in(group, CALLS_CHILD, sizes, str(threads)))
    assert len(report) == len(sizes.split(",")) * threads
    for entry in report:
        _clear(entry)
    assert report[0][1] == "ok" or threads > 1


@pytest.mark.timeout(300)
def test_an_oom_killed_worker_is_reported_as_such_and_not_run_again() -> None:
    """Row 7: on main it was "killed by SIGKILL ... poison request", with no memory hint,
    after running twice."""
    group = _group(f"vyre-test-{os.getpid()}-oom", 256 * MiB)
    report = _report(_run_in(group, OOM_CHILD))
    kind, cause, fix, details = report["error"]
    assert kind == "SystemResourceError", report
    assert "OOM killer" in cause and "not run again" in cause
    assert "memory" in fix and "split" in fix
    assert details["oom_killed"] is True
    assert report["restarts"] == 1  # one worker killed: the request ran once
    assert report["after"] == 3.0


ADDRESS_SPACE_CHILD = textwrap.dedent('''
    import json, resource
    import numpy as np
    import vyre_core
    from vyre_core.errors import VyreError
    from vyre_examples.saxpy import program

    with vyre_core.Driver() as drv:
        x = np.ones(64, np.float32)
        drv.dispatch(program(64), [x, x, np.array([2.0], np.float32)], backend="reference")
        n = 256 << 18
        big = np.ones(n, np.float32)  # (256 MiB: written to its segment, never mapped here)
        with open("/proc/self/statm") as statm:
            size = int(statm.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (size + (128 << 20), resource.RLIM_INFINITY))
        try:
            drv.dispatch(program(n), [big, big, np.array([2.0], np.float32)],
                         backend="reference")
            print(json.dumps(None))
        except VyreError as exc:
            print(json.dumps([type(exc).__name__, exc.cause, exc.fix]))
''')


@pytest.mark.timeout(120)
def test_a_reply_past_the_address_space_is_a_system_resource_error() -> None:
    """Row 6: a reply this process cannot map under RLIMIT_AS (the issue's 1 GiB, here
    256 MiB with 128 MiB of address space left) is refused before it is made, with
    SystemResourceError (E1306) naming the limit, as docs/errors.md and operations.md say;
    on main it came as DeviceOutOfMemoryError (E1201) "reading a reply" (the bug path)."""
    proc = subprocess.run([sys.executable, "-c", ADDRESS_SPACE_CHILD], capture_output=True,
                          text=True, timeout=100)
    kind, cause, fix = _report(proc)
    assert kind == "SystemResourceError", cause
    assert "RLIMIT_AS" in cause and "ulimit -v" in fix
