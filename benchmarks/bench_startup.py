"""The first call of a fresh process: a routed first dispatch (``backend`` left out) in a
new Python, against the same first dispatch naming the backend routing chose, each timed
from ``Driver()`` to the dispatch's answer in a process of its own, alternating, after one
routed run that leaves the probe cache as any earlier run would. The ratio is what
routing adds to a script's first call; the target (issue 37) is at most 1.5x."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

from vyre_benchmarks.harness import Result, reps

REQUIRES = ("reference",)
#: How long one fresh process may take (a loaded machine; the cpu backend compiles once).
PROCESS_LIMIT = 300.0

SCRIPT = r'''
import json, sys, time
import numpy as np
import vyre_core as vyre
from vyre_core import ir

k = ir.Kernel(workgroup=(64,))
x, y = k.read("x", ir.f32), k.read("y", ir.f32)
out = k.output("out", ir.f32, count=4096)
i = k.let("i", ir.global_id(0))
with k.if_(i < x.len):
    out[i] = x[i] * 2.5 + y[i]
program = k.build()
data = [np.arange(4096, dtype=np.float32), np.ones(4096, dtype=np.float32)]
named = sys.argv[1] or None
start = time.perf_counter()
with vyre.Driver() as drv:
    drv.dispatch(program, data, backend=named)
    seconds = time.perf_counter() - start
    chosen = named or drv.route(program).backend
print(json.dumps({"seconds": seconds, "backend": chosen}))
'''


def first_dispatch(backend: str | None) -> tuple[float, str]:
    """Seconds from ``Driver()`` to the first dispatch's answer in a new Python, routed
    (None) or naming ``backend``; and the backend that ran it."""
    done = subprocess.run([sys.executable, "-c", SCRIPT, backend or ""], capture_output=True,
                          text=True, timeout=PROCESS_LIMIT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the fresh process failed (exit status {done.returncode}): "
                           f"{done.stderr[-2000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report["seconds"], report["backend"]


def first_routed_dispatch() -> Result:
    _, chosen = first_dispatch(None)  # (the probe cache as an earlier run leaves it)
    routed, named = [], []
    for _ in range(reps(5, 2)):
        routed.append(first_dispatch(None)[0])
        named.append(first_dispatch(chosen)[0])
    return Result("first routed dispatch of a fresh process (probe cache warm)",
                  statistics.median(routed) * 1e3, "ms",
                  f"the same naming the backend routing chose ({chosen})",
                  statistics.median(named) * 1e3)


BENCHMARKS = [first_routed_dispatch]
