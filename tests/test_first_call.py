"""The first routed call of a fresh process (issue 37): routing learns what a backend it
may pass over can do without starting a worker of it (a short-lived probe, or the probe
cache on disk), so no wgpu worker is left behind when wgpu, on a software adapter here, is
demoted; a second fresh process routes from the cache without probing at all; a corrupt
or stale cache file is survived, logged and written again; and a stale entry never sends
work to a backend that cannot run it. Each case runs a real child Python, as a user's
script runs, with a cache directory of its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vyre_core.testing import PATIENCE

pytestmark = pytest.mark.processes

SCRIPT = r'''
import json, logging, sys, time
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(message)s")
import psutil
import vyre_core as vyre
from vyre_core import ir
from vyre_examples.saxpy import inputs, program

def u64_program():
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.u64)
    out = k.output("out", ir.u64, count=256)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = x[i] * ir.lit(3, ir.u64)
    return k.build()

import numpy as np
which = sys.argv[1]
prog, data = (u64_program(), [np.arange(256, dtype=np.uint64) << 40]) if which == "u64" \
    else (program(4096), inputs(4096))
with vyre.Driver() as drv:
    start = time.perf_counter()
    out = drv.dispatch(prog, data)
    seconds = time.perf_counter() - start
    workers = [" ".join(p.cmdline()) for p in psutil.Process().children(recursive=True)]
    pools = sorted(b for b, p in drv.status()["pools"].items() if p["workers"])
    expl = drv.explain(prog)
print(json.dumps({"seconds": seconds, "workers": workers, "pools": pools,
                  "chosen": [e.backend for e in expl if e.chosen],
                  "demoted": [e.backend for e in expl if e.demoted],
                  "out": out[0].tobytes().hex()}))
'''


def first_call(tmp_path: Path, cache: Path | str, which: str = "saxpy",
               runtime: Path | None = None) -> tuple[dict[str, Any], str]:
    """A fresh Python's first routed dispatch, with ``cache`` as its probe cache and
    ``runtime`` (``tmp_path`` unless named) as its VYRE_RUNTIME_DIR: its report, and its
    log (stderr). (Every VYRE_ variable is part of a probe's identity: a process reading
    another's entries needs the same runtime directory.)"""
    script = tmp_path / "first_call.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("VYRE_") or k == "VYRE_CPU_CACHE_DIR"}
    env.update(VYRE_PROBE_CACHE=str(cache), VYRE_RUNTIME_DIR=str(runtime or tmp_path))
    done = subprocess.run([sys.executable, str(script), which], capture_output=True,
                          text=True, timeout=PATIENCE, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.fixture(scope="module")
def cold(tmp_path_factory) -> tuple[dict[str, Any], str, Path]:
    """One fresh Python's first call with an empty probe cache of its own: its report,
    its log, and the cache it wrote (a test that changes the cache takes a copy: see
    ``cache_of``). Each test below began with this same call; made once, it is one child
    Python instead of four."""
    tmp = tmp_path_factory.mktemp("cold")
    report, log = first_call(tmp, tmp / "probes")
    return report, log, tmp / "probes"


def cache_of(cold: tuple[dict[str, Any], str, Path], tmp_path: Path) -> Path:
    """A copy of the cache ``cold`` wrote, for the test's own changes."""
    demoting(cold[0])
    return Path(shutil.copytree(cold[2], tmp_path / "probes"))


def wgpu_workers(report: dict[str, Any]) -> list[str]:
    return [w for w in report["workers"] if "--backend wgpu" in w]


def demoting(report: dict[str, Any]) -> None:
    if "wgpu" not in report["demoted"]:
        pytest.skip("wgpu is not demoted here (not installed, or on a hardware adapter)")


def test_a_routed_first_call_starts_no_worker_of_the_backend_it_demotes(cold):
    """It started a wgpu worker (and its fork server) to learn that lavapipe is demoted,
    and kept them for the driver's life."""
    report, log, _ = cold
    demoting(report)
    assert report["chosen"] == ["cpu"]
    assert wgpu_workers(report) == [] and report["pools"] == ["cpu"], report
    assert "routing probed 'wgpu' apart (no pool started)" in log


def test_a_second_fresh_process_routes_from_the_cache_without_probing(cold, tmp_path):
    first = cold[0]
    cache = cache_of(cold, tmp_path)
    assert sorted(p.name.split("-")[0] for p in cache.glob("*.json")) == ["cpu", "wgpu"]
    second, log = first_call(tmp_path, cache, runtime=cold[2].parent)
    assert "probe cache: 'wgpu' as probed before" in log
    assert "probed 'wgpu' apart" not in log and "probed 'cpu' apart" not in log, log
    assert second["chosen"] == ["cpu"] and wgpu_workers(second) == []
    assert second["out"] == first["out"]


def test_without_the_cache_every_process_probes_apart_and_writes_nothing(tmp_path):
    report, log = first_call(tmp_path, "off")
    demoting(report)
    assert wgpu_workers(report) == [] and "probe cache" not in log
    assert not (tmp_path / "off").exists()


def test_a_corrupt_cache_file_is_ignored_with_a_log_line_and_written_again(cold, tmp_path):
    cache = cache_of(cold, tmp_path)
    wgpu_file, = cache.glob("wgpu-*.json")
    wgpu_file.write_text('{"format": 1, "capabilities": {"supported_o')  # (cut off)
    again, log = first_call(tmp_path, cache, runtime=cold[2].parent)
    assert f"ignoring the corrupt file {wgpu_file}" in log
    assert again["chosen"] == ["cpu"] and wgpu_workers(again) == []
    assert json.loads(wgpu_file.read_text())["capabilities"]["extra"]["software_adapter"]


def test_a_stale_entry_never_sends_work_where_it_cannot_run_and_is_written_anew(cold,
                                                                              tmp_path):
    """The cache says wgpu runs u64 and is a hardware adapter (a stale entry under today's
    identity): routing chooses wgpu, its worker's own probe says otherwise, and the u64
    program runs on cpu all the same; the file then holds what the worker found."""
    cache = cache_of(cold, tmp_path)
    wgpu_file, = cache.glob("wgpu-*.json")
    entry = json.loads(wgpu_file.read_text())
    assert "dtype.u64" not in entry["capabilities"]["supported_ops"]  # (WGSL has none)
    entry["capabilities"]["supported_ops"].append("dtype.u64")
    entry["capabilities"]["extra"]["software_adapter"] = False
    wgpu_file.write_text(json.dumps(entry))
    stale, log = first_call(tmp_path, cache, "u64", runtime=cold[2].parent)
    assert "pool 'wgpu': worker 0" in log  # (chosen on the entry, its worker probed)
    assert stale["chosen"] == ["cpu"]
    assert stale["out"] == ((np.arange(256, dtype=np.uint64) << 40) * 3).tobytes().hex()
    written = json.loads(wgpu_file.read_text())["capabilities"]
    assert "dtype.u64" not in written["supported_ops"]
    assert written["extra"]["software_adapter"] is True
