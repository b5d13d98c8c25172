"""The rules of cancelling a call (``PoolMachine.cancel``), without processes; and the
lock-free outcome a call is answered through (outcome.py)."""

from __future__ import annotations

import threading

import pytest
from supervision_harness import Shell, body_of

from vyre_core.boundary.messages import Op, Ran
from vyre_core.errors import DispatchCancelledError
from vyre_core.supervisor.outcome import InvalidStateError, Outcome
from vyre_core.supervisor.rules.actions import Stop
from vyre_core.supervisor.rules.requests import Call, Request

pytestmark = pytest.mark.fast


def test_a_waiting_call_cancelled_is_dropped_and_nothing_is_stopped():
    shell = Shell()
    running = shell.submit()
    waiting = shell.submit()
    shell.machine.cancel(waiting, shell.now)
    done = shell.run()
    assert isinstance(shell.result(waiting), DispatchCancelledError)
    assert "before it ran" in shell.result(waiting).cause
    assert not any(isinstance(a, Stop) for a in done)
    shell.reply(0, running)
    assert shell.sent_to(0) == [running]  # the cancelled one never goes out


def test_a_running_call_cancelled_tells_its_worker_which_then_serves_the_next_at_once():
    shell = Shell()
    req = shell.submit()
    shell.receive(0)
    after = shell.submit()
    shell.machine.cancel(req, shell.now)
    done = shell.run()
    assert Stop(0, req.tracking.id) in done
    assert isinstance(shell.result(req), DispatchCancelledError)
    assert shell.worker(0).state == "busy" and shell.sent_to(0) == [req]  # still stopping
    shell.reply(0, req, error=DispatchCancelledError("stopped"))  # its safe point
    assert shell.sent_to(0) == [req, after] and shell.resolved_count[req.tracking.id] == 1
    assert not shell.signals and shell.worker(0).deaths == 0


def test_a_worker_that_does_not_stop_within_the_grace_is_killed_as_a_planned_stop():
    shell = Shell(restart={"max_restarts": 0}, timeouts={"cancel_grace": 0.25})
    for _ in range(3):  # never charged: even max_restarts=0 does not fail the pool
        req = shell.submit()
        shell.receive(0)
        shell.machine.cancel(req, shell.now)
        shell.run()
        shell.advance(0.25)
        assert [(s.index, s.kill) for s in shell.signals] == [(0, True)]
        shell.obey_signals()
        assert shell.worker(0).deaths == 0 and shell.machine.state == "running"
        assert shell.machine.metrics.snapshot()["restarts"].get("crashed") is None
    assert shell.machine.metrics.snapshot()["restarts"]["cancelled"] == 3


def test_a_big_reply_under_way_gets_the_time_it_needs_to_cross():
    shell = Shell(timeouts={"cancel_grace": 0.25})
    req = shell.submit()
    shell.receive(0)
    shell.machine.cancel(req, shell.now)
    shell.run()
    rid = req.tracking.id
    shell.machine.progress(0, rid, rid, shell.now, reply_bytes=10**9)  # answered
    shell.advance(1.0)
    assert not shell.signals  # (10 s allowed for 1 GB at the transfer floor)


def test_cancel_after_the_answer_is_a_no_op():
    shell = Shell()
    req = shell.submit()
    shell.reply(0, req, value=1)
    shell.machine.cancel(req, shell.now)
    assert shell.run() == [] and shell.result(req) == (Ran(), [1])


def test_an_answered_outcome_lets_go_of_its_cancel_hook():
    """The hook holds the call it would cancel (its request, and so its arrays): once the
    outcome is complete it can never run, so it is dropped, and the caller holding the
    outcome holds no more than the answer."""
    for complete in (lambda o: o.set_result(7), lambda o: o.set_exception(ValueError())):
        outcome = Outcome()
        outcome.on_cancel = lambda: None
        complete(outcome)
        assert outcome.on_cancel is None and not outcome.cancel()


def test_an_outcome_has_exactly_one_completion_whoever_races():
    for _ in range(200):
        outcome = Outcome()
        told = []
        outcome.on_cancel = (lambda told=told: told.append(1))
        barrier = threading.Barrier(2)
        won = []

        def answer(outcome=outcome, barrier=barrier, won=won):
            barrier.wait()
            try:
                outcome.set_result(7)
                won.append("result")
            except InvalidStateError:
                pass

        thread = threading.Thread(target=answer)
        thread.start()
        barrier.wait()
        if outcome.cancel():
            won.append("cancel")
        thread.join()
        assert len(won) == 1 and len(told) == (won == ["cancel"])
        if won == ["cancel"]:
            with pytest.raises(DispatchCancelledError):
                outcome.result()
        else:
            assert outcome.result() == 7
        assert not outcome.cancel()  # a second cancel, or one after the answer: a no-op


def test_a_call_cancelled_before_the_rules_had_it_is_answered_and_never_runs():
    """Its cancel overtook it in the pool's inbox: answered now; the shell then drops the
    request itself (it is done)."""
    shell = Shell()
    late = Request(Call(body_of(Op.DISPATCH), []))
    shell.machine.cancel(late, shell.now)
    shell.run()
    assert isinstance(shell.result(late), DispatchCancelledError) and late.done
    assert shell.sends == []
