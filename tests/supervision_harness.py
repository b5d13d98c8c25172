"""A stand-in for the pool's I/O shell, for testing the supervision rules without a
process, socket or clock: it answers the rules' actions the way the shell would (a spawn
starts a "process", a send reaches the "worker") and lets a test play the workers: say
hello, receive, reply, beat, die, go silent. Time is a number the test moves."""

from __future__ import annotations

import itertools
from typing import Any

from vyre_core.boundary.messages import (
    CLASS_OF,
    REPLY_OF,
    Body,
    Failed,
    Heartbeat,
    Hello,
    Message,
    Op,
    Recovered,
)
from vyre_core.contract.types import Capabilities
from vyre_core.deadline import NO_DEADLINE, Deadline
from vyre_core.errors import VyreError
from vyre_core.supervisor.options import PoolOptions, RestartPolicy, Timeouts
from vyre_core.supervisor.rules.actions import Log, Resolve, RoutingChanged, Send, Signal, Spawn
from vyre_core.supervisor.rules.constants import TICK_EVERY
from vyre_core.supervisor.rules.machine import PoolMachine
from vyre_core.supervisor.rules.requests import Call, Request
from vyre_core.testing.tight import options_over

CAPS = Capabilities(max_workgroup_size=(64, 1, 1), max_invocations_per_workgroup=64,
                    max_workgroups_per_dimension=1024).to_dict()
PROOF = b"token"
#: The harness's pool options, under what a test changes (``Shell(restart={...})`` changes
#: only the restart fields it names: ``options_over``).
OPTIONS = PoolOptions(restart=RestartPolicy(max_restarts=3, window=60.0, cooldown=30.0),
                      timeouts=Timeouts(heartbeat_interval=0.5, heartbeat=30.0,
                                        kill_grace=2.0, startup=10.0))


#: What a request's body holds when a test does not say (the rules read only ``fp`` and
#: ``label`` of a request, and the generation of the pool's own).
_FIELDS: dict[str, Any] = {"fp": None, "program": None, "config": {}, "pipeline": 0,
                           "byte_len": 0, "handle": 0, "handles": (), "resident": {},
                           "generation": 0}


def body_of(op: Op, label: str | None = None, fp: str | None = None) -> Body:
    """A request of class ``op`` (``messages.CLASS_OF``) with its label and fingerprint,
    the rest defaults. ``fp`` None makes a dispatch that names no program (the rules then
    mirror no cache for it): no codec sees it."""
    cls = CLASS_OF[op]
    fields = {**_FIELDS, "fp": fp, "label": label or None}
    assert not label or "label" in cls.__struct_fields__, f"{op} has no label"
    assert fp is None or "fp" in cls.__struct_fields__, f"{op} has no fingerprint"
    return cls(**{name: fields[name] for name in cls.__struct_fields__ if name in fields})


def reply_of(req: Request) -> Body:
    """The reply of the class ``req`` is answered with (``messages.REPLY_OF``): its
    fields defaults (a recovery's, the harness's capabilities)."""
    cls = REPLY_OF[type(req.call.message)]
    if cls is Recovered:
        return Recovered(CAPS)
    defaults = {"pipeline": 0, "key": "", "compile_ns": 0, "handle": 0}
    return cls(**{name: defaults[name] for name in cls.__struct_fields__ if name in defaults})


def deadline_after(timeout: float | None, now: float) -> Deadline:
    """A caller's deadline ``timeout`` seconds after ``now`` on the rules' clock (0 and
    past values included: the rules must answer them), None: none."""
    return NO_DEADLINE if timeout is None else Deadline(now + timeout, timeout)


class Shell:
    """Drives a PoolMachine. ``auto_start`` answers every Spawn with a started process,
    ``auto_hello`` makes it say hello at once."""

    def __init__(self, auto_start: bool = True, auto_hello: bool = True,
                 resolved: tuple[int, ...] | None = None, **options: Any) -> None:
        """``resolved``: the devices the pool found for ``devices="all"``; ``options``:
        changes to ``OPTIONS`` (``options_over``)."""
        self.options = options_over(OPTIONS, **options)
        self.machine = PoolMachine("b", self.options, resolved)
        self.now = 0.0
        self.auto_start = auto_start
        self.auto_hello = auto_hello
        self.results: dict[int, Any] = {}      # request id -> reply or error
        self.resolved_count: dict[int, int] = {}
        self.sends: list[Send] = []
        self.signals: list[Signal] = []
        self.spawns: list[Spawn] = []
        self.logs: list[Log] = []
        self.routing_changes = 0
        self.alive: dict[int, int] = {}        # index -> pid of the live process
        self._pids = itertools.count(1000)

    # -- driving ----------------------------------------------------------------------------

    def run(self) -> list[Any]:
        """Carry out actions until there are none; returns them."""
        done: list[Any] = []
        while actions := self.machine.take_actions():
            for action in actions:
                done.append(action)
                if isinstance(action, Resolve):
                    self.machine.answered(action.request, action.value, self.now)  # (as
                    # the shells do, handing the answer over)
                    rid = action.request.tracking.id
                    self.results[rid] = action.value
                    self.resolved_count[rid] = self.resolved_count.get(rid, 0) + 1
                elif isinstance(action, Send):
                    self.sends.append(action)
                elif isinstance(action, Signal):
                    self.signals.append(action)
                elif isinstance(action, Spawn):
                    self.spawns.append(action)
                    if self.auto_start:
                        self.start(action.index, action.generation)
                elif isinstance(action, RoutingChanged):
                    self.routing_changes += 1
                elif isinstance(action, Log):
                    self.logs.append(action)
        return done

    def submit(self, *, op: Op = Op.DISPATCH, timeout: float | None = None,
               retries: int = 1, slot: int | None = None,
               generation: int | None = None, label: str | None = None,
               fp: str | None = None, devices: set[int] | None = None) -> Request:
        req = Request(Call(body_of(op, label, fp), [], deadline=deadline_after(timeout, self.now),
                      retries=retries, slot=slot, generation=generation,
                      devices=None if devices is None else frozenset(devices)))
        self.machine.submit(req, self.now)
        self.run()
        return req

    def advance(self, seconds: float) -> None:
        """Time passes while the shell runs: it ticks at least every TICK_EVERY seconds."""
        end = self.now + seconds
        while True:
            self.now = min(end, self.now + TICK_EVERY)
            self.machine.tick(self.now)
            self.run()
            if self.now >= end:
                return

    def pause(self, seconds: float) -> None:
        """This process does not run for ``seconds`` (Ctrl-Z, starvation): no tick."""
        self.now += seconds

    # -- the workers ---------------------------------------------------------------------------

    def worker(self, index: int):
        return self.machine.workers[index]

    def identity(self, index: int) -> bytes:
        return self.worker(index).identity

    def start(self, index: int, generation: int) -> None:
        pid = next(self._pids)
        self.alive[index] = pid
        self.machine.spawned(index, generation, f"w{index}.{generation}".encode(), PROOF, pid,
                             self.now)
        if self.auto_hello:
            self.hello(index)

    def hello(self, index: int, proof: bytes = PROOF, caps: dict | None = None,
              **fields: Any) -> None:
        """The worker says hello, on the device it was pinned to unless ``fields`` (of
        ``Hello``) say otherwise."""
        w = self.worker(index)
        fields = {"pid": 0, "backend": "b", "version": "test", "device": w.device,
                  "devices": [], **fields}
        self.machine.message(w.identity, Message(Hello(
            capabilities=CAPS if caps is None else caps, proof=proof, **fields),
            0, w.generation), self.now)
        self.run()

    def receive(self, index: int, req: Request | None = None) -> None:
        """The worker's main thread takes ``req`` (its progress page says so)."""
        req = req or self.worker(index).current
        self.machine.progress(index, req.tracking.id, 0, self.now)
        self.run()

    def reply(self, index: int, req: Request | None = None, value: Any = None,
              error: VyreError | None = None, gen: int | None = None,
              body: Body | None = None, cache: tuple[int, int, int] | None = None) -> None:
        """The worker answers ``req`` (its current one): with ``error``, or with the reply
        of its class (``body`` if given) carrying ``value``, if not None, as its one
        array (the caller gets ``(reply, [value])``), and ``cache``, the pipeline-cache
        counters (``Message.cache``)."""
        w = self.worker(index)
        req = req or w.current
        self.machine.progress(index, req.tracking.id, req.tracking.id, self.now)
        gen = w.generation if gen is None else gen
        msg = (Message(Failed(error.to_dict()), req.tracking.id, gen) if error
               else Message(reply_of(req) if body is None else body, req.tracking.id, gen,
                            [] if value is None else [value], cache=cache))
        self.machine.message(w.identity, msg, self.now)
        self.run()

    def beat(self, index: int) -> None:
        w = self.worker(index)
        self.machine.message(w.identity, Message(Heartbeat()), self.now)
        self.run()

    def die(self, index: int, code: int | None = -9, output: str = "",
            collateral: bool = False) -> None:
        self.alive.pop(index, None)
        self.machine.exited(index, code, output, self.now, collateral=collateral)
        self.run()

    def obey_signals(self) -> None:
        """Processes the rules signalled exit (SIGTERM honoured, SIGKILL always)."""
        pending, self.signals = self.signals, []
        for sig in pending:
            if sig.index in self.alive:
                self.die(sig.index, -9 if sig.kill else -15)

    # -- observing ------------------------------------------------------------------------------

    def result(self, req: Request) -> Any:
        assert req.tracking.id in self.results, f"request {req.tracking.id} is unresolved"
        return self.results[req.tracking.id]

    def sent_to(self, index: int) -> list[Request]:
        return [s.request for s in self.sends if s.index == index]
