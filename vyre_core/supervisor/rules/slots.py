"""What the rules keep per worker slot and about a failed pool, and ``_Rules``: the state and
helpers the mixins of ``PoolMachine`` share, declared for type checkers only, so that each
mixin's file reads and type-checks alone and none of them imports ``machine.py`` back."""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vyre_core.contract.types import Capabilities
from vyre_core.errors import VyreError
from vyre_core.supervisor.rules.requests import Request
from vyre_core.supervisor.rules.states import STOPPED, PoolState, WorkerState

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from vyre_core.contract.types import DeviceInfo
    from vyre_core.errors import (
        DispatchTimeoutError,
        PipelineInvalidatedError,
        PoolFailedError,
        WorkerCrashedError,
    )
    from vyre_core.supervisor.metrics import PoolMetrics
    from vyre_core.supervisor.options import PoolOptions
    from vyre_core.supervisor.rules.actions import Action
    from vyre_core.supervisor.rules.states import CallState, Event


# -- state -------------------------------------------------------------------------------

class Worker:
    """One worker slot as the rules see it; a slot holds one process at a time, each a
    new generation."""

    def __init__(self, index: int, device: int | None = None) -> None:
        self.index = index
        self.device = device            # the device its processes are pinned to, or None
        self.caps: Capabilities | None = None  # what its current process probed
        self.generation = 0
        self.state = STOPPED
        self.identity = b""
        self.proof = b""
        self.proven = False             # said hello with the driver's secret
        self.pid: int | None = None
        self.current: Request | None = None
        self.pinned: collections.deque[Request] = collections.deque()
        self.holding: list[Request] = []  # answered requests whose memory it may still write
        # the fingerprints of the programs its process holds: its cache, mirrored (LRU)
        self.held: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.heard_at = 0.0             # last message of any kind
        self.startup_deadline = 0.0
        self.kill_at: float | None = None
        self.cancel_by: float | None = None  # told to stop a cancelled call: killed after
        self.backoff_until = 0.0
        self.retire_reason = ""
        self.retire_cause: str | None = None  # its word in metrics.RESTART_REASONS
        self.spawn_failures = 0
        self.retiring: str | None = None  # None: any exit is unexpected; planned; fault
        self.deaths = 0                 # counted toward the restart intensity
        self.served = 0                 # caller requests, over every generation
        self.served_generation = 0
        self.rss: int | None = None
        self.hello_error: str | None = None  # why its latest start failed, in one line
        self.failed_starts = 0          # starts in a row that ended before a hello
        self.start_output = ""          # the traceback its failed start reported
        # why its latest start can never serve (the configuration names what the backend
        # lacks): no death is counted, and while it backs off calls fail at once with
        # this, and routing passes the pool over
        self.refusal: VyreError | None = None
        self.last_exit = ""

    @property
    def name(self) -> str:
        return f"worker {self.index} (pid {self.pid})"


@dataclass
class Failure:
    cause: str                # short: its first line names what happened
    fix: str
    output: str               # the last worker's traceback or output tail
    failed_at: float
    retry_at: float
    announced: bool = False  # routing told that the cool-down is over


class _Rules:
    """What the mixins of ``PoolMachine`` share, declared for type checkers: its
    state (set by ``PoolMachine.__init__``) and the helpers one mixin calls on
    another. Nothing here runs: the methods exist only under TYPE_CHECKING."""

    backend: str
    options: PoolOptions
    state: PoolState
    devices: tuple[int, ...] | None
    workers: list[Worker]
    serving: int
    _serving: tuple[Worker, ...]
    _silence: float
    queue: collections.deque[Request]
    device_capabilities: dict[int | None, Capabilities]
    device_variants: dict[int | None, tuple[Capabilities, ...]]
    varied: bool
    device_list: list[DeviceInfo]
    failure: Failure | None
    half_open: bool
    started: bool
    dropped_replies: int
    rejected_messages: int
    lost_messages: int
    metrics: PoolMetrics
    _deaths: collections.deque[float]
    _deadlines: list[list[Any]]
    _live_deadlines: int
    _last_tick: float | None
    _by_identity: dict[bytes, Worker]
    _former: collections.deque[bytes]
    _actions: list[Action]

    if TYPE_CHECKING:
        def _eligible(self, req: Request) -> tuple[Worker, ...] | list[Worker]: ...

        def _back_off(self, w: Worker, error: VyreError, now: float, event: Event) -> None: ...

        def _fail_waiting(self, error: VyreError | None) -> None: ...

        def _forget(self, w: Worker) -> None: ...

        def _ready_spare(self, device: int | None) -> Worker | None: ...

        def _promote(self, spare: Worker, w: Worker, now: float) -> None: ...

        def _spawn(self, w: Worker) -> None: ...

        def _schedule(self, now: float) -> None: ...

        def _send(self, w: Worker, req: Request, now: float, event: Event = ...,
                  after: WorkerState = ...) -> None: ...

        def _move(self, w: Worker, event: Event, after: WorkerState) -> None: ...

        def _move_pool(self, event: Event, after: PoolState) -> None: ...

        def _move_call(self, req: Request, event: Event, after: CallState) -> None: ...

        def _lost(self, req: Request, how: str, now: float,
                  error: type[VyreError] = WorkerCrashedError) -> None: ...

        def _request_recovery(self, w: Worker, now: float) -> None: ...

        def _recovered(self, w: Worker, result: Any, now: float) -> None: ...

        def _learned(self, device: int | None) -> None: ...

        def _recycle_reason(self, w: Worker) -> str | None: ...

        def _why_waiting(self, req: Request | None = None) -> str: ...

        def _retire(self, w: Worker, kind: str, reason: str, now: float, kill: bool = False, *,
                    cause: str | None) -> None: ...

        def _pending(self) -> Iterator[Request]: ...

        def _resolve(self, req: Request, value: Any) -> None: ...

        def _watch_deadline(self, req: Request) -> None: ...

        def _log(self, level: int, text: str) -> None: ...

        def _timeout(self, req: Request, where: str) -> DispatchTimeoutError: ...

        def _failed_error(self, now: float) -> PoolFailedError: ...

        def _invalidated(self, req: Request, w: Worker) -> PipelineInvalidatedError: ...
