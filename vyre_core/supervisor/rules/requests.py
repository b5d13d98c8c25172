"""A call as the rules see it, with the parts the shell keeps on it. In a file of its
own because the rules, both shells, routing and tracing all hold requests, and none of
them should need the rules' machinery to name one."""

from __future__ import annotations

import itertools
from typing import Any

from vyre_core.boundary.messages import Body
from vyre_core.deadline import NO_DEADLINE, Deadline
from vyre_core.supervisor.outcome import Outcome
from vyre_core.supervisor.rules.states import DONE, CallState

_ids = itertools.count(1)


class Request:
    """One call to a worker: what to send, its deadline (made when the call was, kept
    across retries and re-routing), how often it may run again after a
    crash, the worker generation it is pinned to (pipelines, resident buffers), and the
    future its caller waits on. ``internal`` requests (recovery, shutdown) have no caller."""

    def __init__(self, message: Body, arrays: list[Any], *,
                 deadline: Deadline = NO_DEADLINE, retries: int = 0,
                 slot: int | None = None, generation: int | None = None,
                 internal: bool = False, outputs: list[tuple[Any, int]] | None = None,
                 devices: frozenset[int] | None = None,
                 capable: frozenset[str] | None = None, into: list[Any] | None = None
                 ) -> None:
        self.id = next(_ids)
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
        self.devices = devices          # the devices it may run on (None: any), by routing
        # the identities of the probed capabilities a worker must have to run it (None:
        # any), by routing, for pools whose workers of one device probed unlike (on
        # unlike cluster nodes)
        self.capable = capable
        self.future: Outcome | None = Outcome()  # let go of once answered (by the shell)
        self.frames: list[Any] | None = None  # the encoded message: the shell's, opaque here
        self.nbytes = 0                       # its size, set by the shell when encoded
        self.shared: list[Any] = []           # shared memory holding its data (the shell's)
        self.out_slots: list[Any] = []        # of it, the one taken for each output, or None
        self.waker: Any = None                # the waiting caller's (the shell's)
        self.pending_send: Any = None         # (Send, lane) its caller has to carry out
        self.sent_on: Any = None              # the lane it went out on last
        self.with_program = False             # must carry its program's wire form
        self.socket_only = False              # must carry its arrays on the socket
        self.lean = False                     # encoded naming its program by fingerprint
        self.wire: Any = None                 # (out, arrays) as encoded (the shell's)
        self.trace: Any = None                # its span's parent and start (the shell's)
        # what the rules have done with it
        self.state = CallState.NEW
        self.worker: int | None = None
        self.sent_at = 0.0
        self.acked = False              # the worker's main thread has it (its page says so)
        self.stopping = False           # cancelled while running: its worker is told to stop
        self.finished_seen_at: float | None = None
        self.reply_bytes = 0            # the answer's size, per the worker's page
        self.watched = False            # on the deadline heap
        self.crashes = 0                # workers that died while running it
        self.losses = 0                 # sends that never reached a worker
        self.served_by: tuple[int, int] | None = None  # (worker index, generation)
        self.submitted_at = 0.0         # when the rules first had it (for its latency)
        self.program_held = False       # its last worker held its program when sent it
        self.input_bytes = 0            # its arrays' bytes as sent (the shell's, counted)

    @property
    def done(self) -> bool:
        return self.state == DONE

    @property
    def label(self) -> str:
        label = self.message.label
        return f"{self.op} {label!r}" if label else str(self.op)

    def renewed(self) -> Request:
        """A fresh copy (new id and future, same deadline) to send to another pool."""
        return Request(self.message, self.arrays, deadline=self.deadline,
                       retries=self.retries, slot=self.slot,
                       generation=self.generation, internal=self.internal,
                       outputs=self.outputs, devices=self.devices, capable=self.capable,
                       into=self.into)
