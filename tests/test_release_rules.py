"""When a request's memory may be reused, on the pure state machine (no process, socket
or clock). The rules know nothing of shared memory: they say, for each request they
answer, whether its worker may still write there. A ``Resolve`` with ``running`` False
frees it at the answer (the shell releases it there); one with ``running`` True leaves it
to the ``Release`` the rules send once that worker has exited or stopped.

Memory goes back at the answer unless the worker it was sent to is still running it
(answered by its deadline, by close, by a failing pool, while that worker is being
stopped): then only once that worker has exited, since until then it may still write
there. A request that never reached a worker, or was lost on the way and sent again,
keeps its memory until it is finally answered. Each request is freed exactly once, and
the pool's own requests (recovery, adoption, shutdown) never are: they carry none."""

from __future__ import annotations

import signal
from typing import Any

import pytest
from supervision_harness import Shell

from vyre_core.boundary.messages import Op, Ran
from vyre_core.errors import (
    DispatchTimeoutError,
    PoolFailedError,
    WorkerCrashedError,
)
from vyre_core.supervisor.rules.actions import Release, Resolve
from vyre_core.supervisor.rules.requests import Request

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)


class Recorder(Shell):
    """The harness shell, also keeping every action in the order the rules gave them;
    a request is released by a ``Resolve`` that is not ``running``, or by a
    ``Release``."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.actions: list[Any] = []

    def run(self) -> list[Any]:
        done = super().run()
        self.actions += done
        return done

    def releases(self, req: Request) -> int:
        return len([r for r in self.all_releases() if r is req])

    def all_releases(self) -> list[Request]:
        return [a.request for a in self.actions if _frees(a)]

    def position(self, kind: type, req: Request) -> int:
        found = [i for i, a in enumerate(self.actions)
                 if isinstance(a, kind) and a.request is req]
        assert len(found) == 1, f"{kind.__name__} of request {req.tracking.id}: {len(found)} times"
        return found[0]


def _frees(action: Any) -> bool:
    return isinstance(action, Release) or (isinstance(action, Resolve) and not action.running)


def test_a_request_answered_by_its_worker_is_released_at_its_resolve():
    shell = Recorder()
    req = shell.submit()
    shell.receive(0)
    assert shell.releases(req) == 0  # running: its memory is the worker's
    shell.reply(0, req, value=1)
    assert shell.result(req) == (Ran(), [1])
    assert shell.releases(req) == 1
    assert not shell.actions[shell.position(Resolve, req)].running
    assert shell.worker(0).holding == []
    shell.advance(5.0)
    shell.reply(0, req, value=2)  # a duplicate answer: dropped, released nothing more
    assert shell.releases(req) == 1 and shell.all_releases() == [req]


def test_a_request_past_its_deadline_while_running_is_released_only_when_its_worker_exits():
    shell = Recorder(timeouts={"kill_grace": 2.0})
    req = shell.submit(timeout=1.0)
    shell.receive(0)
    shell.advance(1.0)
    assert isinstance(shell.result(req), DispatchTimeoutError)
    assert shell.releases(req) == 0  # the worker may still write its memory
    assert shell.worker(0).holding == [req]
    assert [(s.index, s.kill) for s in shell.signals] == [(0, False)]
    shell.reply(0, req, value=1)  # it finished after all: still not released
    shell.advance(1.0)
    assert shell.releases(req) == 0
    shell.advance(1.0)  # the grace is over: SIGKILL
    assert shell.signals[-1].kill and shell.releases(req) == 0
    shell.die(0)
    assert shell.releases(req) == 1 and shell.worker(0).holding == []
    shell.advance(10.0)
    assert shell.releases(req) == 1 and shell.all_releases() == [req]
    assert shell.resolved_count[req.tracking.id] == 1


def test_a_request_past_its_deadline_before_its_worker_took_it_waits_for_the_exit_too():
    """Sent but not yet acknowledged: the worker may be about to take it."""
    shell = Recorder(timeouts={"kill_grace": 2.0})
    req = shell.submit(timeout=1.0)
    assert shell.sent_to(0) == [req]
    shell.advance(1.0)
    assert isinstance(shell.result(req), DispatchTimeoutError)
    assert shell.releases(req) == 0
    shell.obey_signals()
    assert shell.releases(req) == 1


def test_a_request_resolved_by_close_while_running_is_released_only_at_its_workers_exit():
    shell = Recorder(workers=2, timeouts={"kill_grace": 1.0})
    running = shell.submit()
    queued = shell.submit()
    shell.receive(0)
    shell.receive(1)
    waiting = shell.submit()
    assert waiting.tracking.state == "queued"
    shell.machine.close(shell.now)
    shell.run()
    for req in (running, queued, waiting):
        assert isinstance(shell.result(req), PoolFailedError)
    assert shell.all_releases() == [waiting]  # never reached a worker: at once
    shell.die(1, -signal.SIGTERM)
    assert shell.all_releases() == [waiting, queued]
    shell.advance(1.0)
    assert shell.releases(running) == 0
    shell.obey_signals()
    assert shell.machine.stopped
    assert sorted(r.tracking.id for r in shell.all_releases()) == sorted(
        r.tracking.id for r in (running, queued, waiting))
    assert all(shell.releases(r) == 1 for r in (running, queued, waiting))


def test_a_request_that_timed_out_in_the_queue_is_released_at_once():
    shell = Recorder()
    busy = shell.submit()
    shell.receive(0)
    queued = shell.submit(timeout=1.0)
    assert queued.tracking.state == "queued" and queued.tracking.worker is None
    shell.advance(1.0)
    error = shell.result(queued)
    assert isinstance(error, DispatchTimeoutError) and "waiting for a worker" in error.cause
    assert shell.all_releases() == [queued]
    assert not shell.actions[shell.position(Resolve, queued)].running
    assert shell.signals == [] and busy.tracking.id not in shell.results  # nobody killed for it
    shell.reply(0, busy, value=1)
    assert shell.all_releases() == [queued, busy]


def test_a_request_past_its_deadline_at_submit_is_released_at_once():
    shell = Recorder()
    req = shell.submit(timeout=0.0)
    assert isinstance(shell.result(req), DispatchTimeoutError)
    assert shell.all_releases() == [req] and shell.spawns == []


def test_a_request_lost_before_its_worker_took_it_keeps_its_memory_until_answered():
    shell = Recorder(restart={"max_restarts": 10})
    req = shell.submit(retries=0)
    shell.die(0)  # killed before its main thread took the request: sent again
    assert req.tracking.id not in shell.results and shell.releases(req) == 0
    assert shell.sent_to(0) == [req, req]
    shell.die(0)
    assert req.tracking.id not in shell.results and shell.releases(req) == 0
    shell.receive(0)
    shell.advance(1.0)
    assert shell.releases(req) == 0
    shell.reply(0, req, value=3)
    assert shell.result(req) == (Ran(), [3])
    assert shell.releases(req) == 1 and shell.all_releases() == [req]


def test_a_request_lost_in_transport_keeps_its_memory_until_answered_by_the_next_worker():
    shell = Recorder()
    req = shell.submit()
    limit = shell.options.timeouts.silence_limit
    shell.advance(limit / 2)
    shell.beat(0)  # alive, yet its page never shows the request
    shell.advance(limit / 2)
    assert shell.signals[-1].kill and req.tracking.id not in shell.results
    assert shell.releases(req) == 0
    shell.obey_signals()
    assert shell.sent_to(0)[-1] is req and shell.releases(req) == 0
    shell.receive(0)
    shell.reply(0, req, value=4)
    assert shell.result(req) == (Ran(), [4]) and shell.releases(req) == 1


def test_a_crashed_request_retried_is_released_once_when_the_retry_answers():
    shell = Recorder(restart={"max_restarts": 10})
    req = shell.submit(retries=1)
    shell.receive(0)
    shell.die(0, -signal.SIGSEGV)
    assert req.tracking.id not in shell.results and shell.releases(req) == 0
    shell.receive(0)
    shell.reply(0, req, value=5)
    assert shell.releases(req) == 1 and shell.all_releases() == [req]


def test_a_request_failed_by_its_workers_crash_is_released_once():
    shell = Recorder(restart={"max_restarts": 10})
    req = shell.submit(retries=0)
    shell.receive(0)
    shell.die(0, -signal.SIGSEGV)
    assert isinstance(shell.result(req), WorkerCrashedError)
    assert shell.all_releases() == [req]


def test_a_request_of_a_worker_stuck_without_heartbeats_is_released_at_its_exit():
    shell = Recorder(timeouts={"heartbeat": 5.0})
    req = shell.submit()
    shell.receive(0)
    shell.advance(5.1)
    assert isinstance(shell.result(req), WorkerCrashedError)
    assert shell.signals[-1].kill and shell.releases(req) == 0
    shell.obey_signals()
    assert shell.all_releases() == [req]


def test_requests_of_a_failing_pool_are_released_once_no_worker_runs_them():
    shell = Recorder(workers=2, restart={"max_restarts": 0}, timeouts={"kill_grace": 1.0})
    crashing = shell.submit(retries=0)
    running = shell.submit()
    queued = shell.submit()
    shell.receive(0)
    shell.receive(1)
    shell.die(0, 3)  # more deaths than max_restarts=0: the pool fails
    assert shell.machine.state == "failed"
    for req in (running, queued):
        assert isinstance(shell.result(req), PoolFailedError)
    assert shell.releases(crashing) == 1 and shell.releases(queued) == 1
    assert shell.releases(running) == 0  # worker 1 is still being stopped
    shell.advance(1.0)
    shell.obey_signals()
    assert all(shell.releases(r) == 1 for r in (crashing, running, queued))
    assert len(shell.all_releases()) == 3


def test_a_worker_released_at_exit_holds_nothing_for_its_replacement():
    """Held memory is the exited process's: its replacement serves and releases its own."""
    shell = Recorder(timeouts={"kill_grace": 1.0})
    late = shell.submit(timeout=1.0)
    shell.receive(0)
    shell.advance(1.0)
    shell.obey_signals()
    assert shell.all_releases() == [late]
    nxt = shell.submit(timeout=1.0)
    shell.receive(0)
    shell.reply(0, nxt, value=6)
    assert shell.all_releases() == [late, nxt]
    shell.advance(5.0)
    assert len(shell.all_releases()) == 2


def test_every_callers_request_is_freed_once_and_the_pools_own_never():
    shell = Recorder(workers=2, restart={"max_restarts": 10}, timeouts={"kill_grace": 1.0})
    answered = shell.submit()
    shell.receive(0)
    shell.reply(0, answered, value=1)
    late = shell.submit(timeout=1.0)
    shell.receive(0)
    queued = shell.submit(timeout=1.0)
    shell.receive(1)
    stuck_in_queue = shell.submit(timeout=0.5)
    shell.advance(1.0)
    for req in (late, queued, stuck_in_queue):
        assert isinstance(shell.result(req), DispatchTimeoutError)
    shell.obey_signals()
    crashed = shell.submit(retries=0)
    shell.receive(0)
    shell.die(0, -signal.SIGSEGV)
    assert isinstance(shell.result(crashed), WorkerCrashedError)
    closing = shell.submit()
    shell.machine.close(shell.now)
    shell.run()
    shell.advance(1.0)
    shell.obey_signals()
    assert isinstance(shell.result(closing), PoolFailedError)
    callers = (answered, late, queued, stuck_in_queue, crashed, closing)
    assert all(shell.releases(r) == 1 for r in callers)
    assert sorted(r.tracking.id for r in shell.all_releases()) == sorted(
        r.tracking.id for r in callers)
    assert all(w.holding == [] for w in shell.machine.workers)


def test_the_pools_own_requests_are_never_freed():
    """An adoption (the pool's own request to a promoted spare) carries no memory of a
    caller's: neither its answer nor its worker's exit frees anything."""
    shell = Recorder(workers=1, standby=1, restart={"max_restarts": 5})
    running = shell.submit(retries=1)
    shell.receive(0)
    shell.die(0)
    (adopt,) = [a.request for a in shell.sends if a.request.call.op is Op.ADOPT]
    shell.receive(0)
    shell.reply(0)  # the adoption answered: the caller's request goes there again
    assert shell.sent_to(0)[-1] is running
    shell.receive(0)
    shell.reply(0, value=1)
    assert shell.result(running) == (Ran(), [1]) and adopt.done
    shell.die(0)
    assert shell.all_releases() == [running]
