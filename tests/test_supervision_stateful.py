"""The pool's promises under random interleavings of every supervision event.

A hypothesis state machine plays the I/O shell and the worker processes around one
PoolMachine (1 to 3 workers, small random PoolOptions) with a number for a clock, the way
vyre_core/supervisor/pool.py does: a Spawn is answered at once (started, or refused by the
OS), a Send is delivered or refused at once, signals make processes exit (a frozen one
ignores SIGTERM), pages are read before every tick and before an exit is reported, and the
loop ticks again at once while next_timer() is past. The shell ticks only once a timer is
due (or TICK_EVERY after its last tick), so a tick before next_timer() must do nothing.
It drives the machine directly, not through tests/supervision_harness.Shell, because it
decides process by process what each does. The workers are modelled faithfully: one
answers only a request it was sent and took; a dead or frozen one says nothing; one whose
connection is gone only beats.

Checked after every step (the machine must never raise): no request resolved twice, or with
another request's reply; no reply of another generation or a dead process delivered; no
deadline outlived past a tick; nothing sent to a process not known alive, greeted and
unsignalled, or still holding another request; no timer left in the past. A drain with
healthy workers answers every request; close answers every one exactly once.
"""

from __future__ import annotations

import functools
import itertools
import math
import signal
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from supervision_harness import CAPS, body_of, deadline_after, reply_of

from vyre_core.boundary.messages import (
    Compiled,
    Done,
    Failed,
    Heartbeat,
    Hello,
    HelloFailed,
    Message,
    Op,
    Ran,
    Shutdown,
    TryRecover,
)
from vyre_core.errors import DeviceLostError, ProtocolError, SystemResourceError, VyreError
from vyre_core.supervisor.options import PoolOptions, RestartPolicy, Timeouts
from vyre_core.supervisor.rules.actions import Resolve, Send, Signal, Spawn
from vyre_core.supervisor.rules.constants import TICK_EVERY
from vyre_core.supervisor.rules.machine import PoolMachine
from vyre_core.supervisor.rules.requests import Call, Request
from vyre_core.testing.tight import options_over

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)

EXIT_CODES = [-signal.SIGKILL, -signal.SIGSEGV, -signal.SIGABRT, 0, 3]
TIMEOUTS = st.one_of(st.none(), st.sampled_from([0.0, 0.3, 1.0, 5.0, 60.0]),
                     st.floats(0.01, 100.0))
#: The pools' restart policies and timeouts, as the model makes them.
POOL_RESTARTS = st.builds(RestartPolicy, max_restarts=st.sampled_from([0, 1, 3, 10]),
                          window=st.sampled_from([1.0, 10.0, 60.0]),
                          cooldown=st.sampled_from([1.0, 5.0, 60.0]),
                          recycle_after=st.sampled_from([None, None, 1, 3]),
                          recycle_rss_bytes=st.sampled_from([None, 1000]))
POOL_TIMEOUTS = st.builds(Timeouts, kill_grace=st.sampled_from([0.1, 1.0, 5.0]),
                          startup=st.sampled_from([0.5, 3.0, 20.0]),
                          heartbeat_interval=st.sampled_from([0.1, 0.5, 1.0]),
                          heartbeat=st.sampled_from([2.0, 5.0, 30.0]))
ERROR_MAPS = st.one_of(
    st.none(), st.integers(), st.text(max_size=4),
    st.fixed_dictionaries({}, optional={
        "code": st.one_of(st.sampled_from([1202, 1302, 1304, 1305, 1307]),
                          st.integers(-3, 3000), st.text(max_size=3), st.none()),
        "cause": st.one_of(st.text(max_size=6), st.integers()),
        "fix": st.one_of(st.text(max_size=6), st.none(), st.integers()),
        "details": st.one_of(st.none(), st.integers(), st.dictionaries(
            st.one_of(st.sampled_from(["generation", "cause", "x"]), st.integers()),
            st.integers(), max_size=3)),
    }))


def reply_value(request_id: int) -> str:
    """What only the reply to ``request_id`` carries (in its arrays)."""
    return f"the reply to request {request_id}"


def hello(caps: dict[str, Any], proof: bytes) -> Hello:
    """A worker's hello on no particular device (the model's pools pin none)."""
    return Hello(pid=0, backend="b", version="test", capabilities=caps, device=None,
                 devices=[], proof=proof)


#: The replies noise carries (an answer of each class the model's callers are given).
NOISE = {Op.RAN: Ran(), Op.COMPILED: Compiled(pipeline=0, key="", compile_ns=0),
         Op.DONE: Done()}


@dataclass(eq=False)
class Process:
    """One worker process as the model runs it (not as the rules believe it is)."""

    index: int
    generation: int          # what it tags its messages with (recovery in place bumps it)
    identity: bytes
    pid: int
    alive: bool = True
    frozen: bool = False     # SIGSTOPped: says nothing, ignores SIGTERM
    cut_off: bool = False    # its connection is gone: sends to it fail, its own are lost
    said_hello: bool = False
    greeted: bool = False    # it said a valid hello
    signalled: bool = False  # the rules sent it a signal
    exiting: int | None = None  # the status it leaves with (SIGTERM: after its request)
    refused: bool = False    # the rules were told that a send to it failed
    shut_down: bool = False  # the rules sent it SHUTDOWN
    inbox: list[Request] = field(default_factory=list)  # delivered, not yet taken
    running: Request | None = None  # taken by its main thread, not answered yet
    holding: Request | None = None  # the last request sent to it
    answered: list[Request] = field(default_factory=list)
    page: tuple[int, int] = (0, 0)  # its progress page: last received, last answered

    def __repr__(self) -> str:
        return f"<process {self.identity.decode()}>"

    @property
    def proof(self) -> bytes:
        return b"proof:" + self.identity

    @property
    def beats(self) -> bool:
        """Sends heartbeats (from their own socket; a SIGTERMed one until it leaves)."""
        return self.alive and not self.frozen and self.exiting in (None, 0)

    @property
    def talks(self) -> bool:
        """Can send messages (a SIGTERMed one finishes its request first)."""
        return self.beats and not self.cut_off

    @property
    def serves(self) -> bool:
        """Its main thread takes the requests that reached it."""
        return self.beats and self.exiting is None


def event(method):
    """A rule: marks the run unclean until it returns, so teardown checks only clean runs."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        was, self.clean = self.clean, False
        if was:
            self.steps += 1
        method(self, *args, **kwargs)
        self.clean = was
    return wrapper


class PoolModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clean = True
        self.steps = 0
        self.machine: PoolMachine | None = None
        self.now = 0.0
        self.ticked_at = -math.inf
        self.procs: dict[int, Process] = {}      # index -> its latest process
        self.former: list[Process] = []          # every process that exited
        self.pids = itertools.count(1000)
        self.refusals = 0                        # the OS refuses this many next spawns
        self.submitted: dict[int, Request] = {}
        self.resolved: dict[int, Any] = {}
        self.handles: list[tuple[int, int]] = []  # (slot, generation) of past replies
        self.internal: list[tuple[Process, Request]] = []  # recoveries sent, with deadlines

    # -- the shell --------------------------------------------------------------------------

    def run(self) -> list[Resolve]:
        """Carry out the rules' actions until none are left; returns the Resolves."""
        resolves = []
        while actions := self.machine.take_actions():
            for action in actions:
                if isinstance(action, Resolve):
                    resolves.append(action)
                    self.on_resolve(action)
                elif isinstance(action, Send):
                    self.on_send(action)
                elif isinstance(action, Signal):
                    self.on_signal(action)
                elif isinstance(action, Spawn):
                    self.on_spawn(action)
        return resolves

    def on_resolve(self, action: Resolve) -> None:
        req, value = action.request, action.value
        rid = req.tracking.id
        assert not req.call.internal and rid in self.submitted, f"resolved a stranger: {req}"
        assert rid not in self.resolved, (  # invariant 1
            f"request {rid} resolved twice: {self.resolved[rid]!r}, then {value!r}")
        if isinstance(value, tuple):  # invariant 2: a reply reaches its own caller only
            assert value == (reply_of(req), [reply_value(req.tracking.id)]), (
                f"request {req.tracking.id} got another request's reply: {value!r}")
            if req.tracking.served_by is not None:
                self.handles.append(req.tracking.served_by)
        else:
            assert isinstance(value, VyreError), f"request {rid} resolved with {value!r}"
        self.resolved[rid] = value

    def on_send(self, action: Send) -> None:
        req, proc = action.request, self.procs.get(action.index)
        where = f"Send of request {req.tracking.id} ({req.call.op}) to worker {action.index}"
        # invariant 5: only to a process known alive, greeted and not being stopped
        assert proc is not None and proc.alive, f"{where}, which has no live process"
        assert proc.greeted, f"{where}, whose process never said a valid hello"
        assert not proc.signalled, f"{where}, whose process the rules signalled to stop"
        assert not proc.shut_down, f"{where}, whose process was already sent SHUTDOWN"
        assert not proc.refused, f"{where}, whose process a send already failed to reach"
        assert action.identity == proc.identity, (
            f"{where} addressed to {action.identity!r}, not its process {proc.identity!r}")
        assert proc.cut_off or action.generation == proc.generation, (
            f"{where} as generation {action.generation}; its process is {proc.generation}")
        # invariant 7: one request per worker at a time (a resend of the same one is fine)
        held = proc.holding
        assert held is None or held is req or held in proc.answered \
            or held.tracking.id in self.resolved, (
                f"{where}, which still holds request {held.tracking.id} ({held.call.op})")
        proc.holding = req
        proc.shut_down = isinstance(req.call.message, Shutdown)
        if req.call.internal and req.call.deadline.at is not None:
            self.internal.append((proc, req))
        if proc.cut_off:  # the transport refuses at once: the shell calls send_failed
            proc.refused = True
            self.machine.send_failed(action.index, req, "Host unreachable", self.now)
        else:
            proc.inbox.append(req)

    def on_signal(self, action: Signal) -> None:
        proc = self.procs.get(action.index)
        assert proc is not None and proc.alive, (
            f"Signal to worker {action.index}, which has no live process")
        proc.signalled = True
        if action.kill:
            proc.exiting = -signal.SIGKILL
        elif not proc.frozen and proc.exiting is None:
            proc.exiting = 0  # finishes the request it is running, then leaves

    def on_spawn(self, action: Spawn) -> None:
        old = self.procs.get(action.index)
        assert old is None or not old.alive, (
            f"Spawn for worker {action.index} while its process {old.pid} still runs")
        if self.refusals:
            self.refusals -= 1
            self.machine.spawn_failed(action.index, action.generation, SystemResourceError(
                "starting a worker failed: EAGAIN", "Wait."), self.now)
            return
        pid = next(self.pids)
        proc = Process(action.index, action.generation,
                       f"w{action.index}.{action.generation}.{pid}".encode(), pid)
        self.procs[action.index] = proc
        self.machine.spawned(action.index, action.generation, proc.identity, proc.proof, pid,
                             self.now)

    def send(self, proc: Process | None, msg: Message | ProtocolError) -> list[Resolve]:
        """``proc`` (None: a stranger) sends ``msg``; over a closed connection only its
        heartbeats (their own socket) arrive."""
        if proc is not None and proc.cut_off \
                and not (isinstance(msg, Message) and isinstance(msg.body, Heartbeat)):
            return []
        identity = b"stranger" if proc is None else proc.identity
        self.machine.message(identity, msg, self.now)
        return self.run()

    def exit(self, proc: Process, code: int) -> None:
        proc.alive = False
        self.former.append(proc)
        self.machine.progress(proc.index, *proc.page, self.now)  # the shell reads it first
        self.machine.exited(proc.index, code, "worker output", self.now)
        self.run()

    def reap(self) -> None:
        """Processes that have left are reported: SIGKILLed ones, and unless frozen, those
        leaving on their own (a SIGTERMed one once its request is answered)."""
        for proc in list(self.procs.values()):
            if proc.alive and proc.exiting is not None and (
                    proc.exiting == -signal.SIGKILL
                    or (not proc.frozen and (proc.exiting != 0 or proc.running is None))):
                self.exit(proc, proc.exiting)

    def step_to(self, when: float, beats: bool) -> None:
        """What one turn of the shell's loop does at ``when``: healthy workers beat and take
        what was sent to them, exits are reported, pages read, then the tick."""
        self.now = max(self.now, when)
        if beats:
            for proc in list(self.procs.values()):
                if proc.serves and not proc.said_hello:
                    self.say_hello(proc)
                if proc.beats:
                    self.send(proc, Message(Heartbeat()))
                if proc.serves and proc.greeted:
                    self.take(proc)
        self.reap()
        for index, proc in list(self.procs.items()):
            if proc.alive:
                self.machine.progress(index, *proc.page, self.now)
        self.run()
        timer = self.machine.next_timer()
        if (timer is None or timer > self.now) and self.now - self.ticked_at < TICK_EVERY:
            # The shell ticks only once a timer is due, or TICK_EVERY after its last tick
            # (pool.py): a tick before then must find nothing to do, or it would wait.
            self.machine.tick(self.now)
            early = self.machine.take_actions()
            assert not early, (f"a tick at {self.now}, before next_timer() {timer}, acted: "
                               f"{early}")
        for _ in range(3):  # the shell ticks again at once while a timer is past due
            self.machine.tick(self.now)
            self.ticked_at = self.now
            self.run()
            self.check_deadlines()
            timer = self.machine.next_timer()
            if timer is None or timer >= self.now:
                return
        raise AssertionError(  # the shell's loop would spin (poll(0)) until that changes
            f"after three ticks at {self.now}, next_timer() is still {timer}, in the past: "
            f"workers {[(w.index, w.state) for w in self.machine.workers]}, pool "
            f"{self.machine.state}")

    def advance_to(self, target: float, beats: bool) -> None:
        """Tick at every timer up to ``target``, and at least every TICK_EVERY seconds, as
        the shell's loop would (it polls at least a millisecond between ticks)."""
        for _ in range(600):
            timer = self.machine.next_timer()
            when = min(target, self.now + TICK_EVERY)
            if timer is not None:
                when = min(max(timer, self.now + 1e-3), when)
            self.step_to(when, beats)
            if self.now >= target:
                return
        self.step_to(target, beats)

    def take(self, proc: Process) -> None:
        """The worker's main thread takes the next request, if it is free."""
        while proc.running is None and proc.inbox:
            req = proc.inbox.pop(0)
            if req.tracking.id != proc.page[0]:  # a copy of the one it has already taken is ignored
                proc.running = req
                proc.page = (req.tracking.id, proc.page[1])

    def some(self, want) -> bool:
        return any(p.alive and want(p) for p in self.procs.values())

    def pick(self, data, want) -> Process | None:
        """One of the live processes for which ``want`` holds (None if there is none)."""
        procs = {i: p for i, p in self.procs.items() if p.alive and want(p)}
        return procs[data.draw(st.sampled_from(sorted(procs)), label="worker")] \
            if procs else None

    def check_deadlines(self) -> None:
        """Invariant 4: after a tick at T, no unresolved request has a deadline <= T, and
        no worker is left running a request of the rules' own (a device recovery) past its
        deadline without being stopped."""
        for req in self.submitted.values():
            assert req.tracking.id in self.resolved or req.call.deadline.at is None \
                or req.call.deadline.at > self.ticked_at, (
                    f"request {req.tracking.id} (deadline {req.call.deadline}) outlived it: "
                    f"ticked at "
                    f"{self.ticked_at}")
        for proc, req in self.internal:
            assert req.done or not proc.alive or proc.signalled \
                or req.call.deadline.at > self.ticked_at, (
                    f"{req.call.op} (deadline {req.call.deadline}) still runs unchecked in worker "
                    f"{proc.index} after a tick at {self.ticked_at}")

    def unresolved(self) -> list[Request]:
        return [r for r in self.submitted.values() if r.tracking.id not in self.resolved]

    # -- setup and callers ------------------------------------------------------------------

    @initialize(workers=st.integers(1, 3), restart=POOL_RESTARTS, timeouts=POOL_TIMEOUTS)
    def make_pool(self, **options: Any) -> None:
        """A pool, started by its first call."""
        self.machine = PoolMachine("b", PoolOptions(**options))
        self.call(Request(Call(body_of(Op.PING), [])))

    def call(self, req: Request) -> None:
        self.submitted[req.tracking.id] = req
        self.machine.submit(req, self.now)
        self.run()

    @rule(timeout=TIMEOUTS, retries=st.sampled_from([0, 1]),
          pin=st.sampled_from(["none", "none", "none", "handle", "current", "bogus"]),
          op=st.sampled_from([Op.DISPATCH, Op.COMPILE, Op.PING]), data=st.data())
    @event
    def submit(self, timeout, retries, pin, op, data) -> None:
        """A call, maybe pinned to a handle: one a reply gave (it may be stale by now), one
        of a worker serving now, or a made-up one."""
        slot = generation = None
        serving = [(w.index, w.generation) for w in self.machine.workers
                   if w.state in ("idle", "busy")]
        if pin == "handle" and self.handles:
            slot, generation = data.draw(st.sampled_from(self.handles), label="handle")
        elif pin == "current" and serving:
            slot, generation = data.draw(st.sampled_from(serving), label="handle")
        elif pin == "bogus":
            slot, generation = data.draw(st.tuples(st.integers(0, 3), st.integers(0, 4)),
                                         label="made-up handle")
        self.call(Request(Call(body_of(op), [], deadline=deadline_after(timeout, self.now),
                          retries=retries, slot=slot, generation=generation)))

    @precondition(lambda self: self.steps >= 25 and self.machine.state != "closed")
    @rule()
    @event
    def close(self) -> None:
        self.machine.close(self.now)
        self.run()

    # -- the OS and time --------------------------------------------------------------------

    @rule(count=st.integers(1, 3))
    @event
    def refuse_spawns(self, count) -> None:
        """The OS refuses the next ``count`` spawns (EAGAIN, EMFILE, ENOSPC)."""
        self.refusals = count

    @precondition(lambda self: self.some(lambda p: True))
    @rule(data=st.data(), kind=st.sampled_from(["die", "die", "freeze", "cut_off", "lose"]),
          code=st.sampled_from(EXIT_CODES))
    @event
    def fault(self, data, kind, code) -> None:
        """A worker dies (starting, idle, busy, frozen or stopping), freezes (SIGSTOP: it
        says nothing from now on), loses its connection (sends to it fail, what it sends is
        lost; its heartbeats go on), or a request sent to it never reaches its main thread
        (what a broken lane looks like)."""
        proc = self.pick(data, lambda p: True)
        if kind == "die":
            self.exit(proc, code)
        elif kind == "freeze":
            proc.frozen = True
        elif kind == "cut_off":
            proc.cut_off = True
        elif proc.inbox:
            proc.inbox.pop(0)
            proc.cut_off = True

    @precondition(lambda self: self.some(lambda p: p.exiting is not None))
    @rule()
    @event
    def reap_exits(self) -> None:
        """Signalled processes that have left are reported."""
        self.reap()

    @rule(seconds=st.one_of(st.floats(0.001, 1.0), st.floats(1.0, 200.0)),
          beats=st.sampled_from([True, True, True, False]), every_timer=st.booleans())
    @event
    def time_passes(self, seconds, beats, every_timer) -> None:
        """Time passes: the shell ticks at every timer on the way, or only at the end (this
        process was suspended: Ctrl-Z, starvation); healthy workers beat, or all keep
        silent."""
        if every_timer:
            self.advance_to(self.now + seconds, beats)
        else:
            self.step_to(self.now + seconds, beats)

    # -- the workers ----------------------------------------------------------------------------

    @precondition(lambda self: self.some(lambda p: p.serves and not p.said_hello))
    @rule(data=st.data(), kind=st.sampled_from(["hello", "hello", "failed", "unreadable"]))
    @event
    def hello(self, data, kind) -> None:
        self.say_hello(self.pick(data, lambda p: p.serves and not p.said_hello), kind)

    def say_hello(self, proc: Process, kind: str = "hello") -> None:
        proc.said_hello = True
        if kind == "failed":  # the backend could not load: say so, then leave with 3
            self.send(proc, Message(HelloFailed(
                error=VyreError("no device").to_dict(), traceback="tb",
                proof=proc.proof), 0, proc.generation))
            proc.exiting = 3
            return
        caps = CAPS if kind == "hello" else {"max_workgroup_size": "many"}
        proc.greeted = kind == "hello"
        self.send(proc, Message(hello(caps, proc.proof), 0, proc.generation))

    @precondition(lambda self: self.some(lambda p: p.beats))
    @rule(data=st.data())
    @event
    def heartbeat(self, data) -> None:
        self.send(self.pick(data, lambda p: p.beats), Message(Heartbeat()))

    @precondition(lambda self: self.some(lambda p: p.serves and p.inbox and not p.running))
    @rule(data=st.data(), read_page=st.booleans(), readable=st.sampled_from([True] * 5 + [False]))
    @event
    def receive(self, data, read_page, readable) -> None:
        """The worker's main thread takes the next request sent to it; one it cannot decode
        it answers at once with an error for id 0 (its page untouched)."""
        proc = self.pick(data, lambda p: p.serves and p.inbox and not p.running)
        if not readable:
            proc.answered.append(proc.inbox.pop(0))
            self.send(proc, Message(Failed(ProtocolError("header too big").to_dict()), 0,
                                    proc.generation))
            return
        self.take(proc)
        if read_page:
            self.machine.progress(proc.index, *proc.page, self.now)
            self.run()

    @precondition(lambda self: self.some(lambda p: True))
    @rule(data=st.data(), rss=st.sampled_from([None, 10, 5000]))
    @event
    def read_page(self, data, rss) -> None:
        """The shell reads a worker's progress page (and measures its memory)."""
        proc = self.pick(data, lambda p: True)
        if rss is not None:
            self.machine.measured(proc.index, rss)
        self.machine.progress(proc.index, *proc.page, self.now)
        self.run()

    @precondition(lambda self: self.some(lambda p: p.beats and p.running))
    @rule(data=st.data(),
          how=st.sampled_from(["reply", "reply", "reply", "error", "device_lost", "garbled",
                               "lost"]),
          error=ERROR_MAPS)
    @event
    def answer(self, data, how, error) -> None:
        """The worker answers the request it is running: its reply, an ERROR with any map,
        a lost device, a reply this process cannot decode, or one lost on its way (its
        lane broke)."""
        self.give_answer(self.pick(data, lambda p: p.beats and p.running), how, error)

    def give_answer(self, proc: Process, how: str, error: Any = None) -> None:
        req, gen = proc.running, proc.generation  # tagged with the generation it ran in
        proc.running = None
        proc.answered.append(req)
        proc.page = (proc.page[0], req.tracking.id)
        if isinstance(req.call.message, Shutdown):  # answered, then it leaves
            proc.exiting = 0
        if isinstance(req.call.message, Shutdown | TryRecover) and how not in ("error", "lost"):
            how = "reply"
        if how == "lost":  # its lane broke: nothing more crosses it
            proc.cut_off = True
        if isinstance(req.call.message, TryRecover) and how in ("reply", "lost"):  # in place
            proc.generation = req.call.message.generation
        if how == "reply":  # (the pool's own requests carry no value: Recovered(CAPS), Done)
            self.send(proc, Message(reply_of(req), req.tracking.id, gen,
                                    [] if req.call.internal else [reply_value(req.tracking.id)]))
        elif how == "error":
            self.send(proc, Message(Failed(error), req.tracking.id, gen))
        elif how == "device_lost":
            self.send(proc, Message(Failed(DeviceLostError("gone", generation=gen).to_dict()),
                                    req.tracking.id, gen))
        elif how == "garbled":  # its reply could not be decoded, but its id could
            self.send(proc, ProtocolError("undecodable reply", request_id=req.tracking.id))
        self.machine.progress(proc.index, *proc.page, self.now)
        self.run()

    # -- messages that must reach nobody --------------------------------------------------------

    @rule(data=st.data(), kind=st.sampled_from([
        "late", "other_generation", "wrong_id", "again", "stranger", "impostor", "request_op",
        "undecodable"]), op=st.sampled_from([Op.RAN, Op.COMPILED, Op.DONE, Op.ERROR]),
        offset=st.sampled_from([-2, -1, 1]))
    @event
    def noise(self, data, kind, op, offset) -> None:
        """Messages that must resolve nothing: a reply a process sent before it died,
        arriving now; a reply for the request in flight tagged with another generation
        (invariant 3); a reply naming a request the worker does not hold; an answer
        repeated; peers that are not our workers; requests a worker never sends;
        undecodable bytes with no readable id."""
        if kind == "again":  # may deliver a reply that was lost before: once at most
            proc = self.pick(data, lambda p: p.talks and p.answered)
            if proc is not None:
                rid = proc.answered[-1].tracking.id
                self.send(proc, Message(reply_of(proc.answered[-1]), rid, proc.generation,
                                        [reply_value(rid)]))
            return
        if kind == "late":
            if not self.former:
                return
            proc = self.former[data.draw(st.integers(0, len(self.former) - 1), label="former")]
            ids, gen = [r.tracking.id for r in (proc.holding, *proc.answered) if r is not None], \
                proc.generation
        else:
            proc = self.pick(data, lambda p: p.talks)
            held = proc.holding.tracking.id if proc is not None and proc.holding is not None else 0
            gen = proc.generation if proc is not None else 1
            if kind == "other_generation":
                ids, gen = [held, 0], gen + offset
            elif kind == "wrong_id":
                others = [rid for rid in self.submitted if rid != held] or [10**6]
                ids = [data.draw(st.sampled_from(others), label="wrong id")]
            else:
                ids = [held]
        for rid in ids:
            if kind == "impostor" and proc is not None:  # a worker's identity, not its proof
                msg = Message(hello(CAPS, b"guess"), 0, gen)
            elif kind == "request_op":
                msg = Message(body_of(Op.DISPATCH), rid, gen)
            elif kind == "undecodable":
                msg = ProtocolError("garbage")
            else:
                msg = (Message(Failed(DeviceLostError("gone").to_dict()), rid, gen)
                       if op is Op.ERROR else Message(NOISE[op], rid, gen, [reply_value(rid)]))
            who = None if kind == "stranger" else proc
            resolves = self.send(who, msg)
            assert not resolves, (
                f"a {kind} message ({msg}) from {who} resolved request "
                f"{[r.request.tracking.id for r in resolves]}")

    # -- liveness -------------------------------------------------------------------------------

    @rule()
    @event
    def drain(self) -> None:
        """From now on every live, unfrozen worker answers whatever it gets and the OS allows
        every spawn: every request, with a deadline or without, is answered."""
        self.refusals = 0
        interval = self.machine.options.timeouts.heartbeat_interval
        for _ in range(400):
            if not self.unresolved():
                return
            for proc in list(self.procs.values()):
                if not proc.serves and not (proc.beats and proc.running):
                    continue
                if not proc.said_hello:
                    self.say_hello(proc)
                elif proc.running is not None:
                    self.give_answer(proc, "reply")
                else:
                    self.take(proc)
            timer = self.machine.next_timer()
            when = self.now + interval if timer is None else min(timer, self.now + interval)
            self.step_to(max(when, self.now + 1e-3), beats=True)
        stuck = [(r.tracking.id, r.tracking.state, r.tracking.worker, r.call.deadline)
                 for r in self.unresolved()]
        raise AssertionError(f"healthy workers left requests unanswered: {stuck}; workers "
                             f"{[(w.index, w.state) for w in self.machine.workers]}")

    # -- after every step -------------------------------------------------------------------------

    @invariant()
    def deadlines_are_kept(self) -> None:
        self.check_deadlines()

    @invariant()
    def intensity_scales_with_the_workers(self) -> None:
        """A pool fails on deaths only past ``max_restarts`` per worker process."""
        failure = self.machine.failure if self.machine is not None else None
        if failure is not None and " worker deaths in " in failure.cause:
            deaths = int(failure.cause.split(" worker deaths in ")[0].rsplit(" ", 1)[1])
            limit = self.machine.options.restart.max_restarts * len(self.machine.workers)
            assert deaths == limit + 1, (failure.cause, limit)

    def teardown(self) -> None:
        """Close, let time pass until every process exited: every request resolved once."""
        if not self.clean or self.machine is None:
            return
        self.machine.close(self.now)
        self.run()
        for _ in range(50):
            if self.machine.stopped and not any(p.alive for p in self.procs.values()):
                break
            self.advance_to(self.now + self.machine.options.timeouts.kill_grace, beats=False)
        assert self.machine.stopped, [(w.index, w.state) for w in self.machine.workers]
        assert not [p.pid for p in self.procs.values() if p.alive], "processes outlived close"
        assert not self.unresolved(), (
            f"unresolved after close: {[r.tracking.id for r in self.unresolved()]}")


PoolModel.TestCase.settings = settings(
    max_examples=400, stateful_step_count=50, deadline=None, report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestSupervisionStateful = PoolModel.TestCase


# -- what the state machine found, replayed step by step (the model's checks fail them) --------

#: The options of the sequences hypothesis found, under what each replay changes.
FOUND = PoolOptions(restart=RestartPolicy(max_restarts=0, window=1.0, cooldown=1.0),
                    timeouts=Timeouts(kill_grace=0.1, startup=0.5, heartbeat_interval=0.1,
                                      heartbeat=2.0))


def found_pool(refusals: int = 0, **options: Any) -> PoolModel:
    """The model with the options of a sequence hypothesis found (``FOUND``, changed by
    ``options``: ``options_over``), started by its first call (a PING, to worker 0)."""
    state = PoolModel()
    state.refusals = refusals
    found = options_over(FOUND, **options)
    state.make_pool(workers=found.workers, restart=found.restart, timeouts=found.timeouts)
    return state


def test_a_request_whose_send_failed_goes_to_another_worker_not_the_unreachable_one():
    """Found before 732effc: send_failed put the unreachable worker back to idle before
    re-queueing the request, so it was sent straight back there."""
    state = found_pool(workers=2)
    unreachable = state.procs[0]
    state.say_hello(unreachable)
    state.say_hello(state.procs[1])
    state.take(unreachable)
    state.give_answer(unreachable, "reply")
    unreachable.cut_off = True
    req = Request(Call(body_of(Op.DISPATCH), []))
    state.call(req)  # to worker 0, refused: on_send checks it never goes there again
    assert state.procs[1].holding is req and unreachable.signalled


def test_a_failed_pool_with_a_worker_in_backoff_leaves_no_timer_in_the_past():
    """next_timer counts a back-off the tick acts on only while the pool is running: a
    failed (or closed) pool reports a past time forever and the shell's loop spins."""
    state = found_pool(refusals=1, workers=2)  # worker 0 backs off, worker 1 starts
    state.exit(state.procs[1], 3)              # the pool fails
    state.step_to(1.0, beats=True)


def test_a_busy_worker_that_never_received_its_request_leaves_no_timer_in_the_past():
    """next_timer counts heard_at + Timeouts.heartbeat for every busy worker, but the tick
    checks it only once the request was received and not yet answered."""
    state = found_pool(timeouts={"heartbeat_interval": 1.0, "heartbeat": 2.0})
    worker = state.procs[0]
    state.step_to(1.0, beats=True)  # hello, a heartbeat, the PING taken
    state.give_answer(worker, "reply")
    worker.frozen = True
    state.call(Request(Call(body_of(Op.DISPATCH), [])))  # sent at 1.0, never received
    state.advance_to(4.0, beats=False)        # from 3.0 to 4.0 next_timer says 3.0


def test_a_device_recovery_that_hangs_is_stopped_at_its_deadline():
    """_request_recovery gives TRY_RECOVER a deadline (Timeouts.startup) that nothing
    enforces: it never enters the deadline heap, so _expire's internal branch never runs."""
    state = found_pool(timeouts={"startup": 0.5})
    worker = state.procs[0]
    state.step_to(0.1, beats=True)  # hello, the PING taken
    state.give_answer(worker, "device_lost")  # TRY_RECOVER sent, deadline 0.6
    state.step_to(1.0, beats=True)  # taken; the backend's try_recover() hangs, beats go on
