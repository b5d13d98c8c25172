"""``LocalPlace``: workers as processes on this machine. It holds what a driver's local
pools share (the zmq context, made with the first socket; the secret each worker proves in
its hello) and the short-lived processes that list devices and probe apart, which closing
the driver ends."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable

import zmq

from vyre_core.contract.types import Capabilities, DeviceInfo
from vyre_core.registry import BackendRegistration
from vyre_core.supervisor import process
from vyre_core.supervisor.local.pool import Pool
from vyre_core.supervisor.options import PoolOptions
from vyre_core.supervisor.rundir import RunDir
from vyre_core.supervisor.shell import Spans


class LocalPlace:
    """A ``supervisor.shell.Place`` for worker processes here."""

    keeps_probes = True

    def __init__(self) -> None:
        self._secret = secrets.token_bytes(32)  # workers prove it in their hello
        self._lock = threading.Lock()
        self._zmq: zmq.Context | None = None
        self._askers = process.Askers()

    def make_pool(self, registration: BackendRegistration, options: PoolOptions,
                  on_change: Callable[[], None], name: str, devices: tuple[int, ...] | None,
                  rundir: RunDir, spans: Spans | None) -> Pool:
        return Pool(registration, rundir, name, options, on_change, self._secret,
                    self._context, devices, spans=spans)

    def list_devices(self, backend: str, entry_point: str,
                     timeout: float) -> list[DeviceInfo]:
        return process.list_devices(backend, entry_point, timeout, self._askers)

    def probe_apart(self, backend: str, entry_point: str, timeout: float) -> Capabilities:
        return process.probe_apart(backend, entry_point, timeout, self._askers)

    def check_usable(self) -> None:
        """(Processes can always be started here; a failure to is the pool's to report.)"""

    def stop_asking(self) -> None:
        self._askers.stop_all()

    def close(self, pools_running: bool) -> None:
        """End the zmq context, unless a pool's thread still runs (term would wait)."""
        if self._zmq is not None and not pools_running:
            self._zmq.term()

    def _context(self) -> zmq.Context:
        """The driver's one zmq context (its I/O thread starts with the first socket)."""
        with self._lock:
            if self._zmq is None:
                self._zmq = zmq.Context()
            return self._zmq
