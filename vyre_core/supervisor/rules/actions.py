"""What the rules ask the shell to do. The rules never act themselves (no socket, signal
or future here): they append these records, and the shell, local or Ray, carries them out
on its I/O thread, which is how one set of rules drives both."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Any

from vyre_core.supervisor.rules.requests import Request

# -- actions: what the I/O shell must do -------------------------------------------------

@dataclass(frozen=True)
class Spawn:
    """Start a worker process for ``index`` as ``generation``; answer with ``spawned`` or
    ``spawn_failed``."""

    index: int
    generation: int


@dataclass(frozen=True)
class Send:
    """Send ``request`` to the worker at ``index`` (its ``identity``, ``generation``);
    answer ``send_failed`` when the transport refuses. ``holds_program``: the worker held
    the request's program before this send (it may be named by fingerprint alone);
    ``with_program``: the send must carry the program whatever the shell guessed (a worker
    refused it named alone); ``socket_only``: its arrays must ride the socket (a worker
    could not open its shared memory)."""

    index: int
    generation: int
    identity: bytes
    request: Request
    holds_program: bool = False
    with_program: bool = False
    socket_only: bool = False


@dataclass(frozen=True)
class Stop:
    """Ask the worker at ``index`` to stop request ``request_id`` at its next safe point
    (written into its progress page); it answers the request early, or is killed after
    ``Timeouts.cancel_grace``."""

    index: int
    request_id: int


@dataclass(frozen=True)
class Signal:
    """SIGTERM (``kill`` False) or SIGKILL the worker process at ``index``."""

    index: int
    kill: bool


@dataclass(frozen=True)
class Resolve:
    """Complete ``request``'s future with ``value`` (a reply, or a VyreError). ``running``:
    its worker still runs it and may write its memory, so that memory waits for a
    ``Release``; else it may be reused now."""

    request: Request
    value: Any
    running: bool = False


@dataclass(frozen=True)
class Promote:
    """The spare worker process in slot ``spare`` now serves slot ``index`` (a new
    generation there): move what the shell keeps per process from one slot to the other."""

    spare: int
    index: int


@dataclass(frozen=True)
class Release:
    """No worker can touch ``request``'s shared memory any more: it may be reused. (A
    worker that was running the request when it was answered otherwise, past its
    deadline say, may still write there until it exits.)"""

    request: Request


@dataclass(frozen=True)
class RoutingChanged:
    """Capabilities or availability changed: routing decisions must be recomputed."""


@dataclass(frozen=True)
class Log:
    level: int
    text: str


Action = Spawn | Send | Stop | Signal | Resolve | Release | Promote | RoutingChanged | Log


def describe_exit(code: int | None) -> str:
    if code is None:
        return "exited (status unknown)"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"
