"""Worker-process figures: what going through a supervised worker costs, each next to a
baseline measured in the same run.

- empty-dispatch round trip (p50, p99) against a raw pyzmq DEALER/ROUTER echo of a
  similarly sized msgpack header through a subprocess on ipc://, and the p50 against
  ``ProcessPoolExecutor(max_workers=1).submit(noop).result()``;
- a 64 MiB read_write buffer round trip against ``np.copyto`` of the same bytes (MB/s);
- recovery from a SIGKILLed idle worker to the first successful dispatch (p50) against a
  cold start (new driver to its first dispatch);
- CPU-bound throughput with 1 and 2 workers (4 client threads) against the same
  dispatches in-process on ``vyre_reference.run`` in one thread.

The harness reports one figure per function, so p50 and p99 of one measurement are two
entries sharing a cached sample. Every function leaves no process behind.
"""

from __future__ import annotations

import functools
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import msgpack
import numpy as np
import psutil
import zmq

from vyre_benchmarks.harness import Result, percentile, reps, samples
from vyre_core import ir
from vyre_core.config import DispatchConfig
from vyre_core.driver import Driver

REQUIRES = ("reference",)
BACKEND = "reference"  # named, so a GPU on the machine never changes what is measured
ROUND_TRIPS = 2000
WARMUP = 200
BIG_BYTES = 64 * 1024 * 1024
BIG_REPEAT = 5
KILLS = 5
THROUGHPUT_SECONDS = 2.0
CLIENT_THREADS = 4
SPIN_ITERATIONS = 3000  # ~10 ms per dispatch on the reference interpreter


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


def _dispatch_header(program: ir.Program) -> bytes:
    """A msgpack header the size of the Driver's dispatch request header."""
    return msgpack.packb({"v": 1, "op": "dispatch", "id": 123456, "gen": 1, "meta": {
        "program": program.to_wire(), "config": DispatchConfig().to_dict(), "label": None},
        "arrays": []}, use_bin_type=True)


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
        driver.dispatch(program, [], BACKEND)
        found = {"driver": latencies(lambda: driver.dispatch(program, [], BACKEND), ROUND_TRIPS)}
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


# -- 64 MiB round trip --------------------------------------------------------------------------


def big_round_trip() -> Result:
    """MB/s of a 64 MiB read_write buffer through a worker and back, against np.copyto."""
    program = copy_program()
    data = np.arange(BIG_BYTES // 4, dtype=np.uint32)
    config = DispatchConfig(grid_override=(1,))
    with Driver() as driver:
        out, = driver.dispatch(program, [data], BACKEND, config)
        assert out.tobytes() == data.tobytes()
        del out
        seconds = statistics.median(latencies(
            lambda: driver.dispatch(program, [data], BACKEND, config), BIG_REPEAT, warmup=1))
    target = np.empty_like(data)
    copy = statistics.median(latencies(lambda: np.copyto(target, data), BIG_REPEAT, warmup=1))
    megabytes = BIG_BYTES / 1e6
    return Result("64 MiB read_write round trip", megabytes / seconds, "MB/s",
                  "np.copyto 64 MiB", megabytes / copy)


# -- recovery -------------------------------------------------------------------------------------


def recovery_after_kill() -> Result:
    """ms from SIGKILL of an idle worker to the first successful dispatch, p50."""
    program = empty_program()
    recoveries, kills = [], reps(KILLS, 2)
    with Driver(max_restarts=kills + 5) as driver:
        driver.dispatch(program, [], BACKEND)
        for _ in range(kills):
            worker, = driver.status()["pools"][BACKEND]["workers"]
            victim = psutil.Process(worker["pid"])
            start = time.perf_counter()
            os.kill(victim.pid, signal.SIGKILL)
            driver.dispatch(program, [], BACKEND)
            recoveries.append(time.perf_counter() - start)
            victim.wait(timeout=10)
    cold = []
    for _ in range(kills):
        start = time.perf_counter()
        with Driver() as driver:
            driver.dispatch(program, [], BACKEND)
            cold.append(time.perf_counter() - start)
    return Result("SIGKILLed idle worker -> first dispatch p50",
                  statistics.median(recoveries) * 1e3, "ms",
                  "cold start: new Driver -> first dispatch p50", statistics.median(cold) * 1e3)


# -- throughput -----------------------------------------------------------------------------------


def _in_process_rate(program: ir.Program, seconds: float) -> float:
    from vyre_reference import run

    run(program, [])
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        run(program, [])
        count += 1
    return count / (time.perf_counter() - start)


def _driver_rate(program: ir.Program, workers: int, seconds: float) -> float:
    with Driver(workers=workers) as driver:
        warm = [driver.dispatch_async(program, [], BACKEND) for _ in range(workers)]
        for pending in warm:
            pending.result()
        count = [0] * CLIENT_THREADS
        start = time.perf_counter()
        stop = start + seconds

        def client(index: int) -> None:
            while time.perf_counter() < stop:
                driver.dispatch(program, [], BACKEND)
                count[index] += 1

        threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENT_THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sum(count) / (time.perf_counter() - start)


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


BENCHMARKS = [empty_dispatch_p50, empty_dispatch_p99, empty_dispatch_vs_executor_p50,
              big_round_trip, recovery_after_kill, throughput_1_worker, throughput_2_workers]
