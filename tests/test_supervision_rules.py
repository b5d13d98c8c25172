"""Every supervision rule, one test each, on the pure state machine (no process, socket or
clock): deadlines from submit, lost and frozen requests, retries and poison requests,
restart intensity with a cool-down, the handshake, spawn failures, what routing keeps,
recycling, device recovery and close. The same rules run under real processes in
tests/faults; here each is checked in microseconds."""

from __future__ import annotations

import gc
import logging
import signal
import weakref

import pytest
from supervision_harness import CAPS, PROOF, Shell, body_of

from vyre_core.boundary.messages import (
    Compiled,
    Failed,
    HelloFailed,
    Message,
    Op,
    Ran,
    Recovered,
    TryRecover,
)
from vyre_core.deadline import Deadline
from vyre_core.errors import (
    DeviceLostError,
    DispatchCancelledError,
    DispatchError,
    DispatchTimeoutError,
    InvalidConfigError,
    InvalidInputError,
    MessageLostError,
    PipelineInvalidatedError,
    PoolFailedError,
    ProtocolError,
    SystemResourceError,
    VyreError,
    WorkerCrashedError,
)
from vyre_core.supervisor.options import RestartPolicy
from vyre_core.supervisor.rules.actions import Send
from vyre_core.supervisor.rules.constants import (
    MAX_RESENDS,
    OUTPUT_IN_ERRORS,
    START_ERROR_CHARS,
    START_TRIES,
)
from vyre_core.supervisor.rules.requests import Call, Request
from vyre_core.supervisor.rules.states import WorkerState

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)

# -- deadlines run from submit -----------------------------------------------------------------


def test_a_queued_request_times_out_at_its_own_deadline_not_when_the_one_ahead_ends():
    """Defect 2: a timeout=1 call queued behind an 8 s call returned after 8 s."""
    shell = Shell()
    long = shell.submit(timeout=None)
    shell.receive(0)
    short = shell.submit(timeout=1.0)
    shell.advance(0.99)
    assert short.tracking.id not in shell.results
    shell.advance(0.02)
    error = shell.result(short)
    assert isinstance(error, DispatchTimeoutError) and error.details["timeout"] == 1.0
    assert "waiting for a worker" in error.cause and "1 busy" in error.cause
    assert long.tracking.id not in shell.results and shell.signals == []  # nobody killed for it
    assert logged(shell, logging.WARNING, "ran past its 1 s deadline waiting for a worker")


def test_a_pool_that_never_starts_cannot_hold_a_request_past_its_deadline():
    """Defect 2: workers that never start cost 18 s with Timeouts(startup=3)."""
    shell = Shell(auto_hello=False, restart={"max_restarts": 5}, timeouts={"startup": 3.0})
    req = shell.submit(timeout=1.0)
    shell.advance(1.01)
    assert isinstance(shell.result(req), DispatchTimeoutError)
    assert "starting" in shell.result(req).cause


def test_a_running_request_past_its_deadline_is_answered_then_its_worker_stopped():
    shell = Shell(timeouts={"kill_grace": 2.0})
    req = shell.submit(timeout=1.0)
    shell.receive(0)
    shell.advance(1.0)
    assert isinstance(shell.result(req), DispatchTimeoutError)
    assert "worker 0 was killed" in shell.result(req).cause
    assert [(s.index, s.kill) for s in shell.signals] == [(0, False)]  # SIGTERM first
    shell.advance(2.0)
    assert [(s.index, s.kill) for s in shell.signals] == [(0, False), (0, True)]
    shell.die(0)
    assert shell.worker(0).generation == 2 and shell.worker(0).deaths == 0  # planned
    shell.reply(0, req)  # even a reply slipping through now reaches nobody
    assert shell.resolved_count[req.tracking.id] == 1


def test_the_deadline_survives_a_retry():
    shell = Shell()
    req = shell.submit(timeout=2.0)
    shell.receive(0)
    shell.advance(1.5)
    shell.die(0)  # retried on the replacement ...
    assert shell.sent_to(0) == [req, req]
    shell.receive(0)
    shell.advance(0.6)  # ... but its deadline is still 2 s after submit
    assert isinstance(shell.result(req), DispatchTimeoutError)


def test_a_request_already_past_its_deadline_is_answered_at_submit():
    shell = Shell()
    req = shell.submit(timeout=0.0)
    assert isinstance(shell.result(req), DispatchTimeoutError)
    assert shell.spawns == []  # nothing started for it


def test_a_request_without_deadline_waits_while_its_worker_is_alive_and_running_it():
    shell = Shell(timeouts={"heartbeat": 30.0})
    req = shell.submit()
    shell.receive(0)
    for _ in range(100):  # 500 s of heartbeats: still running, still waiting
        shell.advance(5.0)
        shell.beat(0)
    assert req.tracking.id not in shell.results
    shell.reply(0, req, value=7)
    assert shell.result(req) == (Ran(), [7])


# -- requests that never arrive, workers that freeze ----------------------------------------------


def test_a_request_lost_in_transport_goes_to_a_fresh_worker_then_fails_clearly():
    """Defect 4: a worker that stays alive but never takes a request off its lane (with
    ZeroMQ lanes: a message it could not allocate, dropped without an error) is replaced,
    the request goes to the new one, and after three tries fails clearly."""
    shell = Shell(restart={"max_restarts": 0})
    req = shell.submit()
    limit = shell.options.timeouts.silence_limit
    for attempt in range(MAX_RESENDS + 1):
        assert shell.sent_to(0)[-1] is req and shell.worker(0).generation == attempt + 1
        shell.advance(limit / 2)
        shell.beat(0)  # alive, yet its page never shows the request
        shell.advance(limit / 2)
        assert shell.signals[-1].kill  # unreachable now: replaced
        shell.obey_signals()
    error = shell.result(req)
    assert isinstance(error, MessageLostError) and "never reached worker 0" in error.cause
    assert "in 3 tries" in error.cause and "Fix:" in str(error)
    assert "worker that lost it was replaced" in error.fix
    assert shell.machine.state == "running"  # the request's fault: no restart counted
    assert shell.machine.lost_messages == MAX_RESENDS + 1


def test_a_request_the_transport_refuses_to_send_goes_to_a_fresh_worker():
    shell = Shell()
    req = shell.submit()
    shell.machine.send_failed(0, req, "Host unreachable", shell.now)
    shell.run()
    assert shell.worker(0).state == "killing" and req.tracking.id not in shell.results
    shell.obey_signals()
    assert shell.sent_to(0)[-1] is req and shell.worker(0).generation == 2
    shell.receive(0)
    shell.reply(0, value=2)
    assert shell.result(req) == (Ran(), [2])


def test_a_request_that_arrives_late_is_answered_once():
    shell = Shell()
    req = shell.submit()
    shell.receive(0, req)
    shell.reply(0, req, value=1)
    shell.reply(0, req, value=2)  # a second answer for it: dropped
    assert shell.result(req) == (Ran(), [1]) and shell.resolved_count[req.tracking.id] == 1
    assert shell.machine.dropped_replies == 1


def test_a_request_sent_to_a_frozen_idle_worker_runs_on_its_replacement():
    """Defect 5: a worker stopped while idle got the next request, which failed after
    Timeouts.heartbeat without ever having run, and was not retried."""
    shell = Shell(timeouts={"heartbeat": 30.0})
    shell.submit()  # start the pool
    shell.reply(0)
    shell.advance(0.4)  # SIGSTOP here: silence from now on
    req = shell.submit(retries=0)  # no retries allowed: it never ran, so that is fine
    assert shell.sent_to(0)[-1] is req
    shell.advance(shell.options.timeouts.silence_limit)
    assert shell.signals[-1].kill and shell.worker(0).state == "killing"
    assert req.tracking.id not in shell.results
    shell.die(0)
    assert shell.sent_to(0)[-1] is req  # on the replacement
    shell.receive(0)
    shell.reply(0, value=3)
    assert shell.result(req) == (Ran(), [3])
    assert shell.worker(0).deaths == 1  # a frozen worker is a fault: it counts


def test_an_idle_worker_silent_with_work_waiting_is_replaced_before_anything_is_sent():
    shell = Shell()
    shell.submit()
    shell.reply(0)
    shell.now += shell.options.timeouts.silence_limit + 0.1  # silent, and nothing ticked meanwhile
    req = shell.submit()
    assert req not in shell.sent_to(0)[:-1] and shell.signals[-1].kill
    shell.die(0)
    assert shell.sent_to(0)[-1] is req


def test_an_idle_worker_silent_past_heartbeat_timeout_is_replaced():
    shell = Shell(timeouts={"heartbeat": 5.0})
    shell.submit()
    shell.reply(0)
    shell.advance(5.1)
    assert shell.signals[-1].kill
    shell.die(0)
    assert shell.worker(0).generation == 2 and shell.worker(0).state == "idle"


def test_a_worker_holding_the_gil_is_not_judged_frozen_before_heartbeat_timeout():
    """Its page shows the request: it runs, merely without heartbeats."""
    shell = Shell(timeouts={"heartbeat": 30.0})
    req = shell.submit()
    shell.receive(0)
    shell.advance(29.0)
    assert req.tracking.id not in shell.results and shell.signals == []
    shell.advance(1.1)
    error = shell.result(req)
    assert isinstance(error, WorkerCrashedError) and "no heartbeat" in error.cause
    assert shell.signals[-1].kill
    shell.die(0)
    assert shell.worker(0).deaths == 1  # stuck is a fault: it counts


def test_a_reply_lost_on_its_way_back_fails_the_request_clearly():
    shell = Shell()
    req = shell.submit()
    shell.machine.progress(0, req.tracking.id, req.tracking.id, shell.now)  # answered, per its page
    shell.advance(shell.options.timeouts.silence_limit)
    error = shell.result(req)
    assert isinstance(error, MessageLostError) and "reply" in error.cause
    assert shell.worker(0).state == "idle"  # the worker itself is fine


# -- crashes, retries, poison -------------------------------------------------------------------


def test_a_crash_while_running_is_retried_once_and_a_second_makes_it_poison():
    shell = Shell(restart={"max_restarts": 10})
    req = shell.submit(retries=1)
    shell.receive(0)
    shell.die(0, -signal.SIGSEGV, "boom")
    assert req.tracking.id not in shell.results and shell.sent_to(0)[-1] is req
    assert logged(shell, logging.INFO, "was cut off; running it again (retry 1 of 1)")
    shell.receive(0)
    shell.die(0, -signal.SIGSEGV, "boom")
    error = shell.result(req)
    assert isinstance(error, WorkerCrashedError) and "poison" in error.cause
    assert logged(shell, logging.WARNING, "killed 2 workers: failed as a poison request")
    assert "SIGSEGV" in error.cause and error.details["stderr"] == "boom"
    assert shell.machine.state == "running"


@pytest.mark.parametrize("retries", [0, 5])
def test_retries_zero_fails_at_the_first_crash_and_more_never_exceed_poison(retries):
    shell = Shell(restart={"max_restarts": 10})
    req = shell.submit(retries=retries)
    shell.receive(0)
    shell.die(0, 17)
    if retries == 0:
        assert isinstance(shell.result(req), WorkerCrashedError)
        return
    shell.receive(0)
    shell.die(0, 17)
    assert "poison" in shell.result(req).cause


def test_a_death_before_the_request_arrived_resends_it_without_spending_retries():
    shell = Shell(restart={"max_restarts": 10})
    req = shell.submit(retries=0)
    for resend in range(1, MAX_RESENDS + 1):
        shell.die(0)  # killed before its main thread took the request
        assert req.tracking.id not in shell.results
        assert logged(shell, logging.INFO, f"sending it again (resend {resend} of "
                                           f"{MAX_RESENDS})")
    shell.receive(0)
    shell.reply(0, value=1)
    assert shell.result(req) == (Ran(), [1])


def test_a_pinned_request_fails_with_its_worker():
    shell = Shell()
    shell.submit()
    shell.reply(0)
    running = shell.submit(slot=0, generation=1)
    queued = shell.submit(slot=0, generation=1)
    shell.receive(0)
    shell.die(0)
    assert isinstance(shell.result(running), WorkerCrashedError)
    assert isinstance(shell.result(queued), PipelineInvalidatedError)
    late = shell.submit(slot=0, generation=1)
    assert isinstance(shell.result(late), PipelineInvalidatedError)
    assert "Fix:" in str(shell.result(late))


def test_a_pinned_request_naming_a_worker_that_does_not_exist_is_refused():
    shell = Shell()
    req = shell.submit(slot=5, generation=1)
    assert isinstance(shell.result(req), InvalidInputError)


def test_an_abort_while_running_is_a_lost_device():
    shell = Shell()
    req = shell.submit()
    shell.receive(0)
    shell.die(0, -signal.SIGABRT)
    assert isinstance(shell.result(req), DeviceLostError)


# -- restart intensity, the breaker, the cool-down --------------------------------------------


def test_every_unexpected_death_counts_busy_or_idle_and_fails_the_pool_past_the_limit():
    """Defect 6: deaths while serving never counted; a backend crashing on every request
    was restarted forever and routing never fell over."""
    shell = Shell(restart={"max_restarts": 3, "window": 60.0})
    victims = [shell.submit(retries=0) for _ in range(2)]
    shell.receive(0)
    shell.die(0)                      # busy death 1
    shell.receive(0)
    shell.die(0)                      # busy death 2
    shell.advance(1.0)
    shell.die(0)                      # idle death 3
    assert shell.machine.state == "running"
    waiting = shell.submit()
    shell.die(0)                      # death 4: more than 3 in the window
    assert shell.machine.state == "failed"
    assert all(isinstance(shell.result(r), WorkerCrashedError) for r in victims)
    error = shell.result(waiting)
    assert isinstance(error, PoolFailedError) and error.details["backend"] == "b"
    assert "4 worker deaths in 60 s" in error.cause and "Next try in 30 s" in error.cause
    assert "omit backend=" in error.fix
    assert shell.routing_changes >= 2  # the hello, and the failure


def test_deaths_older_than_the_window_are_forgotten():
    shell = Shell(restart={"max_restarts": 1, "window": 10.0})
    shell.submit()
    shell.die(0)
    shell.advance(10.5)
    shell.die(0)
    assert shell.machine.state == "running"


def test_the_intensity_is_per_worker_process_spares_included():
    """Issue 38 row 5: every death counted against one pool-wide max_restarts, so a pool
    of 8 bore no more deaths than a pool of one and random kills failed big pools."""
    shell = Shell(workers=2, standby=1, restart={"max_restarts": 2, "window": 60.0})
    shell.submit()
    for death in range(6):  # 2 per process x 3 processes
        shell.die(death % 3)
        assert shell.machine.state == "running", death
    waiting = shell.submit()
    shell.die(0)
    assert shell.machine.state == "failed"
    assert "7 worker deaths in 60 s (more than max_restarts=2 x 3 workers)" \
        in shell.result(waiting).cause


def test_the_default_intensity_bears_a_kill_a_second_but_fails_a_crash_loop():
    """The defaults keep a pool of one serving under a SIGKILL every second (the fault
    suite's soak kills every 1-3 s) and still fail a backend that dies at once on every
    start within about a second."""
    defaults = RestartPolicy()
    knobs = {"max_restarts": defaults.max_restarts, "window": defaults.window}
    shell = Shell(restart=knobs)
    shell.submit()
    for _ in range(300):  # five minutes of kills
        shell.advance(1.0)
        shell.die(0)
        assert shell.machine.state == "running"
    looping = Shell(restart=knobs)
    looping.submit()
    while looping.machine.state == "running":
        looping.advance(0.05)  # a fork-server restart and a crash on the next request
        looping.die(0)
    assert looping.now <= 1.0


def test_a_worker_dying_while_it_stops_for_a_cancelled_call_is_not_charged():
    """The caller caused that stop: killed at cancel_grace it was a planned stop already;
    dying before it (on the stop itself) is charged no more than that."""
    shell = Shell(restart={"max_restarts": 0})
    req = shell.submit()
    shell.receive(0)
    shell.machine.cancel(req, shell.now)
    shell.run()
    shell.die(0, -6)
    assert shell.machine.state == "running" and shell.worker(0).deaths == 0
    assert isinstance(shell.result(req), DispatchCancelledError)


def test_planned_stops_never_count():
    shell = Shell(restart={"max_restarts": 0, "recycle_after": 1}, timeouts={"kill_grace": 1.0})
    for _ in range(3):
        req = shell.submit(timeout=1.0)
        shell.receive(0)
        shell.advance(1.0)  # deadline: SIGTERM, planned
        shell.obey_signals()
    recycled = shell.submit()
    shell.reply(0, recycled)
    assert shell.sent_to(0)[-1].call.op is Op.SHUTDOWN
    shell.die(0, 0)
    assert shell.machine.state == "running" and shell.worker(0).deaths == 0
    assert isinstance(shell.result(req), DispatchTimeoutError)


def test_a_failed_pool_answers_at_once_then_tries_again_after_its_cooldown():
    shell = Shell(restart={"max_restarts": 0, "cooldown": 30.0})
    shell.submit()
    shell.die(0, 3, "Traceback: broken")
    assert shell.machine.state == "failed"
    assert "next try in 30 s" in shell.machine.unavailable(shell.now)
    shell.advance(10.0)
    early = shell.submit()
    assert isinstance(shell.result(early), PoolFailedError)
    assert shell.result(early).details["retry_in"] == pytest.approx(20.0)
    assert shell.result(early).details["stderr"] == "Traceback: broken"
    spawns = len(shell.spawns)
    changes = shell.routing_changes
    shell.advance(20.0)
    shell.advance(1.0)
    assert shell.routing_changes == changes + 1  # routing may use it again: told once
    assert shell.machine.unavailable(shell.now) is None and len(shell.spawns) == spawns
    req = shell.submit()  # the next call starts it: half open
    assert len(shell.spawns) == spawns + 1 and shell.machine.half_open is False  # hello
    shell.reply(0, req, value=1)
    assert shell.result(req) == (Ran(), [1])


def test_one_death_right_after_the_cooldown_fails_the_pool_again():
    shell = Shell(restart={"max_restarts": 0, "cooldown": 5.0}, auto_hello=False)
    shell.submit()
    shell.hello(0)  # (it served once: a pool that never started says so instead)
    shell.die(0, 3)
    shell.advance(5.0)
    req = shell.submit()
    assert shell.machine.half_open
    shell.die(0, 3)
    assert shell.machine.state == "failed" and isinstance(shell.result(req), PoolFailedError)
    assert "failed again right after its cool-down" in shell.result(req).cause


def test_a_worker_that_never_says_hello_is_killed_and_counted():
    shell = Shell(auto_hello=False, restart={"max_restarts": 1}, timeouts={"startup": 3.0})
    req = shell.submit()
    shell.advance(3.0)
    assert shell.signals[-1].kill
    shell.obey_signals()
    shell.advance(3.0)
    shell.obey_signals()
    assert shell.machine.state == "failed"
    assert "no hello within 3 s" in shell.result(req).cause


def logged(shell: Shell, level: int, text: str) -> bool:
    """Whether the rules logged ``text`` at ``level`` (into ``vyre.supervisor``)."""
    return any(log.level == level and text in log.text for log in shell.logs)


def test_a_worker_that_says_hello_is_logged_as_up():
    shell = Shell(workers=1, standby=1, devices=(3,))
    shell.submit()
    assert logged(shell, logging.INFO, "pool 'b': worker 0 (pid ")
    assert logged(shell, logging.INFO, "generation 1 is up on device 3")
    assert logged(shell, logging.INFO, "generation 1 is up on device 3 (a spare)")


def hello_failed(shell: Shell, index: int, cause: str, tb: str) -> None:
    w = shell.worker(index)
    shell.machine.message(w.identity, Message(HelloFailed(
        error=DispatchError(cause, "This is a bug in the backend.").to_dict(),
        traceback=tb, proof=PROOF), 0, w.generation), shell.now)


TRACEBACK = ("Traceback (most recent call last):\n" + '  File "plugin.py", line 1\n' * 200
             + "ImportError: no module named 'cuda'\n")


def test_a_backend_that_never_started_is_given_up_after_two_tries_with_a_short_error():
    """Before: a backend failing at import was started max_restarts + 1 times and the
    error was one line of 3,000 characters (every traceback line) with a generic Fix."""
    shell = Shell(auto_hello=False, restart={"max_restarts": 5})
    req = shell.submit()
    for tries in range(1, START_TRIES + 1):
        assert shell.worker(0).generation == tries and shell.machine.state == "running"
        hello_failed(shell, 0, "starting backend 'b' failed: ImportError: no module named "
                               "'cuda'", TRACEBACK)
        shell.die(0, 3, output=TRACEBACK)
    assert shell.machine.state == "failed" and shell.worker(0).generation == START_TRIES
    error = shell.result(req)
    assert isinstance(error, PoolFailedError)
    first = error.cause.splitlines()[0]
    assert f"cannot start ({START_TRIES} tries, none said hello); last: worker 0 (pid " in first
    assert first.endswith("exited with status 3: starting backend 'b' failed: ImportError: "
                          "no module named 'cuda'")
    assert len(error.cause.splitlines()) == 2 and len(error.cause) < 400
    assert "Make 'b' start" in error.fix and "vyre doctor" in error.fix
    assert error.details["stderr"].endswith(TRACEBACK[-OUTPUT_IN_ERRORS:])
    assert len(error.details["stderr"]) == OUTPUT_IN_ERRORS
    shell.advance(1.0)
    assert shell.worker(0).generation == START_TRIES  # and no third start


def test_a_start_error_is_quoted_short_in_the_first_line():
    shell = Shell(auto_hello=False, restart={"max_restarts": 5})
    req = shell.submit()
    for _ in range(START_TRIES):
        hello_failed(shell, 0, "ImportError: " + "numpy is broken " * 100, TRACEBACK)
        shell.die(0, 3, output=TRACEBACK)
    first = shell.result(req).cause.splitlines()[0]
    assert first.endswith("...") and len(first) < START_ERROR_CHARS + 150
    assert len(shell.machine.unavailable(shell.now)) < START_ERROR_CHARS + 200


def test_start_failures_of_some_workers_do_not_fail_a_pool_others_may_start():
    """Found in review: one counter for the whole pool failed four workers when two of
    them failed once each (a signal during four simultaneous imports), or when one device
    could not start while the others were about to say hello."""
    shell = Shell(auto_hello=False, workers=4, restart={"max_restarts": 5})
    shell.submit()
    shell.die(1, -9)
    shell.die(2, -9)
    assert shell.machine.state == "running"
    for _ in range(START_TRIES):  # worker 3 (its device, say) cannot start at all
        shell.die(3, 3)
    assert shell.machine.state == "running"
    shell.hello(0)
    assert shell.machine.state == "running" and shell.worker(0).state in ("idle", "busy")
    # every worker failing twice is the backend: the pool fails without using up the
    # restart intensity
    shell = Shell(auto_hello=False, workers=3, restart={"max_restarts": 10})
    req = shell.submit()
    for _ in range(START_TRIES):
        for index in range(3):
            shell.die(index, 3)
    assert shell.machine.state == "failed"
    assert f"({3 * START_TRIES} tries, none said hello)" in shell.result(req).cause


def test_a_silent_start_failure_is_named_by_the_last_line_it_wrote():
    shell = Shell(auto_hello=False, restart={"max_restarts": 5})
    req = shell.submit()
    for _ in range(START_TRIES):
        shell.die(0, -11, output="Fatal Python error: Segmentation fault\n\n")
    first = shell.result(req).cause.splitlines()[0]
    assert first.endswith("killed by SIGSEGV: Fatal Python error: Segmentation fault")


def test_a_backend_that_started_once_gets_the_whole_restart_intensity():
    shell = Shell(auto_hello=False, restart={"max_restarts": 3, "window": 60.0})
    shell.submit()
    shell.hello(0)
    for death in range(3):  # dies, and its replacements die before their hello
        shell.die(0, 3)
        assert shell.machine.state == "running", death
    shell.die(0, 3)
    assert shell.machine.state == "failed"
    assert "4 worker deaths" in shell.machine.failure.cause


# -- who may talk to us ------------------------------------------------------------------------


def test_strangers_and_bad_handshakes_are_dropped_and_counted():
    """Defect 9: an impostor squatting a worker identity received requests."""
    shell = Shell(auto_hello=False)
    req = shell.submit()
    shell.machine.message(b"someone", Message(Ran(), req.tracking.id, 1), shell.now)
    shell.hello(0, proof=b"guess")
    w = shell.identity(0)
    shell.machine.message(w, Message(Ran(), req.tracking.id, 1), shell.now)  # before hello
    assert shell.machine.rejected_messages == 3
    assert shell.worker(0).state == "starting" and shell.sent_to(0) == []
    shell.hello(0)
    assert shell.sent_to(0) == [req]


def test_late_and_stray_replies_are_dropped():
    shell = Shell()
    req = shell.submit(timeout=1.0)
    shell.receive(0)
    shell.advance(1.0)
    old = shell.identity(0)
    shell.die(0)
    shell.machine.message(old, Message(Ran(), req.tracking.id, 1), shell.now)  # a dead one's
    other = shell.submit()
    shell.reply(0, other, gen=1)  # from an earlier generation
    wrong = Message(Ran(), other.tracking.id + 100, shell.worker(0).generation)
    shell.machine.message(shell.identity(0), wrong, shell.now)
    assert shell.machine.dropped_replies == 3 and other.tracking.id not in shell.results


@pytest.mark.parametrize("error", [None, 7, "text", {"code": "x", "details": [1]},
                                   {"code": 1302, "details": {"cause": 1, 2: 3}}])
def test_an_error_reply_of_any_shape_resolves_the_request(error):
    """Defect 9: an ERROR with a malformed details dict crashed the supervisor thread."""
    shell = Shell()
    req = shell.submit()
    shell.machine.message(shell.identity(0), Message(Failed(error), req.tracking.id, 1),
                          shell.now)
    shell.run()
    assert isinstance(shell.result(req), VyreError)
    assert shell.worker(0).state == "idle"


def test_an_error_for_an_unreadable_request_id_fails_the_request_in_flight():
    shell = Shell()
    req = shell.submit()
    shell.machine.message(shell.identity(0), Message(Failed(
        ProtocolError("header too big").to_dict()), 0, 1), shell.now)
    shell.run()
    assert isinstance(shell.result(req), ProtocolError)


def test_a_reply_of_the_wrong_class_fails_its_request_with_a_protocol_error():
    """Each request has one reply class (``messages.REPLY_OF``): a ``Compiled`` answering
    a dispatch is a worker that does not speak our protocol, never a result."""
    shell = Shell()
    req = shell.submit(label="step")
    shell.receive(0)
    shell.reply(0, req, body=Compiled(pipeline=3, key="k", compile_ns=5))
    error = shell.result(req)
    assert isinstance(error, ProtocolError) and shell.resolved_count[req.tracking.id] == 1
    assert error.cause == "dispatch 'step' was answered with compiled"
    assert error.details["request_id"] == req.tracking.id
    assert shell.worker(0).state == "idle" and shell.machine.dropped_replies == 0
    ok = shell.submit()  # the worker still serves: the right class is a result
    shell.reply(0, ok, value=1)
    assert shell.result(ok) == (Ran(), [1])


def test_the_pipeline_cache_counters_of_a_reply_reach_the_pools_metrics():
    """A reply's envelope carries its worker's pipeline-cache counters (``Message.cache``,
    about once a second): the pool's metrics add them up, and the call's result is the
    reply alone."""
    shell = Shell()
    assert shell.machine.metrics_snapshot()["pipeline_cache"] is None
    req = shell.submit()
    w = shell.worker(0)
    shell.machine.progress(0, req.tracking.id, req.tracking.id, shell.now)
    shell.machine.message(w.identity, Message(Ran(), req.tracking.id, w.generation, [7],
                                              cache=(4, 1, 1)), shell.now)
    shell.run()
    assert shell.result(req) == (Ran(), [7])
    assert shell.machine.metrics_snapshot()["pipeline_cache"] == {
        "hits": 4, "misses": 1, "entries": 1}
    shell.reply(0, shell.submit(), value=8)  # no counters this time: they stay
    shell.reply(0, shell.submit(), value=9, cache=(6, 1, 1))
    assert shell.machine.metrics_snapshot()["pipeline_cache"] == {
        "hits": 6, "misses": 1, "entries": 1}


# -- the OS says no -----------------------------------------------------------------------------


def test_a_refused_spawn_fails_waiting_requests_clearly_and_is_retried_with_backoff():
    """Defect 7: ENOSPC/EMFILE while starting a worker killed the supervisor for good."""
    shell = Shell(auto_start=False)
    req = shell.submit()
    refusal = SystemResourceError("starting worker 0 failed: EMFILE", "Raise ulimit -n.")
    shell.machine.spawn_failed(0, 1, refusal, shell.now)
    shell.run()
    error = shell.result(req)
    assert isinstance(error, SystemResourceError) and "EMFILE" in error.cause
    assert error.fix == "Raise ulimit -n."
    shell.advance(0.1)
    assert [s.generation for s in shell.spawns] == [1, 2]
    shell.machine.spawn_failed(0, 2, refusal, shell.now)
    shell.advance(0.1)
    assert len(shell.spawns) == 2  # backing off: 0.2 s now
    shell.advance(0.1)
    shell.start(0, 3)
    again = shell.submit()
    assert shell.sent_to(0) == [again]  # the pool came back by itself



def test_a_start_refused_by_its_place_is_started_again_and_counts_as_no_death():
    """A Ray node without the backend installed: the worker starts elsewhere; however many
    nodes lack it, the pool's restart intensity is not spent and the request still runs."""
    shell = Shell(auto_hello=False, restart={"max_restarts": 0})
    req = shell.submit()
    for generation in (1, 2, 3):
        shell.machine.start_refused(0, generation, "no entry point 'b'", shell.now)
        shell.run()
    assert [s.generation for s in shell.spawns] == [1, 2, 3, 4]
    assert shell.machine.state == "running" and req.tracking.id not in shell.results
    assert shell.worker(0).deaths == 0 and "could not start there" in shell.worker(0).last_exit
    shell.machine.start_refused(0, 3, "late news of an older start", shell.now)
    shell.run()
    assert len(shell.spawns) == 4  # (only the current start can be refused)
    shell.hello(0)
    assert shell.sent_to(0) == [req]


def test_a_start_that_fails_on_the_callers_configuration_spends_no_restart():
    """PoolOptions(devices=[5]) on a backend with devices 0 and 1 burned every restart and
    buried the backend's Fix under the pool's; now the call gets the backend's own error
    at once, and the worker is tried again with backoff (a device may come back)."""
    shell = Shell(auto_hello=False, restart={"max_restarts": 0})
    req = shell.submit()
    w = shell.worker(0)
    refusal = InvalidConfigError("backend 'b' has no device 5; its devices: 0, 1",
                                 "Name one of these ids in PoolOptions(devices=...).")
    shell.machine.message(w.identity, Message(HelloFailed(
        proof=PROOF, error=refusal.to_dict()), 0, w.generation), shell.now)
    shell.run()
    error = shell.result(req)
    assert isinstance(error, InvalidConfigError) and "no device 5" in error.cause
    assert error.fix == refusal.fix
    shell.advance(1.0)
    assert len(shell.spawns) == 1  # (no second process while the first is still there)
    shell.die(0, 3)  # (the process exits by itself after saying why)
    assert shell.machine.state == "running" and w.deaths == 0 and w.state == "backoff"
    assert "cannot start (backend 'b' has no device 5" in shell.machine.unavailable(shell.now)
    later = shell.submit()  # while it backs off: answered at once, with the same Fix
    assert isinstance(shell.result(later), InvalidConfigError)
    assert shell.result(later).fix == refusal.fix
    shell.advance(0.1)
    assert [s.generation for s in shell.spawns] == [1, 2]
    assert shell.machine.unavailable(shell.now) is None  # (trying again)


def test_a_worker_the_cluster_has_no_room_for_backs_off_and_counts_as_no_death():
    """Ray keeps an actor that no node has room for pending for ever: the shell says so
    before the start deadline, and the caller hears why instead of a pool failure."""
    shell = Shell(auto_hello=False, restart={"max_restarts": 0}, timeouts={"startup": 3.0})
    req = shell.submit(timeout=30)
    room = SystemResourceError("no node has 1 CPU free", "Free resources on the cluster.")
    shell.advance(2.0)
    shell.machine.unplaced(0, 1, room, shell.now)
    shell.run()
    assert isinstance(shell.result(req), SystemResourceError)
    assert "no node has 1 CPU free" in shell.result(req).cause
    assert [s.index for s in shell.signals] == [0]  # (the shell drops the pending attempt)
    shell.die(0)
    assert shell.machine.state == "running" and shell.worker(0).deaths == 0
    shell.advance(0.1)
    assert [s.generation for s in shell.spawns] == [1, 2]


def test_a_send_that_failed_on_a_process_the_slot_no_longer_has_costs_the_new_one_nothing():
    """A caller took worker 0's lane, worker 0 died, a spare took its place and the
    request went to it; the caller's send on the dead lane then failed. That failure is
    about the old process: the spare serving the request now must not be retired."""
    shell = Shell(standby=1)
    req = shell.submit()
    assert shell.sent_to(0) == [req] and shell.worker(0).generation == 1
    shell.die(0)  # (before it took the request: sent again, to the promoted spare)
    w = shell.worker(0)
    shell.reply(0)  # (the spare answers its adoption first)
    assert w.generation == 2 and w.current is req
    shell.machine.send_failed(0, req, "BrokenPipeError", shell.now, generation=1)
    shell.run()
    assert w.state == "busy" and w.current is req and not shell.signals
    shell.machine.send_failed(0, req, "BrokenPipeError", shell.now, generation=2)
    shell.run()
    assert w.state == "killing"  # (the slot's own send failing still counts)

# -- what routing keeps -------------------------------------------------------------------------


def test_probed_capabilities_outlive_a_restart_and_change_only_with_a_new_probe():
    """Defect 13: a restart cleared probed capabilities, so routing fell back to static
    claims (and could send work to a backend it had demoted)."""
    shell = Shell()
    shell.submit()
    probed = shell.machine.capabilities
    changes = shell.routing_changes
    shell.die(0)
    assert shell.machine.capabilities is probed  # meanwhile, still what was probed
    assert shell.routing_changes == changes       # same probe again: nothing to redo
    shell.die(0)
    shell.worker(0).state = WorkerState.STARTING  # a new worker whose probe differs
    shell.worker(0).proven = False
    shell.hello(0, caps={**CAPS, "supports_f64": True})
    assert shell.machine.capabilities.supports_f64 and shell.routing_changes == changes + 1


# -- recycling and device recovery --------------------------------------------------------------


def test_a_worker_over_its_memory_limit_is_recycled_between_requests():
    shell = Shell(restart={"recycle_rss_bytes": 1000})
    req = shell.submit()
    shell.machine.measured(0, 5000)
    shell.reply(0, req, value=1)
    assert shell.result(req) == (Ran(), [1])
    assert shell.sent_to(0)[-1].call.op is Op.SHUTDOWN and shell.worker(0).state == "stopping"


def test_a_lost_device_is_recovered_in_place_with_a_new_generation():
    shell = Shell()
    shell.submit()
    shell.reply(0)
    pinned = shell.submit(slot=0, generation=1)
    shell.reply(0, pinned, error=DeviceLostError("gone", generation=1))
    recover = shell.sent_to(0)[-1]
    assert recover.call.message == TryRecover(2)
    queued = shell.submit(slot=0, generation=1)
    shell.reply(0, recover)  # Recovered(CAPS)
    shell.machine.message(shell.identity(0), Message(Recovered(CAPS), recover.tracking.id, 1),
                          shell.now)
    assert shell.worker(0).generation == 2 and shell.worker(0).state == "idle"
    assert isinstance(shell.result(queued), PipelineInvalidatedError)


def test_a_device_that_cannot_recover_restarts_its_worker_without_counting():
    shell = Shell(restart={"max_restarts": 0})
    shell.submit()
    shell.reply(0)
    req = shell.submit()
    shell.reply(0, req, error=DeviceLostError("gone", generation=1))
    shell.reply(0, error=DeviceLostError("still gone", generation=1))
    assert shell.sent_to(0)[-1].call.op is Op.SHUTDOWN
    shell.die(0, 0)
    assert shell.machine.state == "running" and shell.worker(0).generation == 2


# -- close ----------------------------------------------------------------------------------------


def test_close_fails_everything_pending_and_stops_every_worker():
    shell = Shell(workers=2, timeouts={"kill_grace": 1.0})
    running = shell.submit()
    queued = [shell.submit() for _ in range(3)]
    shell.receive(0)
    shell.machine.close(shell.now)
    shell.run()
    for req in [running, *queued]:
        assert isinstance(shell.result(req), PoolFailedError)
        assert "closed" in shell.result(req).cause
    assert sorted(s.index for s in shell.signals) == [0, 1]
    assert not shell.machine.stopped
    shell.advance(1.0)  # the grace is over: SIGKILL
    assert [s.kill for s in shell.signals][-2:] == [True, True]
    shell.obey_signals()
    assert shell.machine.stopped
    late = shell.submit()
    assert isinstance(shell.result(late), PoolFailedError)


def test_next_timer_covers_every_waiting_rule():
    shell = Shell(timeouts={"heartbeat": 30.0})
    assert shell.machine.next_timer() is None
    req = shell.submit(timeout=7.0)
    assert shell.machine.next_timer() == pytest.approx(shell.options.timeouts.silence_limit)
    shell.receive(0)
    assert shell.machine.next_timer() == pytest.approx(7.0)
    shell.reply(0, req)
    assert shell.machine.next_timer() == pytest.approx(30.0)  # the idle silence rule


def test_sends_carry_the_worker_identity_and_generation():
    shell = Shell()
    req = shell.submit()
    send = next(a for a in shell.sends if a.request is req)
    assert isinstance(send, Send)
    assert (send.index, send.generation, send.identity) == (0, 1, shell.identity(0))
    assert req.tracking.served_by == (0, 1)


# -- found by a hostile pass ------------------------------------------------------------------


def test_a_pause_of_this_process_is_not_held_against_its_workers():
    """Ctrl-Z of the caller for 35 s: after SIGCONT every worker looked silent and was
    killed (busy ones failing their requests) before their queued heartbeats arrived."""
    shell = Shell(workers=2, timeouts={"heartbeat": 5.0})
    running = shell.submit()
    shell.receive(0)
    idle_ready = shell.submit()
    shell.reply(1, idle_ready)
    shell.advance(0.5)
    shell.pause(35.0)                 # no tick, no message: this process was stopped
    shell.advance(0.01)
    assert shell.signals == [] and running.tracking.id not in shell.results
    assert [w.deaths for w in shell.machine.workers] == [0, 0]
    shell.beat(0)                     # the heartbeats queued meanwhile arrive
    shell.reply(0, running, value=5)
    assert shell.result(running) == (Ran(), [5])


def test_a_pause_does_not_stretch_a_callers_deadline():
    shell = Shell()
    req = shell.submit(timeout=2.0)
    shell.receive(0)
    shell.pause(10.0)
    shell.advance(0.01)
    assert isinstance(shell.result(req), DispatchTimeoutError)


def test_a_large_request_gets_time_to_cross_before_it_counts_as_lost():
    """A legal 2 GiB input was judged lost after 1.5 s (and a healthy worker killed)."""
    shell = Shell()
    shell.submit()
    shell.reply(0)
    req = Request(Call(body_of(Op.DISPATCH), []))
    req.transfer.nbytes = 2 * 2**30
    shell.machine.submit(req, shell.now)
    shell.run()
    for _ in range(18):               # 18 s of heartbeats while 2 GiB cross at >= 100 MB/s
        shell.advance(1.0)
        shell.beat(0)
    assert shell.signals == [] and req.tracking.id not in shell.results
    shell.receive(0, req)
    shell.machine.progress(0, req.tracking.id, req.tracking.id, shell.now, reply_bytes=2 * 2**30)
    for _ in range(18):               # and its 2 GiB answer the same on the way back
        shell.advance(1.0)
        shell.beat(0)
    assert req.tracking.id not in shell.results
    shell.advance(10.0)
    assert isinstance(shell.result(req), MessageLostError)


def test_answered_requests_do_not_pile_up_behind_a_long_deadline():
    """1000 answered calls stayed in memory (with their inputs) while an earlier call
    with a long deadline was pending: the machine now lets go of a call once it is
    answered (its deadline-heap entry keeps none), so only its caller holds it."""
    shell = Shell(workers=2)
    long = shell.submit(timeout=3600.0)
    shell.receive(0)
    answered = []
    for _ in range(1000):
        req = Request(Call(body_of(Op.DISPATCH), [b"1 MiB of input"],
                      deadline=Deadline(shell.now + 60.0, 60.0)))
        shell.machine.submit(req, shell.now)
        shell.run()
        shell.reply(1, req, value=1)
        assert req.done and req.tracking.deadline_entry is None
        answered.append(weakref.ref(req))
        shell.sends.clear()  # (the harness's own record of what was sent)
        del req
    gc.collect()
    assert [r for r in answered if r() is not None] == []
    assert len(shell.machine._deadlines) <= 64 + 2 * 2
    assert long.tracking.id not in shell.results and not long.done


def test_handles_are_invalid_from_the_moment_recycling_starts():
    shell = Shell(restart={"recycle_after": 2})
    first = shell.submit()
    shell.reply(0, first)
    assert shell.machine.holds(0, 1)
    second = shell.submit()
    shell.reply(0, second)            # the second request: recycling starts now
    assert not shell.machine.holds(0, 1)
    late = shell.submit(slot=0, generation=1)
    error = shell.result(late)
    assert isinstance(error, PipelineInvalidatedError)
    assert "being stopped (recycled after 2 requests (recycle_after))" in error.cause


def test_a_spawn_dropped_after_close_leaves_nothing_to_wait_for():
    """The shell parks a spawn while its fork server starts; a close meanwhile must not
    leave the pool waiting for a process that will never be started."""
    shell = Shell(auto_start=False)
    req = shell.submit()
    (spawn,) = shell.spawns
    assert shell.worker(0).state == "spawning"
    shell.machine.close(shell.now)
    shell.run()
    assert isinstance(shell.result(req), PoolFailedError)
    assert not shell.machine.stopped  # the parked spawn is still owed an answer
    shell.machine.spawn_dropped(spawn.index, spawn.generation + 1)  # another generation's
    assert not shell.machine.stopped
    shell.machine.spawn_dropped(spawn.index, spawn.generation)
    assert shell.machine.stopped and shell.worker(0).state == "stopped"


def test_a_spawn_is_never_dropped_while_the_pool_runs():
    shell = Shell(auto_start=False)
    shell.submit()
    (spawn,) = shell.spawns
    shell.machine.spawn_dropped(spawn.index, spawn.generation)
    assert shell.worker(0).state == "spawning"
    shell.start(spawn.index, spawn.generation)
    assert shell.worker(0).state in ("idle", "busy")


def test_deaths_with_the_fork_server_count_neither_toward_intensity_nor_crashes():
    """Workers die with their fork server: its loss, not theirs (the shell bounds how
    often a server may be lost)."""
    shell = Shell(workers=2, restart={"max_restarts": 1})
    running = shell.submit(retries=0)
    shell.receive(0)
    for _ in range(3):  # far past max_restarts=1, had they counted
        shell.die(0, None, collateral=True)
        shell.die(1, None, collateral=True)
        shell.receive(0) if shell.worker(0).current is running else None
    assert shell.machine.state == "running"
    assert not running.done and running.tracking.crashes == 0  # it runs again, retries=0 or not
    shell.receive(0, running)
    shell.reply(0, running)
    assert shell.result(running) is not None and not isinstance(shell.result(running),
                                                                 VyreError)
    assert "with its fork server" in shell.worker(0).last_exit


def test_a_death_with_status_unknown_but_not_collateral_still_counts():
    shell = Shell(restart={"max_restarts": 1})
    shell.submit()
    shell.die(0, None)
    shell.die(0, None)
    assert shell.machine.state == "failed"


def test_status_says_running_only_for_work_its_main_thread_holds():
    """``running`` (what the fault kit's ``wait_running`` waits for) is a dispatch the
    worker's main thread holds: never routing's probe ping, nor before the worker took
    the request. A kill "while it runs" must cut off the call itself; the kit once killed
    a worker running the probe, and the call ran on the next worker for its full 30 s."""
    shell = Shell()
    running = lambda: shell.machine.status(shell.now)["workers"][0]["running"]  # noqa: E731
    ping = shell.submit(op=Op.PING)
    shell.receive(0)
    assert not running()
    shell.reply(0, ping, value=1)
    work = shell.submit(retries=0)
    assert not running()  # (sent; its page does not say it arrived yet)
    shell.receive(0)
    assert running()
    shell.die(0)
    assert isinstance(shell.result(work), WorkerCrashedError)
