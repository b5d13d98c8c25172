"""Callers interrupted anywhere, and calls cancelled (issue 37, items 1 and 2), with real
workers. Each scenario runs in a child Python (``child_process.Child``): signals and async
exceptions are thrown into its main thread, or a real SIGINT into its process group."""

from __future__ import annotations

import os
import random
import time

import numpy as np
import pytest
from child_process import Child

import vyre_core as vyre
from vyre_core import Timeouts, i32, u32
from vyre_core.errors import DispatchCancelledError

from .child_script import PRELUDE
from .support import wait_for

pytestmark = pytest.mark.processes

FOREVER = 2**31 - 1  # loop trips: it runs until cancelled


@vyre.kernel(workgroup=(64,))
def spin(trips: vyre.Array[u32], out: vyre.Array[u32]):
    i = vyre.global_id(0)
    acc = u32(i)
    for k in range(i32(trips[0])):
        acc = acc * u32(1664525) + u32(1013904223) + u32(k)
    out[i] = acc


def expected(trips: int) -> bytes:
    acc = np.arange(256, dtype=np.uint64)
    for k in range(trips):
        acc = (acc * 1664525 + 1013904223 + k) % 2**32
    return acc.astype(np.uint32).tobytes()


def start(script: str, tmp_path) -> Child:
    return Child(tmp_path, PRELUDE + script)


# -- 1,000 exceptions thrown into a dispatching thread -------------------------------------

INTERRUPTIONS = """
import ctypes, random
KIND = sys.argv[1] if len(sys.argv) > 1 else os.environ["KIND"]

class Injected(Exception):
    pass

drv = vyre_core.Driver(timeouts=vyre_core.Timeouts(kill_grace=0.5))
drv.dispatch(PROGRAM, INPUTS, backend="reference")
(w,) = workers(drv, "reference")
landed, calls, exact, other, strays = 0, 0, True, [], 0
zone = [False]
main = threading.main_thread().ident
stop = threading.Event()
caught = threading.Event()  # (the main thread caught the last one thrown)

def inject():  # another thread throws an exception into the main thread, at random moments
    rng = random.Random(5)
    while not stop.is_set():
        time.sleep(rng.uniform(0, 0.002))  # (a random moment, not a wait)
        if zone[0]:
            caught.clear()
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(main),
                                                       ctypes.py_object(Injected))
            caught.wait()  # one at a time

def on_alarm(signum, frame):
    if zone[0]:
        raise Injected

if KIND == "alarm":
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 0.002, 0.003)
else:
    threading.Thread(target=inject, daemon=True).start()
started = time.monotonic()
while landed < 1000:
    try:  # (an exception landing outside the inner block is counted as a stray)
        try:
            zone[0] = True
            out = drv.dispatch(PROGRAM, INPUTS, backend="reference",
                               config=DispatchConfig(timeout=20))
            zone[0] = False
            calls += 1
            exact &= out[0].tobytes() == EXPECTED
        except Injected:
            zone[0] = False
            landed += 1
            caught.set()
        except BaseException as exc:  # never another class, never another call's
            zone[0] = False
            other.append(f"{type(exc).__name__}: {exc}")
            if len(other) > 5:
                break
    except Injected:
        zone[0] = False
        strays += 1
        landed += 1
        caught.set()
    if time.monotonic() - started > 150:
        break
signal.setitimer(signal.ITIMER_REAL, 0)
stop.set()
caught.set()
zone[0] = False
start = time.monotonic()
last = drv.dispatch(PROGRAM, INPUTS, backend="reference")[0].tobytes() == EXPECTED
pool = drv.status()["pools"]["reference"]
report(landed=landed, calls=calls, exact=exact, other=other, strays=strays, last=last,
       last_seconds=time.monotonic() - start, state=pool["state"], restarts=pool["restarts"],
       queued=pool["queued"], busy=[x["state"] for x in pool["workers"]],
       seconds=time.monotonic() - started)
drv.close()
"""


@pytest.mark.timeout(240)
@pytest.mark.parametrize("kind", ["alarm", "async"])
def test_a_thousand_exceptions_thrown_into_a_dispatching_thread(tmp_path, kind, monkeypatch):
    """A SIGALRM handler that raises every few ms, or another thread throwing async
    exceptions (PyThreadState_SetAsyncExc), into a main thread dispatching in a loop: 1,000
    landings without a deadlock, a lost call, a call answered with another's exception, or
    a worker charged to the restart intensity. On main before this change the pool's I/O
    thread blocked for good in Future.set_result (a lock the interrupted caller held), or
    lanes broke and workers were killed as crashes until the pool failed."""
    monkeypatch.setenv("KIND", kind)
    child = start(INTERRUPTIONS, tmp_path)
    try:
        found = child.report(timeout=200)
        assert child.proc.wait(timeout=30) == 0, child.stderr()
    finally:
        child.stop()
    assert found["landed"] >= 1000 and not found["other"], found
    assert found["exact"] and found["last"] and found["last_seconds"] < 1.0, found
    assert found["state"] == "running" and found["restarts"] == 0, found
    assert found["queued"] == 0 and found["busy"] == ["idle"], found


# -- cancelling a call mid-loop, on each backend -------------------------------------------

@pytest.mark.timeout(180)
@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_cancel_mid_loop_then_the_next_call_answers_within_a_second(backend, vyre_stalls):
    """wgpu cannot stop a submitted dispatch: its worker is killed after the cancel grace
    and a spare (``standby=1``) serves the next call at once; a new process would take
    seconds to open its device on lavapipe."""
    trips = np.array([FOREVER], np.uint32)
    with vyre.Driver(timeouts=Timeouts(kill_grace=0.5),
                     standby=1 if backend == "wgpu" else 0) as drv:
        few = np.zeros(256, np.uint32)
        drv.launch(spin, (np.array([3], np.uint32), few), dim=256, backend=backend)  # warm
        assert few.tobytes() == expected(3)
        if backend == "wgpu":  # (it cuts an invocation's loops at 65535 iterations:
            trips, lanes = np.array([60000], np.uint32), 1 << 20  # many invocations then)
        else:
            lanes = 256
        pending = drv.launch_async(spin, (trips, np.zeros(lanes, np.uint32)), dim=lanes,
                                   backend=backend)
        def looping() -> bool:
            pool = drv.status()["pools"][backend]
            return pool["workers"][0]["running"] and pool["standby"] >= (backend == "wgpu")

        wait_for(looping, 60, "the loop to start")
        assert not pending.is_ready()
        started = time.monotonic()
        assert pending.cancel() is True
        assert pending.cancel() is False  # already cancelled: a no-op
        with pytest.raises(DispatchCancelledError):
            pending.result()
        out = np.zeros(256, np.uint32)
        drv.launch(spin, (np.array([5], np.uint32), out), dim=256, backend=backend)
        answered = time.monotonic() - started
        assert out.tobytes() == expected(5)
        # (1 s quiet; a loaded machine delays the workers, whose stalls vyre_stalls, this
        # process's own, does not see: 1.09 s beside a clean-clone run at load 5. A fresh
        # worker opening lavapipe takes longer than 2 s)
        assert answered < 2.0 + vyre_stalls.since(started), (answered, vyre_stalls)
        pool = drv.status()["pools"][backend]
        assert pool["restarts"] == 0 and pool["state"] == "running", pool
        stopped_by_kill = pool["metrics"]["restarts"].get("cancelled", 0)
        # reference and cpu stop at a loop back-edge; wgpu cannot stop a submitted
        # dispatch, so its worker is replaced (a planned stop)
        assert stopped_by_kill == (1 if backend == "wgpu" else 0), pool["metrics"]


def test_cancel_of_a_finished_failed_or_cancelled_call_is_a_no_op_and_races_have_one_outcome():
    with vyre.Driver() as drv:
        inputs = [np.arange(16, dtype=np.float32), np.ones(16, np.float32),
                  np.array([2.0], np.float32)]
        from vyre_examples.saxpy import program as saxpy
        program = saxpy(16, workgroup=16)
        want = (np.float32(2.0) * inputs[0] + inputs[1]).tobytes()
        done = drv.dispatch_async(program, inputs, backend="reference")
        assert done.result()[0].tobytes() == want
        assert done.cancel() is False and done.result()[0].tobytes() == want
        failed = drv.launch_async(spin, (np.array([FOREVER], np.uint32),
                                              np.zeros(256,
                                                       np.uint32)), dim=256, backend="reference",
                                  config=vyre.DispatchConfig(timeout=0.2))
        with pytest.raises(vyre.errors.DispatchTimeoutError):
            failed.result()
        assert failed.cancel() is False
        with pytest.raises(vyre.errors.DispatchTimeoutError):  # (still its own answer)
            failed.result()
        trips = []
        for _ in range(20):
            started = time.monotonic()
            drv.dispatch_async(program, inputs, backend="reference").result()
            trips.append(time.monotonic() - started)
        trip = sorted(trips)[10]  # a round trip's median: cancels land before and after
        rng = random.Random(3)
        cancelled = results = 0
        for _ in range(400):  # a cancel racing the reply: exactly one outcome each time
            pending = drv.dispatch_async(program, inputs, backend="reference")
            time.sleep(rng.uniform(0, 2 * trip))
            if pending.cancel():
                cancelled += 1
                with pytest.raises(DispatchCancelledError):
                    pending.result()
            else:
                results += 1
                assert pending.result()[0].tobytes() == want
        assert drv.dispatch(program, inputs, backend="reference")[0].tobytes() == want
        pool = drv.status()["pools"]["reference"]
        assert pool["queued"] == 0 and pool["restarts"] == 0, pool  # (deadline: planned)
        assert cancelled and results, (cancelled, results)


# -- Ctrl-C: a real SIGINT to a child script ---------------------------------------------------

CTRL_C = """
drv = vyre_core.Driver(timeouts=vyre_core.Timeouts(kill_grace=0.5))
sys.path.insert(0, os.environ["TESTS_DIR"])
from faults.test_interrupted_callers import spin
few = np.zeros(256, np.uint32)
drv.launch(spin, 256, (np.array([3], np.uint32), few), backend="reference")

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
start = time.monotonic()
out = np.zeros(256, np.uint32)
drv.launch(spin, 256, (np.array([5], np.uint32), out), backend="reference",
           config=DispatchConfig(timeout=30))
seconds = time.monotonic() - start
pool = drv.status()["pools"]["reference"]
report(step="after", outcome=outcome, seconds=seconds, out=out.tobytes().hex(),
       restarts=pool["restarts"], cancelled=pool["metrics"]["restarts"].get("cancelled", 0))
drv.close()
"""


@pytest.mark.timeout(120)
def test_ctrl_c_cancels_a_running_call_and_the_next_call_answers_within_a_second(tmp_path,
                                                                                 monkeypatch):
    """On main before this change the worker went on running the abandoned call: the next
    call queued behind it and, with timeout=30, failed with DispatchTimeoutError."""
    monkeypatch.setenv("TESTS_DIR", os.path.dirname(os.path.dirname(__file__)))
    child = start(CTRL_C, tmp_path)
    try:
        assert child.report(timeout=90)["step"] == "running"
        child.interrupt()
        found = child.report(timeout=60)
        assert child.proc.wait(timeout=30) == 0, child.stderr()
    finally:
        child.stop()
    assert found["outcome"] == "interrupted", found
    assert found["seconds"] < 1.0, found
    assert bytes.fromhex(found["out"]) == expected(5)
    assert found["restarts"] == 0 and found["cancelled"] == 0, found  # stopped, not killed
