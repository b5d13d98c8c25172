"""The lean per-call path: a program named by fingerprint to a worker that holds it.

Pure rules first (the fast tier): a request answered PROGRAM_NOT_HELD goes again, first in
line, with its program, once; pinned requests go again to their own worker; internal
requests are not touched. Then real reference workers: the second dispatch of a program is
sent without its wire form, a worker that evicted it gets it again without a restart or an
error, a restarted worker gets it again, two workers and four threads stay exact. Then the
lazy imports (a worker never loads the driver, supervisor or builder) and the launch-plan
cache of ``BackendHost`` (in process: hits stay exact, launch limits are never cached
away). Every result is compared byte for byte with the in-process reference.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from counting_backend import CountingBackend
from kernels import spin
from supervision_harness import Shell, deadline_after, reply_of
from waiting import wait_for, wait_running, workers

import vyre_reference
import vyre_reference.backend
import vyre_workers.backend_host as backend_host
from vyre_core import ir
from vyre_core.boundary import codec
from vyre_core.boundary.messages import PROGRAM_CACHE, PROGRAM_NOT_HELD, Body, Dispatch, Op
from vyre_core.config import DispatchConfig
from vyre_core.driver import Driver
from vyre_core.driver.calls import _planned
from vyre_core.driver.owned import _options_for
from vyre_core.errors import (
    DeviceLostError,
    DispatchTimeoutError,
    InvalidInputError,
    LaunchLimitError,
    ProtocolError,
    WorkerCrashedError,
)
from vyre_core.supervisor.local.transfer import LocalTransfer
from vyre_core.supervisor.rules.requests import Call, Request
from vyre_workers.backend_host import BackendHost

FP = "ab" * 32

# -- pure rules (no process) ----------------------------------------------------------------


def not_held(fp: str = FP) -> ProtocolError:
    """What a worker answers to a request naming a program it does not hold."""
    return ProtocolError(f"program {fp[:16]} is not held by this worker",
                         "The parent sends it again.", **{PROGRAM_NOT_HELD: True})


def submit_program(shell: Shell, *, fp: str = FP, slot: int | None = None,
                   generation: int | None = None, timeout: float | None = None,
                   label: str = "lean") -> Request:
    """A caller's dispatch carrying a program (its ``fp`` and ``program``)."""
    req = Request(Call(Dispatch(fp, b"wire form", {}, label), [],
                  deadline=deadline_after(timeout, shell.now), retries=1, slot=slot,
                  generation=generation))
    shell.machine.submit(req, shell.now)
    shell.run()
    return req


def assert_not_retired(shell: Shell, index: int, generation: int = 1) -> None:
    w = shell.worker(index)
    assert w.generation == generation and w.deaths == 0 and w.retiring is None
    assert w.state in ("idle", "busy") and shell.machine.holds(index, generation)
    assert shell.signals == [] and shell.machine.status(shell.now)["restarts"] == 0
    assert all(s.request.call.op is not Op.SHUTDOWN for s in shell.sends)


@pytest.mark.fast
def test_a_program_not_held_answer_sends_the_request_again_first_in_line_with_its_program():
    shell = Shell()
    req = submit_program(shell)
    shell.receive(0)
    behind = [shell.submit(label="b"), shell.submit(label="c")]  # queued behind it
    sends = len(shell.sends)
    shell.reply(0, req, error=not_held())
    again = shell.sends[sends:]
    assert [s.request for s in again] == [req]  # the same request, before b and c
    assert (again[0].index, again[0].generation) == (0, 1)
    assert req.tracking.needs_program is True and req.tracking.state == "sent"
    assert req.tracking.id not in shell.results
    assert not req.call.future.done()  # the caller still waits
    assert list(shell.machine.queue) == behind
    assert_not_retired(shell, 0)  # went idle, took it again: no restart, nothing counted
    assert shell.machine.lost_messages == 0 and shell.machine.dropped_replies == 0
    shell.receive(0)
    shell.reply(0, req, value=1)
    assert shell.result(req) == (reply_of(req), [1]) and shell.resolved_count[req.tracking.id] == 1
    assert shell.sends[-1].request is behind[0]  # and then the queue in its order
    assert shell.worker(0).served == 1  # one call served, not two


@pytest.mark.fast
def test_a_second_program_not_held_answer_reaches_the_caller():
    shell = Shell()
    req = submit_program(shell)
    shell.reply(0, req, error=not_held())
    assert req.tracking.needs_program and req.tracking.id not in shell.results
    shell.reply(0, req, error=not_held())  # sent with its program, and still not held
    error = shell.result(req)
    assert isinstance(error, ProtocolError) and error.details[PROGRAM_NOT_HELD] is True
    assert "is not held by this worker" in error.cause
    assert shell.resolved_count[req.tracking.id] == 1
    assert shell.sent_to(0) == [req, req]  # sent twice, never a third time
    assert_not_retired(shell, 0)
    assert shell.worker(0).state == "idle"
    nxt = shell.submit()
    assert shell.sent_to(0)[-1] is nxt  # the worker serves on


@pytest.mark.fast
def test_a_program_not_held_with_two_workers_leaves_the_worker_idle_and_serving():
    shell = Shell(workers=2)
    req = submit_program(shell)
    assert shell.sends[-1].index == 0
    busy = shell.submit(label="busy")  # worker 1 busy meanwhile
    assert shell.sends[-1].index == 1
    shell.reply(0, req, error=not_held())
    assert shell.sends[-1].request is req and shell.sends[-1].index == 0
    assert_not_retired(shell, 0)
    assert_not_retired(shell, 1)
    shell.reply(0, req, value=2)
    shell.reply(1, busy, value=3)
    assert shell.result(req) == (reply_of(req), [2]) and shell.result(busy) == (reply_of(busy), [3])
    assert [w.state for w in shell.machine.workers] == ["idle", "idle"]


@pytest.mark.fast
def test_other_protocol_errors_reach_the_caller_at_once():
    shell = Shell()
    req = submit_program(shell)
    shell.reply(0, req, error=ProtocolError("request carries no program bytes"))
    assert isinstance(shell.result(req), ProtocolError)
    assert req.tracking.needs_program is False and shell.sent_to(0) == [req]


@pytest.mark.fast
def test_a_request_sent_again_keeps_its_deadline():
    shell = Shell()
    req = submit_program(shell, timeout=2.0)
    shell.receive(0)
    shell.advance(1.5)
    shell.reply(0, req, error=not_held())
    assert req.tracking.id not in shell.results
    shell.receive(0)
    shell.advance(0.6)  # 2.1 s after submit
    error = shell.result(req)
    assert isinstance(error, DispatchTimeoutError) and error.details["timeout"] == 2.0


@pytest.mark.fast
def test_a_pinned_request_goes_again_to_its_own_worker():
    shell = Shell(workers=2)
    warm = [shell.submit(), shell.submit()]
    shell.reply(0, warm[0])
    shell.reply(1, warm[1])
    pinned = submit_program(shell, slot=1, generation=1)
    assert shell.sends[-1].index == 1
    later = submit_program(shell, slot=1, generation=1, fp="cd" * 32, label="later")
    shell.reply(1, pinned, error=not_held())
    send = shell.sends[-1]
    assert send.request is pinned and (send.index, send.generation) == (1, 1)
    assert pinned.tracking.needs_program and pinned.tracking.id not in shell.results
    assert list(shell.worker(1).pinned) == [later]  # first in its worker's line
    assert shell.sent_to(0) == [warm[0]]  # worker 0 was idle, and got nothing of it
    assert_not_retired(shell, 1)
    shell.reply(1, pinned, value=4)
    assert shell.result(pinned) == (reply_of(pinned), [4])
    assert shell.sends[-1].request is later and shell.sends[-1].index == 1


@pytest.mark.fast
def test_an_internal_request_is_unaffected_by_the_rule():
    """A recovery request carries no program: an answer saying PROGRAM_NOT_HELD is a
    failed recovery like any other error, not a reason to send it again (to any worker:
    worker 0 must not run worker 1's recovery)."""
    shell = Shell(workers=2)
    warm = [shell.submit(), shell.submit()]
    shell.reply(0, warm[0])
    shell.reply(1, warm[1])
    req = shell.submit(slot=1, generation=1)
    shell.reply(1, req, error=DeviceLostError("gone", generation=1))
    recover = shell.sent_to(1)[-1]
    assert recover.call.op is Op.TRY_RECOVER and recover.call.internal
    shell.reply(1, recover, error=not_held())
    assert shell.sent_to(1).count(recover) == 1  # not sent again ...
    assert recover not in shell.sent_to(0)  # ... least of all to another worker
    assert recover not in shell.machine.queue
    assert recover.tracking.id not in shell.results  # no caller to answer
    assert shell.sent_to(1)[-1].call.op is Op.SHUTDOWN  # a recovery that failed: restart it
    assert shell.worker(0).generation == 1 and shell.worker(0).state == "idle"


# -- real workers ---------------------------------------------------------------------------


def affine(n: int = 64, salt: int = 1) -> ir.Program:
    """``out[i] = x[i] * 3 + salt``; distinct salts give distinct programs."""
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.u32, count=n)
    out = k.output("out", ir.u32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < n):
        out[i] = x[i] * 3 + salt
    return k.build()


def data(seed: int, n: int = 64) -> np.ndarray:
    return (np.arange(n, dtype=np.uint64) * 2654435761 + seed * 7919).astype(np.uint32)


def assert_exact(outputs, expected) -> None:
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected, strict=True):
        got = np.asarray(got)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()


def request(drv: Driver, program: ir.Program, inputs, config: DispatchConfig | None = None):
    """A request built the way ``Driver.dispatch`` builds it."""
    return _planned(drv._plans, program, inputs, config or DispatchConfig())[1].renewed()


def recording(pool) -> list[tuple[Request, Body]]:
    """Record every request the pool encodes with the body it encoded (read before the
    request can be answered: an answered request drops its frames)."""
    seen: list[tuple[Request, Body]] = []
    encode = pool._encode

    def record(req: Request, transfer: LocalTransfer):
        frames = encode(req, transfer)
        seen.append((req, codec.decode(frames).body))
        return frames

    pool._encode = record
    return seen


def run_exact(pool, drv: Driver, program: ir.Program, inputs, timeout: float = 30.0) -> Request:
    req = request(drv, program, inputs)
    _, arrays = pool.submit(req).result(timeout=timeout)
    assert_exact(arrays, vyre_reference.run(program, inputs))
    return req


def one_worker(drv: Driver) -> dict:
    worker, = workers(drv, "reference")
    return worker


@pytest.mark.processes
@pytest.mark.timeout(60)
def test_the_second_dispatch_of_a_program_names_it_by_fingerprint_only():
    program = affine(salt=5)
    fp = program.fingerprint()
    with Driver() as drv:
        pool = drv.pools.open("reference")
        seen = recording(pool)
        first = run_exact(pool, drv, program, [data(1)])
        body = seen[0][1]
        assert body.fp == fp and body.program == program.to_wire() and not first.transfer.lean
        for seed in range(2, 6):
            req = run_exact(pool, drv, program, [data(seed)])
            assert req.transfer.lean and not req.tracking.needs_program  # named, held, no miss
        assert [b.fp for _, b in seen[1:]] == [fp] * 4
        assert all(b.program is None for _, b in seen[1:])  # sent as nil
        other = affine(salt=6)  # another program: its first dispatch carries it
        run_exact(pool, drv, other, [data(7)])
        assert seen[-1][1].program == other.to_wire() and not seen[-1][0].transfer.lean
        status = drv.status()["pools"]["reference"]
        assert status["restarts"] == 0 and status["lost_messages"] == 0


@pytest.mark.processes
@pytest.mark.timeout(60)
def test_a_program_the_worker_evicted_is_sent_again_without_restart_or_error():
    """COMPILE requests are cached in the worker by their wire bytes, unseen by the
    parent's mirror: PROGRAM_CACHE + 1 of them evict the program the parent thinks the
    worker holds; its next dispatch is named lean, refused, and sent again with it."""
    program = affine(salt=9)
    with Driver() as drv:
        pool = drv.pools.open("reference")
        run_exact(pool, drv, program, [data(1)])
        before = one_worker(drv)
        for salt in range(PROGRAM_CACHE + 1):
            drv.compile(affine(salt=1000 + salt), backend="reference")
        req = run_exact(pool, drv, program, [data(2)], timeout=20.0)
        assert req.transfer.lean  # the parent believed the worker held it ...
        assert req.tracking.needs_program  # ... the worker did not: it went again with its program
        after = one_worker(drv)
        assert (after["pid"], after["generation"]) == (before["pid"], before["generation"])
        assert after["restarts"] == 0 and after["state"] == "idle"
        status = drv.status()["pools"]["reference"]
        assert status["lost_messages"] == 0 and status["restarts"] == 0
        again = run_exact(pool, drv, program, [data(3)])  # held again now
        assert again.transfer.lean and not again.tracking.needs_program


def spin_for() -> ir.Program:
    """One invocation summing ``range(n[0])``: how long it runs is an input."""
    k = ir.Kernel(workgroup=(1,))
    n = k.uniform("n", ir.u32)
    out = k.output("out", ir.u32, 1)
    acc = k.let("acc", ir.lit(0, ir.u32))
    with k.loop("j", 0, n[0]) as j:
        k.assign(acc, acc + j)
    out[0] = acc
    return k.build()


@pytest.mark.processes
@pytest.mark.timeout(60)
def test_a_long_dispatch_sent_again_after_a_miss_is_not_judged_lost():
    """The resend runs longer than the silence limit (about 2 s here): the parent must not
    take the refused first attempt's progress for the resend's."""
    program = spin_for()
    with Driver() as drv:
        pool = drv.pools.open("reference")
        run_exact(pool, drv, program, [np.array([3], np.uint32)])
        for salt in range(PROGRAM_CACHE + 1):
            drv.compile(affine(salt=3000 + salt), backend="reference")
        n = 1_200_000
        options = _options_for(drv._backend_options, drv.options, "reference")
        assert options.timeouts.silence_limit < 1.6
        req = request(drv, program, [np.array([n], np.uint32)])
        _, (out,) = pool.submit(req).result(timeout=40)
        assert req.transfer.lean and req.tracking.needs_program  # the miss happened
        assert out.tobytes() == np.array([n * (n - 1) // 2 % 2**32], np.uint32).tobytes()
        status = drv.status()["pools"]["reference"]
        assert status["restarts"] == 0 and status["lost_messages"] == 0
        assert one_worker(drv)["generation"] == 1


@pytest.mark.processes
@pytest.mark.timeout(60)
def test_a_restarted_worker_gets_the_program_again():
    program = affine(salt=11)
    with Driver() as drv:
        pool = drv.pools.open("reference")
        run_exact(pool, drv, program, [data(1)])
        assert run_exact(pool, drv, program, [data(2)]).transfer.lean
        old = one_worker(drv)
        os.kill(old["pid"], signal.SIGKILL)
        wait_for(lambda: (w := one_worker(drv))["generation"] == 2 and w["state"] == "idle",
                 30.0, "worker 0 restarted")
        seen = recording(pool)
        req = run_exact(pool, drv, program, [data(3)])
        assert not req.transfer.lean and seen[0][1].program is not None  # the mirror was cleared
        assert not req.tracking.needs_program
        assert run_exact(pool, drv, program, [data(4)]).transfer.lean  # the new process holds it
        assert one_worker(drv)["pid"] != old["pid"]


@pytest.mark.processes
@pytest.mark.timeout(60)
def test_a_lean_request_queued_across_a_restart_reaches_the_new_worker_with_its_program():
    """Encoded lean while the old worker held the program; that worker is SIGKILLed before
    it is sent: the I/O thread sees the new process holds nothing and sends the program."""
    program = affine(salt=13)
    with Driver() as drv:
        pool = drv.pools.open("reference")
        run_exact(pool, drv, program, [data(1)])
        slow = request(drv, spin(5_000_000), [], DispatchConfig(retries=0))
        slow_future = pool.submit(slow)
        old, = wait_running(drv)
        req = request(drv, program, [data(2)])
        future = pool.submit(req)
        assert req.transfer.lean  # queued behind the slow one, named by fingerprint
        os.kill(old["pid"], signal.SIGKILL)
        with pytest.raises(WorkerCrashedError):
            slow_future.result(timeout=30)
        _, arrays = future.result(timeout=30)
        assert_exact(arrays, vyre_reference.run(program, [data(2)]))
        assert not req.tracking.needs_program  # no miss: it carried its program the first time
        assert req.tracking.served_by == (0, 2)


@pytest.mark.processes
@pytest.mark.timeout(60)
def test_a_lean_request_whose_program_left_the_mirror_before_it_was_sent_carries_it():
    """Encoded lean; PROGRAM_CACHE other programs are sent to the worker ahead of it (the
    worker, and the parent's mirror, evict it meanwhile): it is sent with its program."""
    program = affine(salt=17)
    with Driver() as drv:
        pool = drv.pools.open("reference")
        run_exact(pool, drv, program, [data(1)])
        others = [affine(salt=2000 + s) for s in range(PROGRAM_CACHE)]
        queued = [request(drv, p, [data(salt)]) for salt, p in enumerate(others)]
        req = request(drv, program, [data(2)])
        slow = pool.submit(request(drv, spin(600_000), []))  # about 1 s
        wait_running(drv)
        ahead = [(p, pool.submit(r)) for p, r in zip(others, queued, strict=True)]
        future = pool.submit(req)
        assert req.transfer.lean
        slow.result(timeout=30)
        for salt, (p, f) in enumerate(ahead):
            assert_exact(f.result(timeout=30)[1], vyre_reference.run(p, [data(salt)]))
        assert_exact(future.result(timeout=30)[1], vyre_reference.run(program, [data(2)]))
        assert not req.tracking.needs_program  # sent with it, never refused
        assert one_worker(drv)["generation"] == 1


@pytest.mark.processes
@pytest.mark.timeout(60)
def test_two_workers_and_four_threads_stay_exact():
    program = affine(salt=19)
    errors: list[str] = []
    with Driver(workers=2) as drv:
        pool = drv.pools.open("reference")
        run_exact(pool, drv, spin(1), [])
        wait_for(lambda: [w["state"] for w in workers(drv, "reference")] == ["idle", "idle"],
                 30.0, "both workers started")
        seen = recording(pool)

        def caller(t: int) -> None:
            for i in range(40):
                x = data(t * 1000 + i)
                try:
                    out, = drv.dispatch(program, [x], backend="reference")
                    if out.tobytes() != vyre_reference.run(program, [x])[0].tobytes():
                        errors.append(f"thread {t} call {i}: wrong bytes")
                except Exception as exc:  # reported below
                    errors.append(f"thread {t} call {i}: {exc!r}")

        threads = [threading.Thread(target=caller, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=40)
        assert not any(t.is_alive() for t in threads)
        assert errors == []
        reqs = [r for r, _ in seen]
        assert len(reqs) == 160
        assert {r.tracking.served_by[0] for r in reqs} == {0, 1}
        # lean on both workers
        assert {r.tracking.served_by[0] for r in reqs if r.transfer.lean} == {0, 1}
        assert not any(r.tracking.needs_program for r in reqs)  # the mirrors were never wrong
        status = drv.status()["pools"]["reference"]
        assert status["restarts"] == 0 and status["lost_messages"] == 0
        assert all(w["served"] > 0 and w["generation"] == 1 for w in status["workers"])


# -- lazy imports -----------------------------------------------------------------------------


def python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.processes
@pytest.mark.timeout(120)
def test_a_worker_imports_neither_the_driver_nor_the_supervisor_nor_the_builder():
    out = python("""
        import sys
        import vyre_workers.__main__
        heavy = ("vyre_core.driver", "vyre_core.supervisor", "vyre_core.ir.builder",
                 "vyre_core.ir.values", "vyre_core.ir.expressions")
        print(sorted(m for m in sys.modules if m.startswith(heavy)))
    """)
    assert out.strip() == "[]"


@pytest.mark.processes
@pytest.mark.timeout(120)
def test_a_dtype_makes_literals_however_it_was_imported():
    """``ir.f32(1.5)`` works as the first thing a program does (the builder, which makes
    literals, is loaded with the dtypes), and a dtype taken from below the package says
    how to get one that works."""
    out = python("""
        from vyre_core import ir
        print(ir.f32(1.5).node, ir.u32(3).dtype)
    """)
    assert out.split() == ["Lit(dtype=<DType.F32:", "'f32'>,", "bits=1069547520)", "DType.U32"]
    for line in ("from vyre_core.ir import u32; print(u32(3).dtype)",
                 "from vyre_core.ir import DType; print(DType.U32(3).dtype)"):
        assert python(line).strip() == "DType.U32"
    out = python("""
        from vyre_core.ir.dtypes import DType
        try:
            DType.F32(1.5)
        except TypeError as exc:
            print(exc)
    """)
    assert "Fix: take dtypes from vyre_core.ir" in out


@pytest.mark.processes
@pytest.mark.timeout(120)
def test_vyre_core_and_its_ir_load_their_names_on_first_use():
    out = python("""
        import sys
        import vyre_core
        assert "vyre_core.driver" not in sys.modules, "import vyre_core loaded the driver"
        assert "vyre_core.ir.builder" not in sys.modules
        names = set(dir(vyre_core))
        assert set(vyre_core.__all__) <= names, set(vyre_core.__all__) - names
        from vyre_core.driver import Driver
        assert vyre_core.Driver is Driver
        import vyre_core.ir.builder as builder
        assert vyre_core.ir.Kernel is builder.Kernel
        import vyre_core.ir
        assert set(vyre_core.ir.__all__) <= set(dir(vyre_core.ir))
        namespace = {}
        exec("from vyre_core.ir import *", namespace)
        missing = set(vyre_core.ir.__all__) - set(namespace)
        assert not missing, missing
        namespace = {}
        exec("from vyre_core import *", namespace)
        assert set(vyre_core.__all__) <= set(namespace)
        from vyre_core.errors import VyreError
        from vyre_core.ir.program import Program
        assert vyre_core.VyreError is VyreError and vyre_core.Program is Program
        assert vyre_core.errors is sys.modules["vyre_core.errors"]
        for module in (vyre_core, vyre_core.ir):
            assert not hasattr(module, "no_such_name")
        print("ok")
    """)
    assert out.strip() == "ok"


# -- the launch-plan cache (in process) --------------------------------------------------------


def guarded(width: int = 64) -> ir.Program:
    """``out[i] = x[i] * 5 + 2`` for ``i < len(x)``, zero beyond: outputs depend on the
    input's length, which is not declared."""
    k = ir.Kernel(workgroup=(16,))
    x = k.read("x", ir.u32)
    out = k.output("out", ir.u32, count=width)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = x[i] * 5 + 2
    return k.build()


@pytest.mark.fast
def test_launch_plans_are_cached_per_shape_and_limits_are_checked_every_time(monkeypatch):
    planned: list[int] = []
    plan_launch = backend_host.plan_launch

    def counting(program, inputs, config, caps, backend):
        planned.append(len(inputs[0]) if inputs else 0)
        return plan_launch(program, inputs, config, caps, backend)

    monkeypatch.setattr(backend_host, "plan_launch", counting)
    host = BackendHost(vyre_reference.backend, "reference", 1)
    host.prepare()
    program = guarded()
    refusals = [DispatchConfig(grid_override=(2**28 + 1,)),  # past what a u32 id numbers
                DispatchConfig(workgroup_override=(2048,)),  # over max_workgroup_size
                DispatchConfig(max_output_bytes=64)]  # 256 bytes of output
    for round_ in range(4):
        for n in (10, 50):
            x = data(round_ * 100 + n, n)
            assert_exact(host.dispatch(program, [x]), vyre_reference.run(program, [x]))
            assert_exact(host.dispatch(program, [x], DispatchConfig(profile=True)),
                         vyre_reference.run(program, [x]))
            for config in refusals:
                with pytest.raises(LaunchLimitError):
                    host.dispatch(program, [x], config)
    # two shapes x two configs planned once each; every refusal planned (and refused) again
    assert sorted(planned).count(10) == 2 + 4 * len(refusals)
    assert sorted(planned).count(50) == 2 + 4 * len(refusals)
    assert len(planned) == 4 + 8 * len(refusals)


class Shrinking(CountingBackend):
    """The reference behind the contract; after a device recovery its grid limit is 3."""

    def __init__(self) -> None:
        super().__init__()
        self.limit = 65535

    def grid_limit(self) -> int:
        return self.limit

    def vyre_try_recover(self) -> None:
        self.limit = 3


@pytest.mark.fast
def test_a_recovered_device_plans_again_against_its_new_limits():
    plugin = Shrinking()
    host = BackendHost(plugin, "counting", 1)
    host.prepare()
    program = guarded()  # 64 outputs in workgroups of 16: a grid of 4
    x = data(1, 30)
    for _ in range(2):  # planned, then from the cache
        assert_exact(host.dispatch(program, [x]), vyre_reference.run(program, [x]))
    host.try_recover()
    with pytest.raises(LaunchLimitError, match="grid axis x has 4 workgroups, the limit is 3"):
        host.dispatch(program, [x])
    assert plugin.calls == 2  # nothing ran once refused


@pytest.mark.fast
def test_a_cached_plan_binds_the_new_inputs_and_still_checks_them():
    host = BackendHost(vyre_reference.backend, "reference", 1)
    host.prepare()
    program = guarded()
    for seed in range(6):
        x = data(seed, 40)
        out, = host.dispatch(program, [x])
        want = np.zeros(64, np.uint32)
        want[:40] = x * np.uint32(5) + np.uint32(2)
        assert out.tobytes() == want.tobytes() == vyre_reference.run(program, [x])[0].tobytes()
    with pytest.raises(InvalidInputError):  # a wrong input count is refused, cached or not
        host.dispatch(program, [data(0, 40), data(1, 40)])
    assert PROGRAM_CACHE == 256 and backend_host.PLAN_CACHE == 256
