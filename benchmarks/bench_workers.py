"""Worker-process figures: what going through a supervised worker costs, each next to a
baseline measured in the same run.

- empty-dispatch round trip (p50, p99) against a raw pyzmq DEALER/ROUTER echo of a
  dispatch request's header (``codec.encode``) through a subprocess on ipc://, and the p50 against
  ``ProcessPoolExecutor(max_workers=1).submit(noop).result()``;
- the same three on the do-nothing ``null`` backend (``benchmarks/vyre-null``, pip-installed
  offline into a temporary folder for the measurement): the boundary's own cost, with no
  interpreter behind it; and its p50 against the *bare path*: the same hops with no vyre
  code (a caller thread hands to an I/O thread by eventfd, which echoes through a worker
  process on a socketpair), so the ratio is what vyre's own Python costs per call;
- a 64 MiB read_write buffer round trip against ``np.copyto`` of the same bytes (MB/s of
  the buffer's size), and the same buffer made with ``Driver.empty`` and written back
  into itself (only descriptors cross) against that copied round trip;
- read_write round trips of 1, 16, 64 MiB and 1 GiB counting the bytes in and out (twice
  the size per round trip), each against ``np.copyto`` of the same bytes into a
  pre-faulted buffer (MB/s of one copy);
- the parent's RSS growth over one dispatch of a 1 GiB read-only input (MiB), against the
  input's own size: below 1x, the input was not copied into the parent's memory;
- recovery from a SIGKILLed idle worker to the first successful dispatch (p50) against a
  cold start (new driver to its first dispatch), and the same with a hot standby
  (``standby=1``) against without;
- CPU-bound throughput with 1 and 2 workers (4 client threads) against the same
  dispatches in-process on ``vyre_reference.run`` in one thread;
- tiny (empty) dispatches per second on 2 workers from 1, 2 and 4 client threads, against
  ``ProcessPoolExecutor(max_workers=2)`` noop submits from as many threads for as long.

The harness reports one figure per function, so p50 and p99 of one measurement are two
entries sharing a cached sample (and so are the two 64 MiB figures). Every function leaves
no process, temporary folder or environment change behind.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib
import os
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import psutil
import zmq

from vyre_benchmarks.harness import (
    Result,
    echo_process,
    percentile,
    reps,
    samples,
    threaded_rate,
)
from vyre_core import ir
from vyre_core.boundary import codec
from vyre_core.boundary.messages import Dispatch, Message
from vyre_core.config import DispatchConfig
from vyre_core.driver import Driver
from vyre_core.registry import SELECT_ENV, Registry
from vyre_core.supervisor.options import RestartPolicy

REQUIRES = ("reference",)
BACKEND = "reference"  # named, so a GPU on the machine never changes what is measured
ROUND_TRIPS = 2000
WARMUP = 200
MIB = 1 << 20
GIB = 1 << 30
BIG_BYTES = 64 * MIB
BIG_REPEAT = 5
#: read_write round-trip size -> (timed round trips, warm-up round trips before them), in
#: full and in quick mode. The first round trip's bytes are checked (outside the timing).
#: 1 GiB: few, each takes seconds; quick mode times (and checks) one cold round trip.
ROUND_TRIP_SIZES = {
    MIB: ((200, 20), (10, 20)),
    16 * MIB: ((20, 2), (1, 2)),
    BIG_BYTES: ((BIG_REPEAT, 1), (1, 1)),
    GIB: ((2, 1), (1, 0)),
}
COMPARE_CHUNK = 64 * MIB  # exact-bytes checks compare this much at a time (no 1 GiB copies)
NULL = "null"  # the do-nothing backend of benchmarks/vyre-null
NULL_DISTRIBUTION = Path(__file__).parent / "vyre-null"
KILLS = 5
THROUGHPUT_SECONDS = 2.0
CLIENT_THREADS = 4
SPIN_ITERATIONS = 3000  # ~10 ms per dispatch on the reference interpreter
TINY_SECONDS = 2.0
TINY_WORKERS = 2


def latencies(fn: Callable[[], object], n: int, warmup: int = WARMUP) -> list[float]:
    """``samples`` with this suite's warm-up, both shrunk in quick mode."""
    return samples(fn, reps(n, max(1, n // 20)), reps(warmup, min(warmup, 20)))


# -- programs -----------------------------------------------------------------------------------


def empty_program() -> ir.Program:
    """One store of a literal into a 1-element output."""
    k = ir.Kernel(workgroup=(1,))
    out = k.output("out", ir.u32, 1)
    out[0] = 7
    return k.build()


def copy_program() -> ir.Program:
    """A runtime-sized read_write buffer returned as it came (one invocation touches it)."""
    k = ir.Kernel(workgroup=(1,))
    buf = k.read_write("buf", ir.u32)
    buf[0] = buf[0]
    return k.build()


def last_element_program() -> ir.Program:
    """A runtime-sized read-only input whose last element is stored into a 1-element
    output: the input crosses to the worker, almost nothing comes back."""
    k = ir.Kernel(workgroup=(1,))
    x = k.read("x", ir.u32)
    out = k.output("out", ir.u32, 1)
    out[0] = x[x.len - 1]
    return k.build()


def spin_program(iterations: int = SPIN_ITERATIONS) -> ir.Program:
    """One invocation looping ``iterations`` times: CPU-bound on the reference."""
    k = ir.Kernel(workgroup=(1,))
    out = k.output("out", ir.u32, 1)
    acc = k.let("acc", ir.lit(0, ir.u32))
    with k.loop("j", 0, iterations) as j:
        k.assign(acc, acc + j)
    out[0] = acc
    return k.build()


# -- empty dispatch round trip ------------------------------------------------------------------

_ECHO_SERVER = """
import sys, zmq
ctx = zmq.Context()
sock = ctx.socket(zmq.ROUTER)
sock.setsockopt(zmq.LINGER, 0)
sock.bind(sys.argv[1])
sys.stdout.write("ready\\n"); sys.stdout.flush()
while True:
    frames = sock.recv_multipart(copy=False)
    if frames[1].bytes == b"stop":
        break
    sock.send_multipart(frames, copy=False)
sock.close(); ctx.term()
"""


def _bare_path_latencies(payload: bytes, n: int) -> list[float]:
    """Round trips of ``payload`` along the Driver's path with no vyre code on it: this
    thread hands it to an I/O thread (an eventfd), which sends it on a socketpair to a
    worker process that echoes it; the I/O thread reads the echo and wakes this thread
    (an eventfd). What the threads and the process cost by themselves."""
    with echo_process() as lane:
        return _bare_path(lane, payload, n)


def _bare_path(ours: socket.socket, payload: bytes, n: int) -> list[float]:
    handed, answered = os.eventfd(0), os.eventfd(0)

    def io_thread() -> None:
        poller = select.poll()
        poller.register(handed, select.POLLIN)
        poller.register(ours, select.POLLIN)
        echoed = 0
        while True:
            for fd, _ in poller.poll():
                if fd == handed:
                    if os.eventfd_read(handed) > 1 << 40:
                        return
                    ours.sendall(payload)
                else:
                    echoed += len(ours.recv(1 << 16))
                    if echoed == len(payload):  # (the whole echo: a stream may split it)
                        echoed = 0
                        os.eventfd_write(answered, 1)

    thread = threading.Thread(target=io_thread, name="bench-bare-io", daemon=True)
    thread.start()
    waiting = select.poll()
    waiting.register(answered, select.POLLIN)

    def call() -> None:
        os.eventfd_write(handed, 1)
        waiting.poll()
        os.eventfd_read(answered)

    try:
        return latencies(call, n)
    finally:
        os.eventfd_write(handed, 1 << 41)
        thread.join(10)
        os.close(handed)
        os.close(answered)


def _dispatch_header(program: ir.Program) -> bytes:
    """The header of a dispatch request as the Driver encodes it (``codec.encode``)."""
    body = Dispatch(program.fingerprint(), program.to_wire(), DispatchConfig().to_wire())
    return bytes(codec.encode(Message(body, 123456, 1))[0])


def _echo_latencies(payload: bytes, n: int) -> list[float]:
    """Round trips of ``payload`` through a DEALER -> ROUTER echo in a subprocess (ipc://)."""
    with tempfile.TemporaryDirectory(prefix="vyre-bench-") as tmp:
        endpoint = f"ipc://{Path(tmp) / 'echo.sock'}"
        server = subprocess.Popen([sys.executable, "-c", _ECHO_SERVER, endpoint],
                                  stdout=subprocess.PIPE, text=True)
        context = zmq.Context()
        dealer = context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        try:
            assert server.stdout.readline().strip() == "ready"
            dealer.connect(endpoint)

            def echo() -> None:
                dealer.send(payload)
                dealer.recv(copy=False)

            found = latencies(echo, n)
            dealer.send(b"stop")
            server.wait(timeout=10)
            return found
        finally:
            dealer.close(linger=0)
            context.term()
            if server.poll() is None:
                server.kill()
            server.wait()
            server.stdout.close()


def noop() -> None:
    return None


@functools.cache
def _round_trip_samples() -> dict[str, list[float]]:
    """Driver empty dispatch, raw zmq echo and ProcessPoolExecutor samples, one run."""
    program = empty_program()
    with Driver() as driver:
        driver.dispatch(program, [], backend=BACKEND)
        found = {"driver": latencies(lambda: driver.dispatch(program, [], backend=BACKEND),
                                     ROUND_TRIPS)}
    found["echo"] = _echo_latencies(_dispatch_header(program), ROUND_TRIPS)
    with ProcessPoolExecutor(max_workers=1) as pool:
        found["executor"] = latencies(lambda: pool.submit(noop).result(), ROUND_TRIPS)
    return found


def empty_dispatch_p50() -> Result:
    s = _round_trip_samples()
    return Result("empty dispatch round trip p50", percentile(s["driver"], 50) * 1e6, "us",
                  "raw zmq ipc echo p50", percentile(s["echo"], 50) * 1e6)


def empty_dispatch_p99() -> Result:
    s = _round_trip_samples()
    return Result("empty dispatch round trip p99", percentile(s["driver"], 99) * 1e6, "us",
                  "raw zmq ipc echo p99", percentile(s["echo"], 99) * 1e6)


def empty_dispatch_vs_executor_p50() -> Result:
    s = _round_trip_samples()
    return Result("empty dispatch round trip p50 (vs executor)",
                  percentile(s["driver"], 50) * 1e6, "us", "ProcessPoolExecutor noop p50",
                  percentile(s["executor"], 50) * 1e6)


# -- the do-nothing backend --------------------------------------------------------------------


@contextlib.contextmanager
def null_backend_installed() -> Iterator[Path]:
    """The ``vyre-null`` distribution pip-installed (offline, no dependencies) into a
    temporary folder that is on the path of this process and of every worker started
    meanwhile (``PYTHONPATH``): as ``tests/faults/conftest.py`` installs ``vyre-faults``.
    It is built from a copy, so no build output lands in the source tree; afterwards the
    paths, the environment and the imported module are as before, the folder gone."""
    if not (NULL_DISTRIBUTION / "pyproject.toml").is_file():
        raise FileNotFoundError(f"the vyre-null distribution is not at {NULL_DISTRIBUTION} "
                                "(run the benchmarks from a source checkout)")
    with tempfile.TemporaryDirectory(prefix="vyre-bench-null-") as tmp:
        source, site = Path(tmp) / "vyre-null", Path(tmp) / "site"
        shutil.copytree(NULL_DISTRIBUTION, source, ignore=shutil.ignore_patterns(
            "build", "*.egg-info", "__pycache__"))
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
             "--no-index", "--no-cache-dir", "--disable-pip-version-check", "--quiet",
             "--target", str(site), str(source)], capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"pip could not install vyre-null: {proc.stdout}{proc.stderr}")
        old_path = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), old_path]))
        sys.path.insert(0, str(site))
        importlib.invalidate_caches()
        try:
            yield site
        finally:
            sys.path.remove(str(site))
            sys.path_importer_cache.pop(str(site), None)
            sys.modules.pop("vyre_null", None)
            importlib.invalidate_caches()
            if old_path is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = old_path


def _registry_with_null() -> Registry:
    """The installed backends, ``null`` among them even where ``VYRE_LOAD_PLUGINS``
    selects others (the environment itself is left alone)."""
    selected = os.environ.get(SELECT_ENV)
    registry = Registry.discover(None if selected is None else f"{selected},{NULL}")
    if NULL not in registry.ids():
        broken = [p.error for p in registry.broken if p.name == NULL]
        raise RuntimeError(f"the {NULL!r} backend did not register"
                           + (f": {broken[0]}" if broken else " (not found on the path)"))
    return registry


@functools.cache
def _null_samples() -> dict[str, list[float]]:
    """Empty dispatches on the do-nothing backend, raw zmq echo and ProcessPoolExecutor
    samples, one run."""
    program = empty_program()
    with null_backend_installed(), Driver(_registry_with_null()) as driver:
        out, = driver.dispatch(program, [], backend=NULL)
        assert out.tolist() == [0], out  # the null backend ran, not the reference (7)
        found = {"driver": latencies(lambda: driver.dispatch(program, [], backend=NULL),
                                     ROUND_TRIPS)}
    found["echo"] = _echo_latencies(_dispatch_header(program), ROUND_TRIPS)
    found["bare"] = _bare_path_latencies(_dispatch_header(program), ROUND_TRIPS)
    with ProcessPoolExecutor(max_workers=1) as pool:
        found["executor"] = latencies(lambda: pool.submit(noop).result(), ROUND_TRIPS)
    return found


def null_dispatch_vs_bare_path_p50() -> Result:
    s = _null_samples()
    return Result("empty dispatch round trip p50, null backend (vs the bare path)",
                  percentile(s["driver"], 50) * 1e6, "us",
                  "the same threads and process, no vyre code, p50",
                  percentile(s["bare"], 50) * 1e6)


def null_dispatch_p50() -> Result:
    s = _null_samples()
    return Result("empty dispatch round trip p50, null backend", percentile(s["driver"], 50) * 1e6,
                  "us", "raw zmq ipc echo p50", percentile(s["echo"], 50) * 1e6)


def null_dispatch_p99() -> Result:
    s = _null_samples()
    return Result("empty dispatch round trip p99, null backend", percentile(s["driver"], 99) * 1e6,
                  "us", "raw zmq ipc echo p99", percentile(s["echo"], 99) * 1e6)


def null_dispatch_vs_executor_p50() -> Result:
    s = _null_samples()
    return Result("empty dispatch round trip p50, null backend (vs executor)",
                  percentile(s["driver"], 50) * 1e6, "us", "ProcessPoolExecutor noop p50",
                  percentile(s["executor"], 50) * 1e6)


# -- read_write round trips ---------------------------------------------------------------------


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` hold exactly the same bytes, compared a chunk at a time."""
    a, b = a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8)
    return a.size == b.size and all(
        np.array_equal(a[i:i + COMPARE_CHUNK], b[i:i + COMPARE_CHUNK])
        for i in range(0, a.size, COMPARE_CHUNK))


def _size_name(nbytes: int) -> str:
    return f"{nbytes // GIB} GiB" if nbytes >= GIB else f"{nbytes // MIB} MiB"


@functools.cache
def _round_trip_seconds(nbytes: int) -> tuple[float, float]:
    """Median seconds of one round trip of an ``nbytes`` read_write buffer through a
    worker (the first one's bytes checked), and of one ``np.copyto`` of the same bytes
    into a pre-faulted buffer. Every result is dropped before the next round trip."""
    repeat, warmup = reps(*ROUND_TRIP_SIZES[nbytes])
    program = copy_program()
    config = DispatchConfig(grid_override=(1,))
    data = np.arange(nbytes // 4, dtype=np.uint32)
    timed = []
    with Driver() as driver:
        driver.dispatch(program, [data[:16]], backend=BACKEND, config=config)  # the worker is up
        for i in range(warmup + repeat):
            start = time.perf_counter()
            out, = driver.dispatch(program, [data], backend=BACKEND, config=config)
            elapsed = time.perf_counter() - start
            if i == 0:
                assert _same_bytes(out, data), f"a {_size_name(nbytes)} round trip changed bytes"
            del out  # its segment goes back before the next round trip
            if i >= warmup:
                timed.append(elapsed)
    target = np.empty_like(data)
    target.fill(1)  # every page faulted in before the first timed copy
    copy = statistics.median(latencies(lambda: np.copyto(target, data), repeat, warmup=1))
    return statistics.median(timed), copy


def big_round_trip() -> Result:
    """MB/s of a 64 MiB read_write buffer through a worker and back, against np.copyto."""
    seconds, copy = _round_trip_seconds(BIG_BYTES)
    megabytes = BIG_BYTES / 1e6
    return Result("64 MiB read_write round trip", megabytes / seconds, "MB/s",
                  "np.copyto 64 MiB", megabytes / copy)


@functools.cache
def _zero_copy_seconds(nbytes: int) -> float:
    """Median seconds of one round trip of an ``nbytes`` read_write buffer made with
    ``Driver.empty`` (``asarray``) and written back into itself (``out=``): only its
    descriptor crosses, and the worker updates it in place. The first one's bytes are
    checked; as many round trips as ``_round_trip_seconds`` times."""
    repeat, warmup = reps(*ROUND_TRIP_SIZES[nbytes])
    program = copy_program()
    config = DispatchConfig(grid_override=(1,))
    expected = np.arange(nbytes // 4, dtype=np.uint32)
    timed = []
    with Driver() as driver:
        data = driver.asarray(expected)
        driver.dispatch(program, [expected[:16]], backend=BACKEND,
                        config=config)  # the worker is up
        for i in range(warmup + repeat):
            start = time.perf_counter()
            driver.dispatch(program, [data], backend=BACKEND, config=config, out=[data])
            elapsed = time.perf_counter() - start
            if i == 0:
                assert _same_bytes(data, expected), "a zero-copy round trip changed bytes"
            if i >= warmup:
                timed.append(elapsed)
    return statistics.median(timed)


def zero_copy_round_trip() -> Result:
    """MB/s of a 64 MiB read_write buffer from ``Driver.empty`` through a worker and back
    into itself, against the copied path of ``big_round_trip`` in the same run."""
    copied, _ = _round_trip_seconds(BIG_BYTES)
    megabytes = BIG_BYTES / 1e6
    return Result("64 MiB read_write round trip, an array of Driver.empty (out=)",
                  megabytes / _zero_copy_seconds(BIG_BYTES), "MB/s",
                  "the copied path (workers.big_round_trip)", megabytes / copied)


def _round_trip_in_out(nbytes: int) -> Result:
    """MB/s moved by a read_write round trip, counting the bytes in and out (twice the
    size), against the MB/s of one np.copyto of the size."""
    seconds, copy = _round_trip_seconds(nbytes)
    megabytes, name = nbytes / 1e6, _size_name(nbytes)
    return Result(f"{name} read_write round trip (in+out)", 2 * megabytes / seconds, "MB/s",
                  f"np.copyto {name} (pre-faulted)", megabytes / copy)


def round_trip_1mib() -> Result:
    return _round_trip_in_out(MIB)


def round_trip_16mib() -> Result:
    return _round_trip_in_out(16 * MIB)


def round_trip_64mib() -> Result:
    return _round_trip_in_out(BIG_BYTES)


def round_trip_1gib() -> Result:
    return _round_trip_in_out(GIB)


# -- parent memory ------------------------------------------------------------------------------


def rss_growth_1gib_input() -> Result:
    """MiB the parent's RSS grows over one dispatch of a 1 GiB read-only input (result
    dropped, garbage collected), against the input's own size."""
    program = last_element_program()
    data = np.arange(GIB // 4, dtype=np.uint32)  # written: resident before the first reading
    warm = np.arange(MIB // 4, dtype=np.uint32)  # small, but through shared memory too
    process = psutil.Process()
    with Driver() as driver:
        out, = driver.dispatch(program, [warm], backend=BACKEND)
        assert out[0] == warm[-1]
        del out
        gc.collect()
        before = process.memory_info().rss
        out, = driver.dispatch(program, [data], backend=BACKEND)
        assert out[0] == data[-1]
        del out
        gc.collect()
        after = process.memory_info().rss
    return Result("parent RSS growth, one dispatch of a 1 GiB input", (after - before) / MIB,
                  "MiB", "the input's own size", data.nbytes / MIB)


# -- recovery -------------------------------------------------------------------------------------


def _recoveries(standby: int, kills: int, backend: str = BACKEND) -> list[float]:
    """Seconds from SIGKILL of the idle serving worker to the next successful dispatch,
    each kill made once ``standby`` spares are ready."""
    program = empty_program()
    recoveries = []
    with Driver(restart=RestartPolicy(max_restarts=kills + 5), standby=standby) as driver:
        driver.dispatch(program, [], backend=backend)
        for _ in range(kills):
            deadline = time.monotonic() + 60
            while driver.status()["pools"][backend]["standby"] < standby:
                if time.monotonic() > deadline:
                    raise RuntimeError("no spare became ready within 60 s")
                time.sleep(0.01)
            worker = driver.status()["pools"][backend]["workers"][0]
            victim = psutil.Process(worker["pid"])
            start = time.perf_counter()
            os.kill(victim.pid, signal.SIGKILL)
            driver.dispatch(program, [], backend=backend)
            recoveries.append(time.perf_counter() - start)
            victim.wait(timeout=10)
    return recoveries


def recovery_after_kill_standby() -> Result:
    """ms from SIGKILL of the serving worker to the next success with ``standby=1``, p50,
    against the same without a spare."""
    kills = reps(KILLS, 2)
    return Result("SIGKILLed worker -> next dispatch p50, standby=1",
                  statistics.median(_recoveries(1, kills)) * 1e3, "ms",
                  "the same without a spare (standby=0)",
                  statistics.median(_recoveries(0, kills)) * 1e3)


def recovery_after_kill() -> Result:
    """ms from SIGKILL of an idle worker to the first successful dispatch, p50."""
    program = empty_program()
    kills = reps(KILLS, 2)
    recoveries = _recoveries(0, kills)
    cold = []
    for _ in range(kills):
        start = time.perf_counter()
        with Driver() as driver:
            driver.dispatch(program, [], backend=BACKEND)
            cold.append(time.perf_counter() - start)
    return Result("SIGKILLed idle worker -> first dispatch p50",
                  statistics.median(recoveries) * 1e3, "ms",
                  "cold start: new Driver -> first dispatch p50", statistics.median(cold) * 1e3)


def recovery_after_kill_cpu() -> Result:
    """ms from SIGKILL of an idle cpu worker to the next success, p50, against the same on
    the reference backend: what the cpu backend's own start adds (its fork server has
    imported numba before it forks: entry points ``vyre.preload``)."""
    kills = reps(KILLS, 2)
    return Result("SIGKILLed idle cpu worker -> next dispatch p50",
                  statistics.median(_recoveries(0, kills, "cpu")) * 1e3, "ms",
                  "the same on the reference backend",
                  statistics.median(_recoveries(0, kills)) * 1e3)


# -- throughput -----------------------------------------------------------------------------------


def _in_process_rate(program: ir.Program, seconds: float) -> float:
    from vyre_reference import run

    run(program, [])
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        run(program, [])
        count += 1
    return count / (time.perf_counter() - start)


def _driver_rate(program: ir.Program, workers: int, seconds: float,
                 threads: int = CLIENT_THREADS) -> float:
    with Driver(workers=workers) as driver:
        warm = [driver.dispatch_async(program, [], backend=BACKEND) for _ in range(workers)]
        for pending in warm:
            pending.result()
        return threaded_rate(lambda: driver.dispatch(program, [], backend=BACKEND), threads,
                             seconds)


def _throughput(workers: int) -> Result:
    program = spin_program()
    seconds = reps(THROUGHPUT_SECONDS, 0.25)
    rate = _driver_rate(program, workers, seconds)
    baseline = _in_process_rate(program, seconds)
    return Result(f"CPU-bound dispatches/s, {workers} worker{'s' * (workers > 1)}, "
                  f"{CLIENT_THREADS} threads", rate, "1/s", "in-process reference, 1 thread",
                  baseline)


def throughput_1_worker() -> Result:
    return _throughput(1)


def throughput_2_workers() -> Result:
    return _throughput(2)


def _executor_rate(workers: int, threads: int, seconds: float) -> float:
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for pending in [pool.submit(noop) for _ in range(2 * workers)]:
            pending.result()
        return threaded_rate(lambda: pool.submit(noop).result(), threads, seconds)


def _tiny_rate(threads: int) -> Result:
    seconds = reps(TINY_SECONDS, 0.25)
    rate = _driver_rate(empty_program(), TINY_WORKERS, seconds, threads)
    baseline = _executor_rate(TINY_WORKERS, threads, seconds)
    plural = "s" * (threads > 1)
    return Result(f"empty dispatches/s, {TINY_WORKERS} workers, {threads} thread{plural}", rate,
                  "1/s", f"ProcessPoolExecutor({TINY_WORKERS}) noop submits/s, {threads} "
                  f"thread{plural}", baseline)


def tiny_rate_1_thread() -> Result:
    return _tiny_rate(1)


def tiny_rate_2_threads() -> Result:
    return _tiny_rate(2)


def tiny_rate_4_threads() -> Result:
    return _tiny_rate(4)


BENCHMARKS = [empty_dispatch_p50, empty_dispatch_p99, empty_dispatch_vs_executor_p50,
              null_dispatch_p50, null_dispatch_p99, null_dispatch_vs_executor_p50,
              null_dispatch_vs_bare_path_p50,
              big_round_trip, zero_copy_round_trip, round_trip_1mib, round_trip_16mib,
              round_trip_64mib, round_trip_1gib, rss_growth_1gib_input, recovery_after_kill,
              recovery_after_kill_standby, recovery_after_kill_cpu,
              throughput_1_worker, throughput_2_workers, tiny_rate_1_thread,
              tiny_rate_2_threads, tiny_rate_4_threads]
