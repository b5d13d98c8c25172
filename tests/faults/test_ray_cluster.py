"""Pools on Ray, for real: a local Ray cluster of a head (no CPUs: it runs no worker) and two
worker nodes, started here with Ray's own cluster utilities, and Drivers joined to it
(``Driver(cluster=address)``). Dispatches give the local bytes; an actor killed mid-call,
a node removed mid-call and a hang past the deadline behave as with worker processes;
bad cluster settings fail fast with a Fix; and a private instance (``cluster="ray"``)
leaves no process behind. Ray is the optional ``ray`` extra: `make test` installs it."""

from __future__ import annotations

import os
import shutil
import signal
import socketserver
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from child_process import Child
from installed_dists import write_dist

from vyre_core import Driver, ir
from vyre_core.config import DispatchConfig
from vyre_core.conformance import honesty
from vyre_core.conformance.corpus import CASES
from vyre_core.conformance.runner import run_case
from vyre_core.errors import (
    ClusterUnavailableError,
    DispatchTimeoutError,
    InvalidConfigError,
    NoCapableBackendError,
    PipelineInvalidatedError,
    PoolFailedError,
    SystemResourceError,
)
from vyre_core.supervisor import published, rundir
from vyre_core.supervisor.options import PoolOptions, RestartPolicy, Timeouts
from vyre_core.testing import PATIENCE
from vyre_core.testing.tight import options_over
from vyre_examples.saxpy import inputs as saxpy_inputs
from vyre_examples.saxpy import program as saxpy

from .child_script import PRELUDE
from .support import wait_for
from .test_interrupted_callers import expected as spun

ray_cluster_utils = pytest.importorskip("ray.cluster_utils", reason="the ray extra")
ray_utils = pytest.importorskip("ray._private.utils", reason="the ray extra")

pytestmark = [pytest.mark.processes, pytest.mark.slow]

N = 1 << 16
#: Nodes are judged dead within about a second and a half, not Ray's default 15 s.
FAST_HEALTH = {"health_check_period_ms": 500, "health_check_failure_threshold": 3,
               "health_check_timeout_ms": 500, "health_check_initial_delay_ms": 1000,
               "enable_worker_prestart": False, "enable_metrics_collection": False}


@pytest.fixture(scope="module")
def cluster():
    patched = pytest.MonkeyPatch()  # (undone at the end: later modules see no Ray settings)
    patched.setenv("RAY_AUTH_MODE", "disabled")
    patched.setenv("RAY_USAGE_STATS_ENABLED", "0")
    temp = tempfile.mkdtemp(prefix="vyre-rt-")  # (short: Ray's socket paths)
    # Ray's cluster utilities write the head's address to a file in Ray's default temp
    # directory, whatever temp_dir says; it is removed at the end (a plain ray.init()
    # elsewhere on this machine would join a cluster it names)
    address_file = Path(ray_utils.get_ray_address_file(None))
    made_dir = not address_file.parent.exists()
    address_file.parent.mkdir(parents=True, exist_ok=True)
    made = None
    try:  # (from here on: whatever was made is stopped and removed, a failed start too)
        made = ray_cluster_utils.Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "include_dashboard": False, "_system_config": FAST_HEALTH,
            "object_store_memory": 200 << 20, "temp_dir": temp})
        for _ in range(2):
            made.add_node(num_cpus=1, object_store_memory=200 << 20)
        made.wait_for_nodes()
        yield made
    finally:
        if made is not None:
            made.shutdown()
        wait_for(lambda: not [p for p in psutil.Process().children(recursive=True)
                              if p.is_running() and p.status() != psutil.STATUS_ZOMBIE],
                 30.0, "every Ray process of the test cluster to end")
        shutil.rmtree(temp, ignore_errors=True)
        address_file.unlink(missing_ok=True)
        if made_dir:
            shutil.rmtree(address_file.parent, ignore_errors=True)
        patched.undo()


#: The Ray tests' pool options, under what a test changes (``options_over``).
OPTIONS = PoolOptions(restart=RestartPolicy(max_restarts=5, window=30.0),
                      timeouts=Timeouts(kill_grace=0.5, heartbeat=5.0))


def on(cluster, **options) -> Driver:
    return Driver(cluster=cluster.address, options=options_over(OPTIONS, **options))


def node_of(drv: Driver, backend: str, index: int = 0) -> str:
    return drv.status()["pools"][backend]["workers"][index]["node"]


def test_dispatch_through_ray_gives_the_local_bytes(cluster):
    program, data = saxpy(N), saxpy_inputs(N, 3)
    with Driver() as local:
        expected = local.dispatch(program, data, backend="reference")[0].tobytes()
    with on(cluster) as drv:
        out, = drv.dispatch(program, data, backend="reference")
        assert out.tobytes() == expected
        assert not out.flags.writeable  # (read in place from Ray's object store)
        pipeline = drv.compile(program, backend="reference")
        assert pipeline.dispatch(data)[0].tobytes() == expected
        pending = [drv.dispatch_async(program, saxpy_inputs(N, s), backend="faults")
                   for s in range(3)]
        for s, p in enumerate(pending):
            x, y, a = saxpy_inputs(N, s)
            assert p.result(60)[0].tobytes() == (a[0] * x + y).astype(np.float32).tobytes()
        status = drv.status()["pools"]["reference"]
        alive = {n["node"] for n in status["nodes"] if n["alive"]}
        assert status["cluster"] == cluster.address and len(alive) == 3
        assert status["workers"][0]["node"] in alive

        def snapshot() -> dict | None:  # what `vyre status` reads
            mine = [d for d in published.running_drivers(rundir.base_dir())
                    if d["pid"] == os.getpid()]
            pool = mine[0]["pools"].get("reference") if mine else None
            return pool if pool and pool.get("workers") and pool["workers"][0]["pid"] \
                else None

        assert wait_for(snapshot, 10, "the Ray pool's snapshot")["cluster"] == cluster.address


def test_an_actor_killed_mid_dispatch_is_replaced_and_the_call_retried(cluster):
    program, data = saxpy(N), saxpy_inputs(N, 5)
    with on(cluster) as drv:
        drv.dispatch(program, data, backend="faults")
        pid = drv.status()["pools"]["faults"]["workers"][0]["pid"]
        pending = drv.dispatch_async(program, data, backend="faults",
                                     config=DispatchConfig(label="fault:sleep:3"))
        wait_for(lambda: drv.status()["pools"]["faults"]["workers"][0]["running"], 20,
                 "the actor to be running the call")
        os.kill(pid, signal.SIGKILL)
        x, y, a = data
        assert pending.result(60)[0].tobytes() == (a[0] * x + y).astype(np.float32).tobytes()
        worker = drv.status()["pools"]["faults"]["workers"][0]
        assert worker["generation"] == 2 and worker["pid"] != pid and worker["restarts"] == 1


def test_a_node_removed_mid_dispatch_moves_its_work_to_another_node(cluster):
    program, data = saxpy(N), saxpy_inputs(N, 7)
    with on(cluster) as drv:
        drv.dispatch(program, data, backend="faults")
        first = node_of(drv, "faults")
        node = next(n for n in cluster.list_all_nodes() if n.node_id == first)
        pending = drv.dispatch_async(program, data, backend="faults",
                                     config=DispatchConfig(label="fault:sleep:3"))
        wait_for(lambda: drv.status()["pools"]["faults"]["workers"][0]["running"], 20,
                 "the actor to be running the call")
        cluster.remove_node(node)
        try:
            x, y, a = data
            out = pending.result(60)[0]
            assert out.tobytes() == (a[0] * x + y).astype(np.float32).tobytes()
            assert node_of(drv, "faults") not in (first, None)
        finally:
            cluster.add_node(num_cpus=1, object_store_memory=200 << 20)
            cluster.wait_for_nodes()


def test_a_hang_past_the_deadline_fails_on_time_and_the_actor_is_replaced(cluster, vyre_stalls):
    program, data = saxpy(N), saxpy_inputs(N, 9)
    with on(cluster) as drv:
        drv.dispatch(program, data, backend="faults")
        started = time.monotonic()
        with pytest.raises(DispatchTimeoutError):
            drv.dispatch(program, data, backend="faults",
                         config=DispatchConfig(label="fault:hang_native", timeout=1.5))
        assert time.monotonic() - started < 5 + vyre_stalls.since(started), vyre_stalls
        wait_for(lambda: drv.status()["pools"]["faults"]["workers"][0]["generation"] == 2
                 and drv.status()["pools"]["faults"]["workers"][0]["state"] == "idle", 30,
                 "the replacement actor")
        assert drv.dispatch(program, data, backend="faults")[0].nbytes == 4 * N


RAY_CTRL_C = """
drv = vyre_core.Driver(cluster=os.environ["VYRE_TEST_CLUSTER"],
                       restart=vyre_core.RestartPolicy(max_restarts=5, window=30.0),
                       timeouts=vyre_core.Timeouts(kill_grace=0.5))
sys.path.insert(0, os.environ["TESTS_DIR"])
from faults.test_interrupted_callers import spin
drv.launch(spin, 256, (np.array([3], np.uint32), np.zeros(256, np.uint32)),
           backend="reference")

def tell_when_running():
    wait_until(lambda: workers(drv, "reference")[0]["running"], "the loop running")
    report(step="running")

threading.Thread(target=tell_when_running, daemon=True).start()
try:
    drv.launch(spin, 256, (np.array([2**31 - 1], np.uint32), np.zeros(256, np.uint32)),
               backend="reference")
    outcome = "returned"
except KeyboardInterrupt:
    outcome = "interrupted"
out = np.zeros(256, np.uint32)
try:
    drv.launch(spin, 256, (np.array([5], np.uint32), out), backend="reference",
               config=DispatchConfig(timeout=20))
    after = "answered"
except vyre_core.errors.DispatchTimeoutError:
    after = "timed out"
pool = drv.status()["pools"]["reference"]
report(step="after", outcome=outcome, after=after, out=out.tobytes().hex(),
       cancelled=pool["metrics"]["restarts"].get("cancelled", 0))
drv.close()
"""


@pytest.mark.timeout(150)
def test_ctrl_c_cancels_a_call_running_on_ray_and_the_next_call_is_answered(cluster, tmp_path,
                                                                           monkeypatch):
    """On main before this change the Ray pool's waiting thread let the interrupted call
    run on: the next call queued behind the endless loop and timed out after 20 s. Now
    the interrupt cancels it; an actor cannot stop at a safe point, so it is killed after
    cancel_grace (a planned stop, counted as "cancelled") and the next call is served."""
    monkeypatch.setenv("TESTS_DIR", os.path.dirname(os.path.dirname(__file__)))
    monkeypatch.setenv("VYRE_TEST_CLUSTER", cluster.address)
    child = Child(tmp_path, PRELUDE + RAY_CTRL_C)
    try:
        assert child.report(timeout=90)["step"] == "running"
        child.interrupt()
        found = child.report(timeout=60)
        assert child.proc.wait(timeout=30) == 0, child.stderr()
    finally:
        child.stop()
    assert found["outcome"] == "interrupted" and found["after"] == "answered", found
    assert bytes.fromhex(found["out"]) == spun(5)
    assert found["cancelled"] == 1, found


def test_a_worker_that_needs_gpus_no_node_has_is_refused_naming_the_nodes(cluster):
    with on(cluster, gpus_per_worker=1) as drv, pytest.raises(NoCapableBackendError) as err:
        drv.dispatch(saxpy(64), saxpy_inputs(64), backend="reference",
                     config=DispatchConfig(timeout=30))
    text = str(err.value)
    assert "no node of the Ray cluster" in text and "0 GPU" in text and "Fix:" in text


DEMO_ON_RAY = """
import json, sys, time
sys.path.insert(0, {site!r})  # (this Python has the demo backend; Ray's workers do not)
from vyre_core import Driver, RestartPolicy
from vyre_core.config import DispatchConfig
from vyre_core.errors import NoCapableBackendError
from vyre_examples.saxpy import inputs, program
with Driver(cluster={address!r},
            restart=RestartPolicy(max_restarts=0)) as drv:  # (a failed start is no death)
    started = time.monotonic()
    try:
        out, = drv.dispatch(program(64, 64), inputs(64, 3), backend="demo",
                            config=DispatchConfig(timeout=60))
        said = {{"bytes": out.tobytes().hex()}}
    except NoCapableBackendError as exc:
        said = {{"error": str(exc)}}
    pool = drv.status()["pools"]["demo"]
    said.update(seconds=time.monotonic() - started, state=pool["state"],
                nodes=[w["node"] for w in pool["workers"]])
print(json.dumps(said), flush=True)
"""


def demo_on_ray(cluster, tmp_path) -> dict:
    site = write_dist(tmp_path / "site", "vyre-thirdparty-demo", {"demo": "vyre_demo_backend"},
                      ("vyre_demo_backend",))
    child = Child(tmp_path, DEMO_ON_RAY.format(site=str(site), address=cluster.address))
    try:
        return child.report(90)
    finally:
        child.stop()


def test_a_backend_on_no_node_is_refused_naming_what_each_node_has(cluster, tmp_path):
    said = demo_on_ray(cluster, tmp_path)
    text = said["error"]
    assert "backend 'demo' is on no node of the Ray cluster" in text
    assert text.count(": has ") == 2 and "reference" in text and "'demo'" in text, text
    assert "Fix: Install the distribution of 'demo' in the Python of the cluster's nodes" in text
    # one failed start per node, counted as no death: the pool did not fail
    assert said["state"] == "running" and said["seconds"] < 30


def test_a_backend_on_one_node_only_runs_its_workers_there(cluster, tmp_path):
    site = tmp_path / "site"
    node = cluster.add_node(num_cpus=1, object_store_memory=200 << 20,
                            env_vars={"PYTHONPATH": str(site)})
    try:
        cluster.wait_for_nodes()
        said = demo_on_ray(cluster, tmp_path)
        out, = saxpy_reference(64)
        assert said.get("bytes") == out.tobytes().hex(), said
        assert said["nodes"] == [node.node_id]
    finally:
        cluster.remove_node(node)


def test_work_goes_only_to_the_nodes_whose_workers_can_run_it(cluster):
    """Routing by each node's own workers: a node whose workers have no f64 (its raylet
    says VYRE_FAULTS=no_f64) still serves f32 work, and never gets an f64 program, which
    the other nodes run (the pool's capabilities in common would refuse it outright)."""
    node = cluster.add_node(num_cpus=1, object_store_memory=200 << 20,
                            env_vars={"VYRE_FAULTS": "no_f64"})
    try:
        cluster.wait_for_nodes()
        options = PoolOptions(workers=3, timeouts=Timeouts(kill_grace=0.5, heartbeat=5.0))
        with Driver(cluster=cluster.address, backend_options={"faults": options}) as drv:
            drv.dispatch(saxpy(64), saxpy_inputs(64), backend="faults")
            wait_for(lambda: [w["state"] for w in drv.status()["pools"]["faults"]["workers"]]
                     == ["idle"] * 3, 60, "three workers, one per node")
            workers = drv.status()["pools"]["faults"]["workers"]
            weak = next(w["index"] for w in workers if w["node"] == node.node_id)
            before = [w["served"] for w in workers]  # (the first saxpy ran on any one)
            program, data = f64_double(), [np.arange(N, dtype=np.float64)]
            assert drv.route(program, backend="faults").backend == "faults"
            for _ in range(3):  # three at once: one more than the capable workers
                pending = [drv.dispatch_async(program, data, backend="faults",
                                              config=DispatchConfig(label="fault:sleep:0.2"))
                           for _ in range(3)]
                for p in pending:
                    assert p.result(60)[0].tobytes() == (data[0] * 2).tobytes()
            pool = drv.status()["pools"]["faults"]
            served = [w["served"] - b for w, b in zip(pool["workers"], before, strict=True)]
            assert served[weak] == 0 and sum(served) == 9, pool
            pending = [drv.dispatch_async(saxpy(64), saxpy_inputs(64), backend="faults",
                                          config=DispatchConfig(label="fault:sleep:0.3"))
                       for _ in range(3)]
            for p in pending:
                p.result(60)
            pool = drv.status()["pools"]["faults"]
            assert pool["workers"][weak]["served"] > before[weak], pool
    finally:
        cluster.remove_node(node)


def f64_double() -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.f64, N)
    out = k.output("out", ir.f64, N)
    i = k.let("i", ir.global_id(0))
    out[i] = x[i] * 2.0
    return k.build()


def saxpy_reference(n: int) -> list[np.ndarray]:
    with Driver() as local:
        return local.dispatch(saxpy(n, 64), saxpy_inputs(n, 3), backend="reference")


@pytest.mark.timeout(240)  # (a start deadline of PATIENCE, then a start within it)
def test_a_worker_no_node_has_room_for_now_fails_the_call_clearly_and_spends_no_restart(
        cluster, vyre_stalls):
    """Every CPU of the cluster is held by someone else's actors: Ray would keep the
    worker pending for ever; vyre says so at the start deadline, and starts it once room
    is made. (The start deadline is the patience of a wait for something sure to come:
    the worker started once room is made must meet it on a loaded machine. At 3 s, then
    at 10 s, with a CPU-bound process on each core beside a clean-clone run of the suite,
    it missed it, and max_restarts=0 failed the pool.)"""
    from ray.util import placement_group, remove_placement_group

    with on(cluster, restart={"max_restarts": 0}, timeouts={"startup": PATIENCE}) as drv:
        held = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="SPREAD")
        try:
            held.wait(60)
            started = time.monotonic()
            with pytest.raises(SystemResourceError) as err:
                drv.dispatch(saxpy(64), saxpy_inputs(64), backend="reference",
                             config=DispatchConfig(timeout=2 * PATIENCE))
            assert time.monotonic() - started < PATIENCE + 5 + vyre_stalls.since(started), \
                vyre_stalls
            text = str(err.value)
            assert "Ray could not place a worker of 'reference'" in text
            assert "free: 0 CPU" in text and "in all: 2 CPU" in text and "Fix: Free" in text
            assert drv.status()["pools"]["reference"]["state"] == "running"
        finally:
            remove_placement_group(held)
        out, = drv.dispatch(saxpy(64), saxpy_inputs(64, 3), backend="reference",
                            config=DispatchConfig(timeout=2 * PATIENCE))
        assert out.tobytes() == saxpy_reference(64)[0].tobytes()


@pytest.mark.timeout(300)  # (probes and starts each within 2 * PATIENCE on a loaded machine)
def test_routing_holds_no_cpu_of_the_cluster_for_a_backend_it_passes_over(cluster):
    """Routing probed wgpu with an actor of its own, demoted lavapipe and kept the actor:
    with the cpu backend's worker both CPUs of the cluster were held, and a call naming
    the reference waited for a CPU and failed (SystemResourceError). A probe is a Ray
    task now, its CPU free again once it answered."""
    program, data = saxpy(64, 64), saxpy_inputs(64, 3)
    with on(cluster, timeouts={"startup": 2 * PATIENCE}) as drv:
        routed, = drv.dispatch(program, data, config=DispatchConfig(timeout=120))
        wgpu, = [e for e in drv.explain(program) if e.backend == "wgpu"]
        # (a probe that ran out of time is not a node without lavapipe: under a CPU-bound
        # process per core it once took over 20 s, and the test skipped itself)
        assert not any("could not be probed" in r for r in wgpu.reasons), wgpu.reasons
        if not wgpu.demoted:
            pytest.skip("wgpu is not demoted on this cluster's nodes")
        chosen = drv.route(program).backend
        out, = drv.dispatch(program, data, backend="reference",
                            config=DispatchConfig(timeout=60))
        assert out.tobytes() == routed.tobytes() == saxpy_reference(64)[0].tobytes()
        started = [b for b, p in drv.status()["pools"].items() if p["workers"]]
        assert sorted(started) == sorted({chosen, "reference"})


def test_an_address_that_does_not_answer_fails_within_seconds_with_a_fix():
    started = time.monotonic()
    with pytest.raises(ClusterUnavailableError) as err:
        Driver(cluster="127.0.0.1:1")
    assert time.monotonic() - started < 10
    assert "nothing answers at the Ray cluster address 127.0.0.1:1" in str(err.value)
    assert "Fix: Check that a Ray head runs at 127.0.0.1:1" in str(err.value)


def test_a_port_where_something_else_answers_is_refused_at_once(vyre_stalls):
    """An HTTP server, not a Ray head: Ray itself would try for twenty seconds."""

    class Hello(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.recv(64)
            self.request.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n")

    with socketserver.TCPServer(("127.0.0.1", 0), Hello) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        address = f"127.0.0.1:{server.server_address[1]}"
        started = time.monotonic()
        try:
            with pytest.raises(ClusterUnavailableError) as err:
                Driver(cluster=address)
        finally:
            server.shutdown()
            thread.join(10)
    assert time.monotonic() - started < 5 + vyre_stalls.since(started), vyre_stalls
    assert f"something answers at {address}, but not a Ray head" in str(err.value)
    assert "it said b'HTTP/1.0 '" in str(err.value) and "Fix: Name the Ray head's own port" \
        in str(err.value)


def test_a_private_instance_leaves_no_process_or_file_behind(tmp_path):
    """Ray left to itself writes an authentication token into ~/.ray/auth_token for a
    private instance, and leaves it; vyre gives the instance a token in its environment."""
    home = tmp_path / "home"
    home.mkdir()
    child = Child(tmp_path, f"""
import json, os, psutil
for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
    os.environ.pop(key, None)
os.environ["HOME"] = {str(home)!r}
from vyre_core import Driver
from vyre_examples.saxpy import inputs, program
with Driver(cluster="ray") as drv:
    out, = drv.dispatch(program(256), inputs(256), backend="reference")
    ray_pids = [p.pid for p in psutil.Process().children(recursive=True)]
    mode = os.environ.get("RAY_AUTH_MODE")
print(json.dumps({{"ray": len(ray_pids), "mode": mode, "after": [
    p.pid for p in psutil.Process().children(recursive=True) if p.is_running()
    and p.status() != psutil.STATUS_ZOMBIE], "env": os.environ.get("RAY_AUTH_TOKEN")}}),
    flush=True)
""")
    try:
        report = child.report(120)
    finally:
        child.stop()
    assert report["ray"] >= 3 and report["after"] == []
    assert report["mode"] == "token" and report["env"] is None  # (authenticated; undone)
    assert list(home.iterdir()) == [] and "Token authentication" not in child.stderr()


def test_drivers_of_one_process_share_its_connection_and_only_the_last_lets_go(cluster):
    program, data = saxpy(64), saxpy_inputs(64)
    first, second = on(cluster), on(cluster)
    try:
        with pytest.raises(InvalidConfigError, match="already runs Drivers on the Ray cluster"):
            Driver(cluster="ray")
        first.dispatch(program, data, backend="reference")
        first.close()
        assert second.dispatch(program, data, backend="reference")[0].nbytes == 4 * 64
        with pytest.raises(PoolFailedError, match="the driver is closed"):
            first.dispatch(program, data, backend="faults")
    finally:
        first.close()
        second.close()
    import ray

    assert not ray.is_initialized()


def test_resident_buffers_out_arrays_and_a_standby_spare_on_ray(cluster):
    n = 64
    program, data = saxpy(n), saxpy_inputs(n, 11)
    x, y, a = data
    expected = (a[0] * x + y).astype(np.float32)
    with on(cluster, standby=1) as drv:
        mine = np.empty(n, np.float32)
        drv.dispatch(program, data, backend="faults", out=[mine])
        assert mine.tobytes() == expected.tobytes()
        buffer = drv.allocate_resident(4 * n, backend="faults")
        buffer.upload(x)
        assert buffer.download() == x.tobytes()
        wait_for(lambda: drv.status()["pools"]["faults"]["standby"] == 1, 30, "the spare")
        serving = drv.status()["pools"]["faults"]["workers"][0]
        os.kill(serving["pid"], signal.SIGKILL)
        promoted = wait_for(lambda: (w := drv.status()["pools"]["faults"]["workers"][0])[
            "generation"] == 2 and w["state"] == "idle" and w, 30, "the spare to take over")
        assert promoted["pid"] != serving["pid"]
        assert drv.dispatch(program, data, backend="faults")[0].tobytes() == expected.tobytes()
        with pytest.raises(PipelineInvalidatedError):
            buffer.download()


def test_a_forked_child_is_refused_the_parents_connection_and_closes_without_hanging(
        cluster, tmp_path):
    child = Child(tmp_path, f"""
import json, os
from vyre_core import Driver
from vyre_core.errors import ClusterUnavailableError
from vyre_examples.saxpy import inputs, program
drv = Driver(cluster={cluster.address!r})
drv.dispatch(program(64), inputs(64), backend="reference")
pid = os.fork()
if pid == 0:
    try:
        drv.dispatch(program(64), inputs(64), backend="faults")
        said = "it ran"
    except ClusterUnavailableError as exc:
        said = str(exc)
    drv.close()
    print(json.dumps({{"child": said}}), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
out, = drv.dispatch(program(64), inputs(64), backend="reference")
drv.close()
print(json.dumps({{"parent": int(out.nbytes)}}), flush=True)
""")
    try:
        said = child.report(60)["child"]
        parent = child.report(60)["parent"]
    finally:
        child.stop()
    assert "forked child cannot use it" in said and "spawn" in said
    assert parent == 4 * 64


def test_the_conformance_corpus_passes_through_a_ray_pool(cluster):
    with on(cluster) as drv:
        caps = drv.probe("faults")
        results = [run_case(drv, "faults", caps, case)
                   for case in [*CASES, *honesty.probes(caps)]]
    failed = [r.to_dict() for r in results if not r.ok]
    assert len(results) > 100 and failed == []
