"""Pools on Ray against Ray itself, in one run, on local clusters started here (a head that
runs nothing, and one or two worker nodes): a tiny dispatch against a raw actor call doing
the same work; 64 MiB through a pool against Ray's own object store; dispatches per second
with 1, 2 and 4 workers over two nodes against the same on one node."""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np

from vyre_benchmarks.harness import Result, Unavailable, compare, reps, threaded_rate
from vyre_core import Driver, ir
from vyre_examples.saxpy import inputs as saxpy_inputs
from vyre_examples.saxpy import program as saxpy

REQUIRES = ("reference",)
#: Per node: the CPUs Ray may schedule (the machine may have fewer: throughput is then
#: shared, which the same-run baseline shares too).
CPUS_PER_NODE = 2
BIG = 64 << 20


def unavailable() -> str | None:
    """Why this suite cannot run here (None: it can)."""
    if importlib.util.find_spec("ray") is None:
        return "Ray is not installed (pip install 'vyre[ray]')"
    return None


_clusters: dict[tuple[int, int], Any] = {}


def local_cluster(nodes: int, cpus: int = CPUS_PER_NODE) -> Any:
    """A head that runs nothing and ``nodes`` worker nodes of ``cpus`` CPUs: started once
    per shape for the whole run, stopped (and its files removed) when the run ends. One
    that did not start (a node's start timed out on a loaded machine) raises Unavailable,
    at once for every later benchmark that needs it."""
    if (nodes, cpus) not in _clusters:
        started = _start_cluster(nodes, cpus)
        try:
            _clusters[(nodes, cpus)] = started.__enter__()
        except Exception as exc:
            _clusters[(nodes, cpus)] = Unavailable(
                f"a local Ray cluster of {nodes} node(s) of {cpus} CPUs did not start "
                f"({type(exc).__name__}: {_first_line(exc)})")
        else:
            atexit.register(started.__exit__, None, None, None)
    found = _clusters[(nodes, cpus)]
    if isinstance(found, Unavailable):
        raise found
    return found


def _first_line(exc: BaseException) -> str:
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), "")


@contextlib.contextmanager
def _start_cluster(nodes: int, cpus: int) -> Iterator[Any]:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from ray import cluster_utils
    from ray._private.utils import get_ray_address_file

    temp = tempfile.mkdtemp(prefix="vyre-rb-")
    address_file = get_ray_address_file(None)  # (written by the cluster utilities)
    made_dir = not os.path.isdir(os.path.dirname(address_file))
    os.makedirs(os.path.dirname(address_file), exist_ok=True)
    # The head is added as the first node, inside the try: a head whose start failed part
    # way is stopped too, before its session folder is removed (a head left running wrote
    # its session folder again after it was removed).
    cluster = cluster_utils.Cluster(shutdown_at_exit=False)
    try:
        cluster.add_node(
            num_cpus=0, include_dashboard=False, temp_dir=temp, object_store_memory=600 << 20,
            _system_config={"enable_worker_prestart": False,
                            "enable_metrics_collection": False})
        for _ in range(nodes):
            cluster.add_node(num_cpus=cpus, object_store_memory=600 << 20)
        cluster.wait_for_nodes()
        with _stopped_with_this_process(temp):
            yield cluster
    finally:
        cluster.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.unlink(address_file)
        if made_dir:
            shutil.rmtree(os.path.dirname(address_file), ignore_errors=True)


_WATCHDOG = """
import os, select, shutil, signal, sys
parent = os.pidfd_open(int(sys.argv[1]))
daemons = []
for pid in map(int, sys.argv[3:]):
    try:
        daemons.append(os.pidfd_open(pid))
    except ProcessLookupError:
        pass
print("ready", flush=True)
select.select([parent], [], [])
for daemon in daemons:
    try:
        signal.pidfd_send_signal(daemon, signal.SIGKILL)
    except ProcessLookupError:
        pass
for daemon in daemons:
    select.select([daemon], [], [], 10)
shutil.rmtree(sys.argv[2], ignore_errors=True)
"""


@contextlib.contextmanager
def _stopped_with_this_process(temp: str) -> Iterator[None]:
    """The clusters' daemons are stopped by an atexit handler, which a benchmark run
    killed (SIGKILL: a test's timeout, say) never runs: they would run on, reparented to
    init, for good. A watchdog process holds a pidfd of this process and of each of its
    descendants (the daemons; Ray's workers leave with their raylet), and kills them once
    this process has ended, however it ended, then removes their files (``temp``); a
    cluster shut down in time stops the watchdog first."""
    import psutil

    daemons = [p.pid for p in psutil.Process().children(recursive=True)]
    watchdog = subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(os.getpid()), temp,
                                 *map(str, daemons)], stdout=subprocess.PIPE, text=True,
                                start_new_session=True)  # (not in this process's group)
    try:
        watchdog.stdout.readline()  # (each pidfd taken before the benchmark goes on)
        yield
    finally:
        watchdog.kill()
        watchdog.wait()
        watchdog.stdout.close()


def _raw_actor(ray: Any) -> Any:
    """The baseline: a Ray actor that runs the reference interpreter itself."""

    class Raw:
        def run(self, wire: bytes, arrays: list[np.ndarray]) -> list[np.ndarray]:
            from vyre_reference import run

            return run(ir.Program.from_wire(wire), arrays)

    return ray.remote(num_cpus=1)(Raw).remote()


def tiny_dispatch_vs_raw_actor() -> Result:
    program, data = saxpy(1024), saxpy_inputs(1024)
    with Driver(cluster=local_cluster(2).address) as drv:
        import ray

        raw = _raw_actor(ray)
        wire = program.to_wire()
        assert ray.get(raw.run.remote(wire, data))[0].tobytes() == \
            drv.dispatch(program, data, backend="reference")[0].tobytes()
        return compare("tiny dispatch (saxpy, 1024) through a Ray pool",
                       lambda: drv.dispatch(program, data, backend="reference"),
                       "a raw Ray actor call running the reference on it",
                       lambda: ray.get(raw.run.remote(wire, data)),
                       repeat=reps(7, 2), number=reps(100, 10))


def copy_program(count: int) -> ir.Program:
    k = ir.Kernel(workgroup=(1024,))
    x = k.read("x", ir.u32, count)
    out = k.output("out", ir.u32, count)
    i = k.let("i", ir.global_id(0))
    out[i] = x[i]
    return k.build()


def big_through_ray_vs_put_get() -> Result:
    """64 MiB in and 64 MiB out of a worker on another node, against ``ray.put`` and
    ``ray.get`` of the same array (one way, no actor): what the data plane costs on top."""
    count = BIG // 4
    data = [np.arange(count, dtype=np.uint32)]
    program = copy_program(count)
    with Driver(cluster=local_cluster(2).address) as drv:
        import ray

        out, = drv.dispatch(program, data, backend="reference")
        assert out.tobytes() == data[0].tobytes()
        return compare("64 MiB in, 64 MiB out through a Ray pool (copy kernel)",
                       lambda: drv.dispatch(program, data, backend="reference"),
                       "ray.get(ray.put(the same 64 MiB))",
                       lambda: ray.get(ray.put(data[0])), repeat=reps(5, 2))


def big_through_ray_vs_raw_actor() -> Result:
    """The same 64 MiB copy against a raw actor running the reference on it: what the
    pool adds on top of Ray for large arrays (the copy kernel's own time is in both)."""
    count = BIG // 4
    data = [np.arange(count, dtype=np.uint32)]
    program = copy_program(count)
    with Driver(cluster=local_cluster(2).address) as drv:
        import ray

        raw = _raw_actor(ray)
        wire = program.to_wire()
        drv.dispatch(program, data, backend="reference")
        return compare("64 MiB in, 64 MiB out through a Ray pool (copy kernel)",
                       lambda: drv.dispatch(program, data, backend="reference"),
                       "a raw Ray actor call running the reference on it",
                       lambda: ray.get(raw.run.remote(wire, data)), repeat=reps(5, 2))


def _throughput(drv: Driver, workers: int, seconds: float) -> float:
    """Dispatches per second from ``workers`` threads, one call in flight each."""
    program, data = saxpy(4096), saxpy_inputs(4096)
    drv.dispatch(program, data, backend="reference")
    return threaded_rate(lambda: drv.dispatch(program, data, backend="reference"), workers,
                         seconds)


def _rates(nodes: int, cpus: int) -> dict[int, float]:
    rates = {}
    address = local_cluster(nodes, cpus).address
    for workers in (1, 2, 4):
        with Driver(cluster=address, workers=workers) as drv:
            rates[workers] = _throughput(drv, workers, reps(3.0, 1.0))
    return rates


#: Both clusters' rates once measured; or why they could not be (every rate_* says so).
_measured: dict[str, dict[int, float]] | Exception | None = None


def _both() -> dict[str, dict[int, float]]:
    global _measured
    if _measured is None:
        try:
            _measured = {"two": _rates(2, 2), "one": _rates(1, 4)}
        except Exception as exc:
            _measured = exc
    if isinstance(_measured, Exception):
        raise _measured
    return _measured


def _scaling(workers: int) -> Result:
    rates = _both()
    return Result(f"dispatches/s, {workers} worker(s) over two nodes (2 CPUs each)",
                  rates["two"][workers], "/s", "the same on one node of 4 CPUs",
                  rates["one"][workers])


def rate_1_worker() -> Result:
    return _scaling(1)


def rate_2_workers() -> Result:
    return _scaling(2)


def rate_4_workers() -> Result:
    return _scaling(4)


BENCHMARKS = [tiny_dispatch_vs_raw_actor, big_through_ray_vs_put_get,
              big_through_ray_vs_raw_actor, rate_1_worker, rate_2_workers, rate_4_workers]
