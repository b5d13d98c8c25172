"""What the mixins of the local ``Pool`` share, declared for type checkers: the state its
``__init__`` sets (``local/pool.py``) and the methods one mixin calls on another. A room
of its own so that ``transfer.py`` and ``processes.py`` can name what they use without
importing the class they are mixed into."""

from __future__ import annotations

import collections
import enum
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import zmq

from vyre_core.dataplane import SegmentPool
from vyre_core.registry import BackendRegistration
from vyre_core.spinning import Spinning
from vyre_core.supervisor import published
from vyre_core.supervisor.facts import PoolFacts
from vyre_core.supervisor.fork_server import ForkServer
from vyre_core.supervisor.lane import Lane
from vyre_core.supervisor.options import PoolOptions
from vyre_core.supervisor.process import OutputHistory, WorkerProcess
from vyre_core.supervisor.rules.actions import Send, Spawn
from vyre_core.supervisor.rules.requests import Request
from vyre_core.supervisor.rundir import RunDir
from vyre_core.supervisor.shell import Carrier


class IoState(enum.StrEnum):
    """The pool's I/O thread: not started yet (the first call starts it), running, or
    stopped (the pool closed; nothing starts it again)."""

    NEW = "new"
    RUNNING = "running"
    STOPPED = "stopped"


class _Local(PoolFacts):
    """The local pool's state, set by ``Pool.__init__`` (and ``_start``: the socket and
    its poller); nothing here runs: the methods exist only under TYPE_CHECKING."""

    registration: BackendRegistration
    options: PoolOptions
    _rundir: RunDir
    _name: str
    _endpoint: str
    _publisher: published.Publisher
    _on_change: Callable[[], None]
    _secret: bytes
    _context_of_driver: Callable[[], zmq.Context]
    _gate: threading.Lock
    _io_state: IoState
    _closing: bool
    _inbox: collections.deque[Any]
    _wake_fd: int
    _thread: threading.Thread | None
    _io_ended: threading.Event
    _processes: dict[int, WorkerProcess]
    _fork_server: ForkServer | None
    _fork_server_fd: int
    _fork_server_losses: collections.deque[float]
    _fork_server_broken: bool
    _parked: list[Spawn]
    _exits_awaited: dict[WorkerProcess, float]
    _pages: dict[int, tuple[int, int]]
    _index_of: dict[bytes, int]
    _history: list[OutputHistory]
    _segments: SegmentPool
    _lanes: dict[int, Lane]
    _io_lanes: dict[Lane, Request]
    _waiting_sends: list[Send]
    _deferred: list[Any]
    _carrier: Carrier
    _spinning: Spinning
    _callers_spinning: Spinning
    _ticked_at: float
    _sweep_at: float
    _endpoint_check_at: float
    _endpoint_lost: str | None
    _router: zmq.Socket
    _poller: zmq.Poller

    if TYPE_CHECKING:
        def _wake_io(self) -> None: ...

        def _release(self, request: Request) -> None: ...

        def _read_lane(self, lane: Lane, budget: int | None = None) -> list[Any]: ...

        def _measure(self, identity: bytes) -> None: ...

        def _promote(self, action: Any) -> None: ...
