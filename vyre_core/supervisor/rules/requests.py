"""A call as the pool holds it: three parts, each written by one owner. In a file of its
own because the rules, both shells, routing and tracing all hold requests, and none of
them should need the rules' machinery to name one.

- ``Call``: the caller's (the Driver, routing's ``place``), written before the call is
  submitted. From then on the pool only reads it, but for one hand-over: the shell takes
  the ``future`` when it answers the call.
- ``Tracking``: the rules' (``rules/``), made with the request; nothing else writes it.
- ``Transfer``: the shell's (what it encoded, where the bytes lie), made by the shell
  when the call is submitted; each shell extends it with its own fields. The rules read
  ``nbytes`` (how long the message may take to cross) and ``input_bytes`` (the metrics).
"""

from __future__ import annotations

import itertools
from typing import Any

from vyre_core.boundary.messages import Body
from vyre_core.deadline import NO_DEADLINE, Deadline
from vyre_core.supervisor.outcome import Outcome
from vyre_core.supervisor.rules.states import DONE, CallState

_ids = itertools.count(1)


class Call:
    """What to run and on what terms: the message, its arrays, its deadline (made when the
    call was, kept across retries and re-routing), how often it may run again after a
    crash, the worker and generation it is pinned to (pipelines, resident buffers), the
    devices and capabilities routing allows, and the future its caller waits on.
    ``internal`` calls (recovery, adoption, shutdown) are the rules' own and have no
    caller."""

    __slots__ = (
        "arrays",
        "capable",
        "deadline",
        "devices",
        "future",
        "generation",
        "internal",
        "into",
        "message",
        "op",
        "outputs",
        "retries",
        "slot",
    )

    def __init__(self, message: Body, arrays: list[Any], *,
                 deadline: Deadline = NO_DEADLINE, retries: int = 0,
                 slot: int | None = None, generation: int | None = None,
                 internal: bool = False, outputs: list[tuple[Any, int]] | None = None,
                 devices: frozenset[int] | None = None,
                 capable: frozenset[str] | None = None, into: list[Any] | None = None
                 ) -> None:
        self.message = message
        self.op = message.kind
        self.arrays = arrays
        self.deadline = deadline
        self.retries = retries
        self.slot = slot
        self.generation = generation
        self.internal = internal
        self.outputs = outputs          # (dtype, count) per output, when known
        self.into = into                # per output, the caller's array to write it into
        self.devices = devices          # the devices it may run on (None: any)
        # the identities of the probed capabilities a worker must have to run it (None:
        # any), for pools whose workers of one device probed unlike (unlike cluster nodes)
        self.capable = capable
        self.future: Outcome | None = Outcome()  # taken by the shell when it answers

    def renewed(self) -> Call:
        """The same call with a fresh future, to send to another pool."""
        return Call(self.message, self.arrays, deadline=self.deadline,
                    retries=self.retries, slot=self.slot, generation=self.generation,
                    internal=self.internal, outputs=self.outputs, devices=self.devices,
                    capable=self.capable, into=self.into)


class Tracking:
    """What the rules have done with a call: its id (a new one when a refused call goes
    again), its state, the worker running it and since when, what that worker's progress
    page said of it, the crashes and lost sends it went through, and the rules' decisions
    about its next send (``needs_program``, ``needs_socket``, carried by ``Send``)."""

    __slots__ = (
        "acked",
        "crashes",
        "deadline_entry",
        "finished_seen_at",
        "id",
        "losses",
        "needs_program",
        "needs_socket",
        "program_held",
        "reply_bytes",
        "sent_at",
        "served_by",
        "state",
        "stopping",
        "submitted_at",
        "worker",
    )

    def __init__(self) -> None:
        self.id = next(_ids)
        self.state = CallState.NEW
        self.worker: int | None = None
        self.sent_at = 0.0
        self.acked = False              # the worker's main thread has it (its page says so)
        self.stopping = False           # cancelled while running: its worker is told to stop
        self.finished_seen_at: float | None = None
        self.reply_bytes = 0            # the answer's size, per the worker's page
        # its entry on the deadline heap, [at, id, request] (the request let go of once
        # answered, so the heap keeps nothing answered alive), or None
        self.deadline_entry: list[Any] | None = None
        self.crashes = 0                # workers that died while running it
        self.losses = 0                 # sends that never reached a worker
        self.served_by: tuple[int, int] | None = None  # (worker index, generation)
        self.submitted_at = 0.0         # when the rules first had it (for its latency)
        self.program_held = False       # its last worker held its program when sent it
        self.needs_program = False      # its next send must carry its program's wire form
        self.needs_socket = False       # its next send must carry its arrays on the socket


class Transfer:
    """The shell's part: ``nbytes``, the size of the message it sends (set when encoded);
    ``input_bytes``, its arrays' bytes as sent; ``trace``, its span's parent and start
    (``observability/tracing.py``). Each shell makes its own kind on submit, and for a
    call the rules make (with this plain one) at its first send."""

    __slots__ = ("input_bytes", "nbytes", "trace")

    def __init__(self) -> None:
        self.nbytes = 0
        self.input_bytes = 0
        self.trace: Any = None


class Request:
    """One call to a worker, as the pool holds it: the caller's ``call``, the rules'
    ``tracking``, the shell's ``transfer`` (see the module docstring)."""

    __slots__ = ("__weakref__", "call", "tracking", "transfer")

    def __init__(self, call: Call) -> None:
        self.call = call
        self.tracking = Tracking()
        self.transfer = Transfer()

    @property
    def done(self) -> bool:
        return self.tracking.state == DONE

    @property
    def label(self) -> str:
        call = self.call
        label = call.message.label
        return f"{call.op} {label!r}" if label else str(call.op)

    def renewed(self) -> Request:
        """A fresh request for the same call (new id and future, same deadline), to send
        to another pool."""
        return Request(self.call.renewed())
