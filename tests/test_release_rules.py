"""When a request's shared memory may be reused: the ``Release`` rule of the supervision
machine, on the pure state machine (no process, socket or clock).

A request's segments go back to the free list as soon as it is answered, unless the worker
it was sent to is still running it (answered by its deadline, by close, by a failing pool,
while that worker is being stopped): then only once that worker has exited, since until
then it may still write there. A request that never reached a worker, or was lost on the
way and sent again, keeps its memory until it is finally answered. Every Release comes
exactly once, and requests without shared memory never produce one."""

from __future__ import annotations

import signal
from typing import Any

import pytest
from supervision_harness import Shell, body_of, deadline_after

from vyre_core.boundary.messages import Op, Ran
from vyre_core.errors import (
    DispatchTimeoutError,
    PoolFailedError,
    WorkerCrashedError,
)
from vyre_core.supervisor.rules.actions import Release, Resolve
from vyre_core.supervisor.rules.requests import Request

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)


class Segment:
    """A sentinel standing for one shared-memory segment (the rules never look inside)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Segment({self.name})"


class Recorder(Shell):
    """The harness shell, also keeping every action in the order the rules gave them."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.actions: list[Any] = []

    def run(self) -> list[Any]:
        done = super().run()
        self.actions += done
        return done

    def submit_shared(self, *, timeout: float | None = None, retries: int = 1,
                      segments: int = 2) -> Request:
        """A dispatch whose data lives in ``segments`` sentinel segments."""
        req = Request(body_of(Op.DISPATCH), [],
                      deadline=deadline_after(timeout, self.now), retries=retries)
        req.shared = [Segment(f"{req.id}.{i}") for i in range(segments)]
        self.machine.submit(req, self.now)
        self.run()
        return req

    def releases(self, req: Request) -> int:
        return sum(isinstance(a, Release) and a.request is req for a in self.actions)

    def all_releases(self) -> list[Request]:
        return [a.request for a in self.actions if isinstance(a, Release)]

    def position(self, kind: type, req: Request) -> int:
        found = [i for i, a in enumerate(self.actions)
                 if isinstance(a, kind) and a.request is req]
        assert len(found) == 1, f"{kind.__name__} of request {req.id}: {len(found)} times"
        return found[0]


def test_a_request_answered_by_its_worker_is_released_right_after_its_resolve():
    shell = Recorder()
    req = shell.submit_shared()
    shell.receive(0)
    assert shell.releases(req) == 0  # running: its memory is the worker's
    shell.reply(0, req, value=1)
    assert shell.result(req) == (Ran(), [1])
    assert shell.releases(req) == 1
    assert shell.position(Resolve, req) < shell.position(Release, req)
    assert shell.worker(0).holding == []
    shell.advance(5.0)
    shell.reply(0, req, value=2)  # a duplicate answer: dropped, released nothing more
    assert shell.releases(req) == 1 and shell.all_releases() == [req]


def test_a_request_past_its_deadline_while_running_is_released_only_when_its_worker_exits():
    shell = Recorder(timeouts={"kill_grace": 2.0})
    req = shell.submit_shared(timeout=1.0)
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
    assert shell.resolved_count[req.id] == 1


def test_a_request_past_its_deadline_before_its_worker_took_it_waits_for_the_exit_too():
    """Sent but not yet acknowledged: the worker may be about to take it."""
    shell = Recorder(timeouts={"kill_grace": 2.0})
    req = shell.submit_shared(timeout=1.0)
    assert shell.sent_to(0) == [req]
    shell.advance(1.0)
    assert isinstance(shell.result(req), DispatchTimeoutError)
    assert shell.releases(req) == 0
    shell.obey_signals()
    assert shell.releases(req) == 1


def test_a_request_resolved_by_close_while_running_is_released_only_at_its_workers_exit():
    shell = Recorder(workers=2, timeouts={"kill_grace": 1.0})
    running = shell.submit_shared()
    queued = shell.submit_shared()
    shell.receive(0)
    shell.receive(1)
    waiting = shell.submit_shared()
    assert waiting.state == "queued"
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
    assert sorted(r.id for r in shell.all_releases()) == sorted(
        r.id for r in (running, queued, waiting))
    assert all(shell.releases(r) == 1 for r in (running, queued, waiting))


def test_a_request_that_timed_out_in_the_queue_is_released_at_once():
    shell = Recorder()
    busy = shell.submit_shared()
    shell.receive(0)
    queued = shell.submit_shared(timeout=1.0)
    assert queued.state == "queued" and queued.worker is None
    shell.advance(1.0)
    error = shell.result(queued)
    assert isinstance(error, DispatchTimeoutError) and "waiting for a worker" in error.cause
    assert shell.all_releases() == [queued]
    assert shell.position(Resolve, queued) < shell.position(Release, queued)
    assert shell.signals == [] and busy.id not in shell.results  # nobody killed for it
    shell.reply(0, busy, value=1)
    assert shell.all_releases() == [queued, busy]


def test_a_request_past_its_deadline_at_submit_is_released_at_once():
    shell = Recorder()
    req = shell.submit_shared(timeout=0.0)
    assert isinstance(shell.result(req), DispatchTimeoutError)
    assert shell.all_releases() == [req] and shell.spawns == []


def test_a_request_lost_before_its_worker_took_it_keeps_its_memory_until_answered():
    shell = Recorder(restart={"max_restarts": 10})
    req = shell.submit_shared(retries=0)
    shell.die(0)  # killed before its main thread took the request: sent again
    assert req.id not in shell.results and shell.releases(req) == 0
    assert shell.sent_to(0) == [req, req]
    shell.die(0)
    assert req.id not in shell.results and shell.releases(req) == 0
    shell.receive(0)
    shell.advance(1.0)
    assert shell.releases(req) == 0
    shell.reply(0, req, value=3)
    assert shell.result(req) == (Ran(), [3])
    assert shell.releases(req) == 1 and shell.all_releases() == [req]


def test_a_request_lost_in_transport_keeps_its_memory_until_answered_by_the_next_worker():
    shell = Recorder()
    req = shell.submit_shared()
    limit = shell.options.timeouts.silence_limit
    shell.advance(limit / 2)
    shell.beat(0)  # alive, yet its page never shows the request
    shell.advance(limit / 2)
    assert shell.signals[-1].kill and req.id not in shell.results
    assert shell.releases(req) == 0
    shell.obey_signals()
    assert shell.sent_to(0)[-1] is req and shell.releases(req) == 0
    shell.receive(0)
    shell.reply(0, req, value=4)
    assert shell.result(req) == (Ran(), [4]) and shell.releases(req) == 1


def test_a_crashed_request_retried_is_released_once_when_the_retry_answers():
    shell = Recorder(restart={"max_restarts": 10})
    req = shell.submit_shared(retries=1)
    shell.receive(0)
    shell.die(0, -signal.SIGSEGV)
    assert req.id not in shell.results and shell.releases(req) == 0
    shell.receive(0)
    shell.reply(0, req, value=5)
    assert shell.releases(req) == 1 and shell.all_releases() == [req]


def test_a_request_failed_by_its_workers_crash_is_released_once():
    shell = Recorder(restart={"max_restarts": 10})
    req = shell.submit_shared(retries=0)
    shell.receive(0)
    shell.die(0, -signal.SIGSEGV)
    assert isinstance(shell.result(req), WorkerCrashedError)
    assert shell.all_releases() == [req]


def test_a_request_of_a_worker_stuck_without_heartbeats_is_released_at_its_exit():
    shell = Recorder(timeouts={"heartbeat": 5.0})
    req = shell.submit_shared()
    shell.receive(0)
    shell.advance(5.1)
    assert isinstance(shell.result(req), WorkerCrashedError)
    assert shell.signals[-1].kill and shell.releases(req) == 0
    shell.obey_signals()
    assert shell.all_releases() == [req]


def test_requests_of_a_failing_pool_are_released_once_no_worker_runs_them():
    shell = Recorder(workers=2, restart={"max_restarts": 0}, timeouts={"kill_grace": 1.0})
    crashing = shell.submit_shared(retries=0)
    running = shell.submit_shared()
    queued = shell.submit_shared()
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
    late = shell.submit_shared(timeout=1.0)
    shell.receive(0)
    shell.advance(1.0)
    shell.obey_signals()
    assert shell.all_releases() == [late]
    nxt = shell.submit_shared(timeout=1.0)
    shell.receive(0)
    shell.reply(0, nxt, value=6)
    assert shell.all_releases() == [late, nxt]
    shell.advance(5.0)
    assert len(shell.all_releases()) == 2


def test_requests_without_shared_memory_never_produce_a_release():
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
    assert shell.all_releases() == []
    assert all(w.holding == [] for w in shell.machine.workers)
