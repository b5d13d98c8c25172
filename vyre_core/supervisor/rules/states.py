"""The states of a worker slot, a pool and a call, and every move between them, as data.

The rules change a state only through ``_move``, ``_move_pool`` and ``_move_call`` (in
``slots.py``), each naming the event that moves it. The tables below are the whole list of
moves: with ``CHECKING`` on (the test suite turns it on), a move that is not a row fails at
once, naming the event and both states; off, a move is one assignment, so a dispatch pays
nothing for it. docs/architecture.md shows the tables as ``render()`` writes them, and a
test checks that the two agree, so the page and the code cannot drift apart (h11 keeps its
states the same way). Events that change no state (a kill timer, a heartbeat) are not rows.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import cache

#: On: every move is checked against its table (tests/conftest.py turns it on).
CHECKING = False


class WorkerState(enum.StrEnum):
    """A worker slot's state (the values are what ``status()`` and ``vyre status`` show)."""

    STOPPED = "stopped"    # no process
    SPAWNING = "spawning"  # asked the shell for a process
    STARTING = "starting"  # its process runs; no hello yet
    IDLE = "idle"          # proven, serving nothing
    BUSY = "busy"          # running a call
    SPARE = "spare"        # proven, in a standby slot
    STOPPING = "stopping"  # asked to stop (``Shutdown``)
    KILLING = "killing"    # signalled; its exit is awaited
    BACKOFF = "backoff"    # could not start; tried again later


class PoolState(enum.StrEnum):
    """A pool's state (``status()`` shows ``recovering`` while a ``running`` pool is
    half-open, and ``not started`` for ``new``)."""

    NEW = "new"
    RUNNING = "running"
    FAILED = "failed"
    CLOSED = "closed"


class CallState(enum.StrEnum):
    """A call's state, as the rules hold it."""

    NEW = "new"
    QUEUED = "queued"
    SENT = "sent"
    DONE = "done"


class Event(enum.StrEnum):
    """What moves a state: a method of the rules, fed by the shell or by another rule."""

    START = "start"
    SPAWNED = "spawned"
    SPAWN_DROPPED = "spawn dropped"
    SPAWN_FAILED = "spawn failed"
    PROMOTE = "promote"
    HELLO = "hello"
    START_REFUSED = "start refused"
    UNPLACED = "unplaced"
    SCHEDULE = "schedule"
    RECOVER = "recover"
    ANSWER = "answer"
    REPLY_LOST = "reply lost"
    RETIRE = "retire"
    EXITED = "exited"
    SUBMIT = "submit"
    COOLDOWN_OVER = "cool-down over"
    FAIL = "fail"
    CLOSE = "close"
    SEND = "send"
    REQUEUE = "requeue"
    RESOLVE = "resolve"


# The members as module names, as the rules use them: a member read off its class goes
# through the enum's metaclass (about 5x a module name's cost on CPython 3.11), and the
# rules compare states and name events several times per call.
STOPPED = WorkerState.STOPPED
SPAWNING = WorkerState.SPAWNING
STARTING = WorkerState.STARTING
IDLE = WorkerState.IDLE
BUSY = WorkerState.BUSY
SPARE = WorkerState.SPARE
STOPPING = WorkerState.STOPPING
KILLING = WorkerState.KILLING
BACKOFF = WorkerState.BACKOFF
RUNNING = PoolState.RUNNING
FAILED = PoolState.FAILED
CLOSED = PoolState.CLOSED
QUEUED = CallState.QUEUED
SENT = CallState.SENT
DONE = CallState.DONE
START = Event.START
SPAWNED = Event.SPAWNED
SPAWN_DROPPED = Event.SPAWN_DROPPED
SPAWN_FAILED = Event.SPAWN_FAILED
PROMOTE = Event.PROMOTE
HELLO = Event.HELLO
START_REFUSED = Event.START_REFUSED
UNPLACED = Event.UNPLACED
SCHEDULE = Event.SCHEDULE
RECOVER = Event.RECOVER
ANSWER = Event.ANSWER
REPLY_LOST = Event.REPLY_LOST
RETIRE = Event.RETIRE
EXITED = Event.EXITED
SUBMIT = Event.SUBMIT
COOLDOWN_OVER = Event.COOLDOWN_OVER
FAIL = Event.FAIL
CLOSE = Event.CLOSE
SEND = Event.SEND
REQUEUE = Event.REQUEUE
RESOLVE = Event.RESOLVE


#: The slot has no process (none to stop, none to hear from).
NO_PROCESS = (STOPPED, SPAWNING, BACKOFF)
#: Told to stop, its exit awaited.
ENDING = (STOPPING, KILLING)
#: Serving calls: handles made in its process are valid.
SERVING = (IDLE, BUSY)
#: Proven and running nothing (heard from by its heartbeats alone).
RESTING = (IDLE, SPARE)
#: Proven: what it probed is known.
PROVEN = (IDLE, BUSY, SPARE)
#: On its way in or out: it may serve once its slot has started again.
PASSING = (SPAWNING, STARTING, STOPPING, KILLING)
#: No process, or one already told to stop: a retire has nothing to begin.
NOTHING_TO_STOP = NO_PROCESS + ENDING


@dataclass(frozen=True)
class Rule:
    """One move: ``event`` takes a state in ``before`` to ``after`` when ``when`` holds
    (in words: the code checks it), doing ``actions`` (in words)."""

    event: Event
    before: frozenset[enum.StrEnum]
    after: enum.StrEnum
    when: str
    actions: str


def _rule(event: Event, before: tuple[enum.StrEnum, ...], after: enum.StrEnum, when: str,
          actions: str) -> Rule:
    return Rule(event, frozenset(before), after, when, actions)


#: Every move of a worker slot.
WORKER_RULES: tuple[Rule, ...] = (
    _rule(START, (STOPPED, BACKOFF), SPAWNING,
          "the pool runs: its first call, an exit, a back-off or a cool-down over, a spare "
          "gone to another slot", "generation + 1; `Spawn`"),
    _rule(SPAWNED, (SPAWNING,), STARTING, "its generation",
          "start deadline set; retired at once if the pool closed or failed meanwhile"),
    _rule(SPAWN_DROPPED, (SPAWNING,), STOPPED,
          "the pool closed before its fork server was ready", "none"),
    _rule(SPAWN_FAILED, (SPAWNING,), BACKOFF,
          "the OS refused a process; no ready spare on its device",
          "its pinned calls invalidated; waiting calls nobody can serve fail; `Log`"),
    _rule(PROMOTE, (SPAWNING, STOPPED), BUSY,
          "its spawn failed or it exited, and a ready spare on its device takes the slot",
          "generation + 1; `Promote`; `Send(Adopt)`"),
    _rule(PROMOTE, (SPARE,), STOPPED,
          "the spare's own slot: its process now serves another", "then `start`"),
    _rule(HELLO, (STARTING,), IDLE,
          "a serving slot; proof, generation and device right; capabilities readable",
          "capabilities learnt (`RoutingChanged` if they changed); half-open ends"),
    _rule(HELLO, (STARTING,), SPARE, "a standby slot; the same", "the same"),
    _rule(START_REFUSED, (STARTING,), STOPPED,
          "(Ray) its node lacks the backend", "`Log`; then `start` elsewhere; no death"),
    _rule(UNPLACED, (STARTING,), BACKOFF,
          "(Ray) no room on the cluster near its start deadline",
          "`Signal(kill)`; as `spawn failed`"),
    _rule(SCHEDULE, (IDLE,), BUSY,
          "a call it may serve waits; heard within `silence_limit`", "`Send`"),
    _rule(RECOVER, (IDLE,), BUSY, "its answer was a `DeviceLostError`",
          "`Send(TryRecover)`"),
    _rule(ANSWER, (BUSY,), IDLE,
          "its current call answered, its generation (a cancelled call's answer too)",
          "`Resolve`, or the call goes first in line again; a recycle due: `retire`"),
    _rule(REPLY_LOST, (BUSY,), IDLE,
          "answered (its page says so), the reply not whole within its window",
          "`Resolve(MessageLostError)`"),
    _rule(RETIRE, (IDLE, SPARE), STOPPING,
          "a planned stop without a kill while the pool runs",
          "`Send(Shutdown)`; kill timer"),
    _rule(RETIRE, (STARTING, IDLE, BUSY, SPARE), KILLING,
          "any other stop: a fault, a deadline, a kill, the pool closed or failed",
          "`Signal(term or kill)`; kill timer"),
    _rule(EXITED, (STARTING,), BACKOFF,
          "its start said why it can never serve; the pool runs", "no death counted"),
    _rule(EXITED, (STARTING, IDLE, BUSY, SPARE, STOPPING, KILLING),
          STOPPED, "any other exit (a stale one, of a slot already stopped, is ignored)",
          "`Release`; its call run again or failed; pinned calls invalidated; a death "
          "counted unless planned, past the limit the pool fails; else `start` or "
          "`promote`"),
)

#: Every move of a pool.
POOL_RULES: tuple[Rule, ...] = (
    _rule(SUBMIT, (PoolState.NEW,), RUNNING, "its first call", "`start` every slot"),
    _rule(COOLDOWN_OVER, (FAILED,), RUNNING, "a call after its cool-down",
          "half-open: one death fails it again; `start` stopped slots; `RoutingChanged`"),
    _rule(FAIL, (RUNNING,), FAILED,
          "a counted death past the restart limit, a death while half-open, or no worker "
          "ever said hello", "pending calls fail; every worker retired; `RoutingChanged`"),
    _rule(CLOSE, (PoolState.NEW, RUNNING, FAILED), CLOSED, "the driver closes",
          "pending calls fail; every worker retired"),
)

#: Every move of a call.
CALL_RULES: tuple[Rule, ...] = (
    _rule(SUBMIT, (CallState.NEW,), QUEUED, "accepted", "deadline watched; schedule"),
    _rule(SEND, (CallState.NEW, QUEUED), SENT,
          "a worker takes it (a call the rules make is sent as it is made)", "`Send`"),
    _rule(REQUEUE, (SENT,), QUEUED,
          "it never reached a worker, was cut off, was refused for its program or its "
          "shared memory, or its worker died with its fork server",
          "first in line again (a new id when refused)"),
    _rule(RESOLVE, (CallState.NEW, QUEUED, SENT), DONE,
          "answered, failed, timed out, cancelled or closed", "`Resolve`, exactly once"),
)

TABLES: dict[str, tuple[Rule, ...]] = {
    "worker": WORKER_RULES, "pool": POOL_RULES, "call": CALL_RULES}


@cache
def _moves(whose: str) -> frozenset[tuple[Event, enum.StrEnum, enum.StrEnum]]:
    return frozenset((r.event, b, r.after) for r in TABLES[whose] for b in r.before)


def check(whose: str, event: Event, before: enum.StrEnum, after: enum.StrEnum,
          what: str) -> None:
    """Fail unless ``event`` may move ``what`` (a ``whose``: worker, pool, call) from
    ``before`` to ``after``."""
    if (event, before, after) not in _moves(whose):
        raise AssertionError(
            f"{what}: {event.value!r} moved it from {before!s} to {after!s}, which no row "
            f"of the {whose} table allows. Fix: add the row to "
            "vyre_core/supervisor/rules/states.py (and docs/architecture.md) if the move is "
            "meant, else mend the rule that made it.")


def render(whose: str) -> str:
    """The ``whose`` table in Markdown, as docs/architecture.md shows it."""
    rows = ["| event | before | after | when | actions |", "| --- | --- | --- | --- | --- |"]
    order = list(type(TABLES[whose][0].after))
    for r in TABLES[whose]:
        before = ", ".join(s.value for s in sorted(r.before, key=order.index))
        rows.append(f"| {r.event.value} | {before} | {r.after.value} | {r.when} | "
                    f"{r.actions} |")
    return "\n".join(rows)
