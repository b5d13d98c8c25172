"""Hot standby workers, rule by rule, on the pure state machine (no process, socket or
clock): ``PoolOptions.standby`` spare processes start with the serving workers, never serve a
caller, and take over a serving slot the moment its process exits (a ``Promote`` action for
the shell, an ADOPT request naming the slot's new generation, a new spare spawned). The same
rules run under real processes in tests/faults/test_standby.py."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule
from supervision_harness import Shell, body_of
from test_supervision_stateful import POOL_RESTARTS, POOL_TIMEOUTS, PoolModel

from vyre_core.boundary.messages import Adopt, Done, Message, Op, Ran
from vyre_core.errors import (
    InvalidConfigError,
    InvalidInputError,
    PipelineInvalidatedError,
    PoolFailedError,
    ProtocolError,
    WorkerCrashedError,
)
from vyre_core.supervisor.options import MAX_STANDBY, PoolOptions
from vyre_core.supervisor.rules.actions import Log, Promote, Send, Signal, Spawn
from vyre_core.supervisor.rules.machine import PoolMachine
from vyre_core.supervisor.rules.requests import Call, Request

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)


class StandbyShell(Shell):
    """The harness shell, plus what pool.py does with a Promote: the spare slot's process
    now lives in the serving slot. Every action the rules emit is recorded in order."""

    def __init__(self, standby: int = 1, **options) -> None:
        super().__init__(standby=standby, **options)
        self.actions: list = []
        take = self.machine.take_actions

        def take_actions() -> list:
            actions = take()
            for action in actions:  # before the batch is carried out: a Spawn of the
                if isinstance(action, Promote):  # spare slot in it starts a new process
                    self.alive[action.index] = self.alive.pop(action.spare)
            self.actions.extend(actions)
            return actions

        self.machine.take_actions = take_actions  # type: ignore[method-assign]

    def mark(self) -> int:
        return len(self.actions)

    def since(self, mark: int) -> list:
        """The actions since ``mark``, without logs (and routing notices)."""
        return [a for a in self.actions[mark:] if isinstance(a, Promote | Send | Spawn | Signal)]

    def state(self) -> list[str]:
        return [w.state for w in self.machine.workers]

    def started(self) -> StandbyShell:
        """The pool started by a first call, answered: every slot ready."""
        req = self.submit()
        self.reply(0, req, value="warm")
        return self


def adopt_of(action: Send) -> int:
    assert isinstance(action.request.call.message, Adopt) and action.request.call.internal
    return action.request.call.message.generation


# -- options -------------------------------------------------------------------------------------


@pytest.mark.parametrize("standby", [-1, MAX_STANDBY + 1, True, 1.0, "1", None])
def test_standby_out_of_range_or_not_an_int_is_refused_with_a_fix(standby):
    with pytest.raises(InvalidConfigError) as info:
        PoolOptions(standby=standby)
    assert f"standby={standby!r}" in info.value.cause
    assert f"standby: a whole number >= 0 and <= {MAX_STANDBY}" in info.value.fix
    assert "Fix:" in str(info.value)


@pytest.mark.parametrize("standby", [0, 1, MAX_STANDBY])
def test_standby_in_range_is_accepted(standby):
    assert MAX_STANDBY == 16
    options = PoolOptions(workers=2, standby=standby)
    assert PoolMachine("b", options).serving == 2
    assert len(PoolMachine("b", options).workers) == 2 + standby
    assert PoolOptions().standby == 0


# -- start-up ------------------------------------------------------------------------------------


def test_spares_are_spawned_at_start_with_the_serving_workers():
    shell = StandbyShell(workers=2, standby=2, auto_hello=False)
    assert shell.machine.serving == 2 and len(shell.machine.workers) == 4
    assert shell.spawns == []  # nothing before the first call
    req = shell.submit()
    assert [(s.index, s.generation) for s in shell.spawns] == [(0, 1), (1, 1), (2, 1), (3, 1)]
    assert shell.state() == ["starting"] * 4
    status = shell.machine.status(shell.now)
    assert [w["spare"] for w in status["workers"]] == [False, False, True, True]
    assert status["standby"] == 0  # none ready yet
    for index in (2, 3):  # the spares say hello first: nothing is sent to them
        shell.hello(index)
    assert shell.state() == ["starting", "starting", "spare", "spare"]
    assert shell.sends == [] and req.tracking.id not in shell.results
    assert shell.machine.status(shell.now)["standby"] == 2
    shell.hello(1)
    assert shell.sent_to(1) == [req]
    shell.hello(0)
    assert shell.state() == ["idle", "busy", "spare", "spare"]


def test_a_spare_never_receives_a_caller_request_however_long_the_queue():
    shell = StandbyShell(workers=1, standby=2).started()
    reqs = [shell.submit(retries=0) for _ in range(8)]
    assert [r.tracking.state for r in reqs] == ["sent"] + ["queued"] * 7
    assert shell.state() == ["busy", "spare", "spare"]
    for step in range(8):  # time passes, spares beat: still nothing for them
        shell.advance(1.0)
        for index in (1, 2):
            shell.beat(index)
        shell.receive(0)
        shell.reply(0, value=step)
    assert [shell.result(r) for r in reqs] == [(Ran(), [i]) for i in range(8)]
    assert shell.sent_to(1) == [] and shell.sent_to(2) == []
    assert [w.served for w in shell.machine.workers] == [9, 0, 0]
    assert shell.signals == [] and shell.state() == ["idle", "spare", "spare"]


def test_a_spare_is_checked_for_heartbeats_like_an_idle_worker():
    shell = StandbyShell(timeouts={"heartbeat": 5.0}).started()
    shell.advance(2.0)
    shell.beat(0)  # worker 0 is next due at 7.0, the spare (heard at 0.0) at 5.0
    assert shell.machine.next_timer() == pytest.approx(5.0)
    shell.beat(1)
    assert shell.machine.next_timer() == pytest.approx(7.0)


# -- promotion -----------------------------------------------------------------------------------


def test_a_serving_death_promotes_the_ready_spare():
    shell = StandbyShell(workers=1, standby=1, restart={"max_restarts": 5}).started()
    spare_pid, spare_identity = shell.worker(1).pid, shell.identity(1)
    running = shell.submit(retries=1, label="running")
    queued = shell.submit(label="queued")
    shell.receive(0)
    mark = shell.mark()
    shell.die(0)
    promote, adopt, spawn = shell.since(mark)
    assert promote == Promote(spare=1, index=0)
    assert isinstance(adopt, Send) and adopt_of(adopt) == 2
    assert (adopt.index, adopt.generation, adopt.identity) == (0, 2, spare_identity)
    assert spawn == Spawn(1, 2)  # the spare slot starts a replacement
    assert any(isinstance(a, Log) and f"spare process {spare_pid} serves worker 0 as "
               "generation 2" in a.text for a in shell.actions[mark:])
    # the slot is the spare's process now, as its next generation
    w = shell.worker(0)
    assert (w.pid, w.identity, w.generation, w.state) == (spare_pid, spare_identity, 2, "busy")
    assert shell.state() == ["busy", "spare"]  # (the replacement spare said hello at once)
    assert shell.worker(1).pid not in (None, spare_pid)
    # nothing of the callers' goes there before ADOPT is answered
    assert [r.call.op for r in shell.sent_to(0)[-1:]] == [Op.ADOPT]
    assert running.tracking.state == "queued" and queued.tracking.state == "queued"
    shell.receive(0)
    shell.advance(0.5)
    assert shell.sent_to(0)[-1].call.op is Op.ADOPT
    mark = shell.mark()
    shell.reply(0, value=None)  # answered as the new generation
    (sent,) = shell.since(mark)
    assert sent.request is running and (sent.generation, sent.identity) == (2, spare_identity)
    shell.receive(0)
    shell.reply(0, value="retried")
    shell.receive(0)
    shell.reply(0, value="next")
    assert shell.result(running) == (Ran(), ["retried"])
    assert shell.result(queued) == (Ran(), ["next"])
    assert running.tracking.served_by == (0, 2)
    assert all(count == 1 for count in shell.resolved_count.values())
    # counted once, in the slot that died
    assert [w.deaths for w in shell.machine.workers] == [1, 0]
    assert shell.machine.status(shell.now)["restarts"] == 1
    assert len(shell.machine._deaths) == 1


def test_handles_of_the_old_generation_are_invalid_and_the_new_one_holds_after_adopt():
    shell = StandbyShell().started()
    assert shell.machine.holds(0, 1)
    stale = shell.submit(slot=0, generation=1)
    shell.reply(0, stale, value="made a pipeline")
    shell.die(0)
    assert not shell.machine.holds(0, 1)
    assert not shell.machine.holds(1, 1) and not shell.machine.holds(1, 2)  # never a spare
    late = shell.submit(slot=0, generation=1)
    error = shell.result(late)
    assert isinstance(error, PipelineInvalidatedError)
    assert "now generation 2" in error.cause and "Fix:" in str(error)
    pinned = shell.submit(slot=0, generation=2)  # new generation: waits behind ADOPT
    assert pinned.tracking.state == "queued" and shell.sent_to(0)[-1].call.op is Op.ADOPT
    shell.reply(0, value=None)
    assert shell.machine.holds(0, 2) and shell.sent_to(0)[-1] is pinned
    shell.reply(0, value="pinned ran")
    assert shell.result(pinned) == (Ran(), ["pinned ran"])


def test_each_death_counts_once_toward_the_restart_intensity():
    # (max_restarts is per process: 1 x (a serving worker and a spare) = 2 in the window)
    shell = StandbyShell(restart={"max_restarts": 1, "window": 60.0}).started()
    for deaths in (1, 2):
        spare_pid = shell.worker(1).pid
        shell.die(0)
        assert shell.worker(0).pid == spare_pid
        shell.reply(0, value=None)  # ADOPT
        assert shell.machine.state == "running"
        assert len(shell.machine._deaths) == deaths and shell.worker(0).deaths == deaths
        assert shell.machine.status(shell.now)["restarts"] == deaths
    waiting = shell.submit()
    shell.die(0)  # the third in the window: more than 1 x 2 processes
    assert shell.machine.state == "failed"
    assert "3 worker deaths in 60 s (more than max_restarts=1 x 2 workers)" \
        in shell.result(waiting).cause
    assert [w.deaths for w in shell.machine.workers] == [3, 0]


def test_a_planned_stop_of_a_serving_worker_also_promotes_without_counting():
    shell = StandbyShell(restart={"recycle_after": 1}).started()
    assert shell.sent_to(0)[-1].call.op is Op.SHUTDOWN  # recycled after one request
    spare_pid = shell.worker(1).pid
    mark = shell.mark()
    shell.die(0, 0)
    assert shell.since(mark)[0] == Promote(1, 0) and shell.worker(0).pid == spare_pid
    assert [w.deaths for w in shell.machine.workers] == [0, 0]


def test_a_spare_death_respawns_only_the_spare_slot():
    shell = StandbyShell(workers=1, standby=1).started()
    serving = (shell.worker(0).pid, shell.identity(0), shell.worker(0).generation)
    mark = shell.mark()
    shell.die(1)
    assert shell.since(mark) == [Spawn(1, 2)]  # no promotion, nothing sent
    assert (shell.worker(0).pid, shell.identity(0), shell.worker(0).generation) == serving
    assert shell.state() == ["idle", "spare"]
    assert [w.deaths for w in shell.machine.workers] == [0, 1]  # an unexpected death counts
    assert shell.machine.status(shell.now)["restarts"] == 1
    req = shell.submit()
    assert shell.sent_to(0)[-1] is req


def test_without_a_ready_spare_the_slot_spawns_as_before():
    shell = StandbyShell(workers=1, standby=1, auto_hello=False)
    req = shell.submit(retries=0)
    shell.hello(0)  # the spare is still starting
    spare_identity = shell.identity(1)
    shell.receive(0)
    mark = shell.mark()
    shell.die(0)
    assert shell.since(mark) == [Spawn(0, 2)]
    assert isinstance(shell.result(req), WorkerCrashedError)
    assert shell.state() == ["starting", "starting"] and shell.identity(1) == spare_identity
    shell.hello(1)
    assert shell.state() == ["starting", "spare"]  # a spare serves nobody while 0 starts
    again = shell.submit()
    assert again.tracking.state == "queued"
    shell.hello(0)
    assert shell.sent_to(0)[-1] is again and shell.worker(0).generation == 2
    assert [w.deaths for w in shell.machine.workers] == [1, 0]


def test_two_deaths_in_a_row_use_the_next_ready_spare():
    shell = StandbyShell(workers=2, standby=1, restart={"max_restarts": 5}).started()
    first_spare = shell.worker(2).pid
    shell.die(0)
    assert shell.worker(0).pid == first_spare
    shell.reply(0, value=None)  # ADOPT
    second_spare = shell.worker(2).pid
    shell.die(1)
    assert shell.worker(1).pid == second_spare and shell.worker(1).generation == 2
    shell.reply(1, value=None)
    assert shell.state() == ["idle", "idle", "spare"]
    assert [w.generation for w in shell.machine.workers] == [2, 2, 3]
    assert [w.deaths for w in shell.machine.workers] == [1, 1, 0]


def test_a_promoted_process_that_dies_before_answering_adopt_is_replaced_again():
    shell = StandbyShell(restart={"max_restarts": 5}).started()
    req = shell.submit(retries=0)
    shell.receive(0)
    shell.die(0)
    assert isinstance(shell.result(req), WorkerCrashedError)  # retries=0
    waiting = shell.submit()
    second = shell.worker(1).pid
    mark = shell.mark()
    shell.die(0)  # the promoted process, during ADOPT
    promote, adopt, _spawn = shell.since(mark)
    assert promote == Promote(1, 0) and adopt_of(adopt) == 3
    assert shell.worker(0).pid == second
    shell.reply(0, value=None)
    assert shell.sent_to(0)[-1] is waiting
    assert shell.worker(0).deaths == 2 and len(shell.machine._deaths) == 2


# -- ADOPT that goes wrong -----------------------------------------------------------------------


def test_adopt_answered_with_an_error_kills_the_process_and_the_slot_recovers():
    shell = StandbyShell(restart={"max_restarts": 5}).started()
    shell.die(0)
    waiting = shell.submit()
    mark = shell.mark()
    shell.reply(0, error=ProtocolError("cannot adopt"))  # tagged with the new generation
    assert shell.since(mark) == [Signal(0, kill=True)] and shell.worker(0).state == "killing"
    assert waiting.tracking.state == "queued" and shell.worker(0).retiring == "fault"
    third = shell.worker(1).pid
    shell.obey_signals()
    assert shell.worker(0).pid == third and shell.worker(0).generation == 3
    shell.reply(0, value=None)
    assert shell.sent_to(0)[-1] is waiting
    shell.reply(0, value="served")
    assert shell.result(waiting) == (Ran(), ["served"])
    assert shell.worker(0).deaths == 2  # the death, and the process that could not adopt


def test_adopt_refused_by_a_real_worker_is_seen_at_once():
    """A worker answers ADOPT, refusal included, as the generation it was asked to become
    (workers/server.py): the rules see the refusal at once, not at ADOPT's deadline."""
    shell = StandbyShell(restart={"max_restarts": 5}, timeouts={"startup": 10.0}).started()
    shell.die(0)
    shell.receive(0)
    shell.reply(0, error=ProtocolError("cannot adopt"), gen=shell.worker(0).generation)
    assert shell.worker(0).state == "killing", (
        f"the ADOPT refusal was dropped ({shell.machine.dropped_replies} dropped replies); "
        f"worker 0 is {shell.worker(0).state}")


def test_adopt_past_its_deadline_stops_the_process_and_the_slot_recovers():
    shell = StandbyShell(restart={"max_restarts": 5},
                         timeouts={"startup": 10.0, "heartbeat": 30.0, "kill_grace": 2.0}).started()
    shell.die(0)
    waiting = shell.submit()
    shell.receive(0)  # taken, never answered; the worker keeps beating
    for _ in range(9):
        shell.advance(1.0)
        shell.beat(0)
        shell.beat(1)
    assert shell.signals == [] and shell.worker(0).state == "busy"
    shell.advance(1.0)
    assert shell.signals == [Signal(0, kill=False)]  # its deadline: stopped
    assert shell.worker(0).retire_reason == "adopt ran past its deadline"
    shell.advance(2.0)
    assert shell.signals[-1] == Signal(0, kill=True)  # the grace is over
    third = shell.worker(1).pid
    shell.signals.clear()
    shell.die(0)  # SIGKILLed
    assert shell.worker(0).pid == third and shell.worker(0).generation == 3
    shell.reply(0, value=None)
    assert shell.sent_to(0)[-1] is waiting
    assert shell.worker(0).deaths == 2  # (an ADOPT past its deadline is a fault: counted)


def test_spares_that_never_adopt_count_toward_the_restart_intensity():
    """A process that cannot take over its slot in Timeouts.startup is stopped as planned,
    not counted: with a backend whose processes all hang there (the main thread blocked,
    heartbeats going on), every new spare is promoted, times out and is replaced, forever.
    A caller without a deadline then waits forever, while without standby a worker that
    never starts trips the restart intensity and the caller gets PoolFailedError."""
    shell = StandbyShell(restart={"max_restarts": 1},
                         timeouts={"startup": 2.0, "heartbeat": 30.0, "kill_grace": 0.5}).started()
    shell.die(0)
    waiting = shell.submit()  # no deadline
    for _ in range(6):
        shell.receive(0)  # ADOPT taken, never answered; heartbeats go on
        for _ in range(4):
            shell.advance(0.5)
            shell.beat(0)
            shell.beat(1)
        assert shell.signals and shell.signals[-1].index == 0
        shell.signals.clear()
        shell.die(0, -15)
        if waiting.tracking.id in shell.results:
            break
    assert waiting.tracking.id in shell.results, (
        f"after 6 promotions that never adopted, the caller still waits: pool "
        f"{shell.machine.state}, slot 0 at generation {shell.worker(0).generation}, deaths "
        f"counted {[w.deaths for w in shell.machine.workers]} (max_restarts=1)")
    assert isinstance(shell.result(waiting), PoolFailedError)


# -- stopping ------------------------------------------------------------------------------------


def test_close_retires_spares_too():
    shell = StandbyShell(workers=1, standby=2, auto_hello=False, timeouts={"kill_grace": 1.0})
    shell.submit()
    for index in (0, 1):
        shell.hello(index)  # worker 2 is still starting
    assert shell.state() == ["busy", "spare", "starting"]
    shell.machine.close(shell.now)
    shell.run()
    assert sorted((s.index, s.kill) for s in shell.signals) == [
        (0, False), (1, False), (2, False)]  # SIGTERM, as for any worker at close
    assert shell.state() == ["killing"] * 3
    shell.advance(1.0)
    assert sorted((s.index, s.kill) for s in shell.signals[3:]) == [
        (0, True), (1, True), (2, True)]
    spawns = len(shell.spawns)
    shell.obey_signals()
    assert shell.machine.stopped and len(shell.spawns) == spawns  # no promotion, no respawn
    assert shell.machine.status(shell.now)["standby"] == 0


def test_a_spare_spawning_at_close_is_stopped_once_started():
    shell = StandbyShell(workers=1, standby=1, auto_start=False)
    shell.submit()
    shell.start(0, 1)
    shell.machine.close(shell.now)
    shell.run()
    shell.start(1, 1)  # its process started after all
    assert shell.signals[-1] == Signal(1, kill=False)
    shell.advance(shell.options.timeouts.kill_grace)
    shell.obey_signals()
    assert shell.machine.stopped


def test_a_failed_pool_retires_its_spares_and_starts_them_again_after_the_cooldown():
    shell = StandbyShell(workers=1, standby=1,
                         restart={"max_restarts": 0, "cooldown": 30.0}).started()
    mark = shell.mark()
    shell.die(0, 3, "Traceback: broken")
    assert shell.machine.state == "failed"
    assert shell.since(mark) == [Signal(1, kill=False)]  # no promotion into a failed pool
    shell.obey_signals()
    assert shell.state() == ["stopped", "stopped"]
    assert [w.deaths for w in shell.machine.workers] == [1, 0]  # the spare's stop is planned
    shell.advance(30.0)
    mark = shell.mark()
    req = shell.submit()
    assert shell.since(mark)[:2] == [Spawn(0, 2), Spawn(1, 2)]
    assert shell.state() == ["busy", "spare"] and shell.sent_to(0)[-1] is req


def test_a_frozen_spare_is_killed_and_replaced_without_touching_the_serving_worker():
    shell = StandbyShell(workers=1, standby=1, timeouts={"heartbeat": 5.0}).started()
    serving = (shell.worker(0).pid, shell.worker(0).generation)
    for _ in range(5):  # worker 0 beats, the spare (SIGSTOPped) says nothing
        shell.advance(1.0)
        shell.beat(0)
    assert shell.signals == []
    shell.advance(0.2)
    assert shell.signals == [Signal(1, kill=True)]
    assert "silent for 5.2 s while spare" in shell.worker(1).retire_reason
    mark = shell.mark()
    shell.obey_signals()
    assert shell.since(mark) == [Spawn(1, 2)]
    assert shell.state() == ["idle", "spare"]
    assert (shell.worker(0).pid, shell.worker(0).generation) == serving
    assert [w.deaths for w in shell.machine.workers] == [0, 1]  # frozen is a fault


def test_a_pinned_request_naming_a_spare_slot_is_refused():
    shell = StandbyShell(workers=1, standby=2).started()
    for slot in (1, 2):
        generation = shell.worker(slot).generation
        assert not shell.machine.holds(slot, generation)
        req = shell.submit(slot=slot, generation=generation)
        error = shell.result(req)
        assert isinstance(error, InvalidInputError)
        assert f"names worker {slot} of 'b', which has 1" in error.cause
    assert shell.sent_to(1) == [] and shell.sent_to(2) == []


def test_status_marks_spares_and_counts_the_ready_ones():
    shell = StandbyShell(workers=2, standby=2, auto_hello=False)
    shell.submit()
    for index in (0, 1, 2):
        shell.hello(index)
    status = shell.machine.status(shell.now)
    assert [(w["index"], w["state"], w["spare"]) for w in status["workers"]] == [
        (0, "busy", False), (1, "idle", False), (2, "spare", True), (3, "starting", True)]
    assert status["standby"] == 1 and status["restarts"] == 0
    assert status["workers"][2]["in_flight"] == 0 and status["workers"][2]["served"] == 0
    shell.die(1)  # promotes the spare of slot 2
    status = shell.machine.status(shell.now)
    assert [w["state"] for w in status["workers"]] == ["busy", "busy", "starting", "starting"]
    assert status["workers"][1]["in_flight"] == 0  # ADOPT is the rules' own
    assert status["workers"][1]["generation"] == 2
    assert status["workers"][2]["generation"] == 2  # its replacement, starting
    assert status["standby"] == 0 and status["restarts"] == 1
    assert [w["restarts"] for w in status["workers"]] == [0, 1, 0, 0]


def test_a_request_queued_at_close_during_adopt_is_answered_once():
    shell = StandbyShell().started()
    shell.die(0)
    waiting = shell.submit()
    shell.machine.close(shell.now)
    shell.run()
    assert isinstance(shell.result(waiting), PoolFailedError)
    shell.machine.message(shell.identity(0), Message(Done(), shell.sent_to(0)[-1].tracking.id, 2),
                          shell.now)
    shell.run()
    assert shell.resolved_count[waiting.tracking.id] == 1


# -- random interleavings ------------------------------------------------------------------------


class StandbyPoolModel(PoolModel):
    """The supervision state machine of tests/test_supervision_stateful.py with 0 to 2
    spares, its model taught what pool.py does with a Promote: the spare slot's process now
    lives in the serving slot (its replies to ADOPT and after carry the slot's generation).
    Checked besides the base model's invariants: nothing but SHUTDOWN is ever sent to a
    spare slot, and no caller request reaches a promoted process before its ADOPT is
    answered."""

    @initialize(workers=st.integers(1, 3), standby=st.integers(0, 2), restart=POOL_RESTARTS,
                timeouts=POOL_TIMEOUTS)
    def make_pool(self, **options) -> None:
        self.adopts: dict[int, list] = {}  # pid -> ADOPT requests sent to that process
        self.promotions = 0
        self.machine = PoolMachine("b", PoolOptions(**options))
        take = self.machine.take_actions

        def take_actions() -> list:
            actions = take()
            for action in actions:  # the batch's Send of ADOPT and Spawn follow it
                if isinstance(action, Promote):
                    self.on_promote(action)
            return actions

        self.machine.take_actions = take_actions  # type: ignore[method-assign]
        self.call(Request(Call(body_of(Op.PING), [])))

    def on_promote(self, action: Promote) -> None:
        machine = self.machine
        assert action.spare >= machine.serving > action.index, action
        proc = self.procs.pop(action.spare, None)
        assert proc is not None and proc.alive and proc.greeted and not proc.signalled, (
            f"{action}: the spare slot holds no ready process ({proc})")
        old = self.procs.get(action.index)
        assert old is None or not old.alive, f"{action} while {old} still runs there"
        proc.index = action.index
        proc.generation = machine.workers[action.index].generation  # what ADOPT tells it
        self.procs[action.index] = proc
        self.promotions += 1

    def on_send(self, action: Send) -> None:
        req = action.request
        if action.index >= self.machine.serving:
            assert req.call.op is Op.SHUTDOWN, f"{req.call.op} sent to spare slot {action.index}"
        proc = self.procs.get(action.index)
        if proc is not None:
            if req.call.op is Op.ADOPT:
                self.adopts.setdefault(proc.pid, []).append(req)
            elif not req.call.internal:
                pending = [a.tracking.id for a in self.adopts.get(proc.pid, []) if not a.done]
                assert not pending, (f"request {req.tracking.id} sent to worker {action.index} "
                                     f"before its ADOPT {pending} was answered")
        super().on_send(action)

    @rule()
    def drain(self) -> None:
        """The base model's drain, with ADOPT answered as soon as it is taken: the base
        drain answers on its next turn, after stepping to the next timer, which can be
        ADOPT's own deadline (Timeouts.startup); every promotion then times out, and (those
        stops being planned) the pool churns through spares forever. That is a finding of
        its own, checked deterministically by
        test_spares_that_never_adopt_count_toward_the_restart_intensity."""
        self.draining = True
        try:
            PoolModel.drain(self)
        finally:
            self.draining = False

    def take(self, proc) -> None:
        super().take(proc)
        if getattr(self, "draining", False) and proc.running is not None \
                and proc.running.call.op is Op.ADOPT:
            self.give_answer(proc, "reply")


StandbyPoolModel.TestCase.settings = settings(
    max_examples=200, stateful_step_count=50, deadline=None, report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestStandbyStateful = StandbyPoolModel.TestCase


def test_a_real_worker_answers_adopt_as_its_new_generation():
    """The worker side (in process, no socket): ADOPT is answered, and refused when its
    ``generation`` field is not an integer, as the generation it names whenever it can be
    read."""
    import vyre_reference.backend as reference
    from vyre_core.boundary import codec
    from vyre_workers.backend_host import BackendHost
    from vyre_workers.server import WorkerServer

    server = WorkerServer(BackendHost(reference, "reference", 1), None)
    reply = server.handle(codec.encode(Message(Adopt(7), 5, 0)))
    assert (reply.body, reply.id, reply.gen, server.host.generation) == (Done(), 5, 7, 7)
    refused = server.handle(codec.encode(Message(Adopt("x"), 6, 0)))  # (unchecked here)
    assert (refused.op, refused.id, refused.gen) == (Op.ERROR, 6, 7)
    assert refused.body.error["cause"] == \
        "malformed message: adopt field 'generation': Expected `int`, got `str`"
