"""A driver's worker processes as a fault-injection test handles them: find one, wait
until it is idle or really running a request, kill it, freeze and resume it, make its
device lost, and wait for its replacement. Everything waits on what the driver reports
(``Driver.status()``) or on the process itself, with a deadline; nothing sleeps blindly."""

from __future__ import annotations

import contextlib
import signal
from typing import Any

import psutil

from vyre_core import ir
from vyre_core.driver import Driver
from vyre_core.errors import DeviceLostError
from vyre_core.testing.faults import fault
from vyre_core.testing.waiting import PATIENCE, wait_for

Row = dict[str, Any]  # one worker slot of Driver.status()


def one_word_program() -> ir.Program:
    """The smallest program: one invocation writes 1 into a one-word output."""
    k = ir.Kernel(workgroup=(1,))
    out = k.output("out", ir.u32, count=1)
    out[0] = 1
    return k.build()


class Workers:
    """The workers of ``driver``'s pool for ``backend`` (each method may name another)."""

    def __init__(self, driver: Driver, backend: str = "faults") -> None:
        self.driver = driver
        self.backend = backend
        self._frozen: dict[int, psutil.Process] = {}

    def pool(self, backend: str | None = None) -> dict[str, Any]:
        """The pool's entry of ``Driver.status()`` (its state, restarts, failure...)."""
        name = backend or self.backend
        pools = self.driver.status()["pools"]
        if name not in pools:
            raise AssertionError(f"no backend {name!r} is registered (registered: "
                                 f"{', '.join(pools) or 'none'}); the fault backends come "
                                 "with the vyre-faults distribution")
        return pools[name]

    def row(self, index: int = 0, backend: str | None = None) -> Row:
        """Worker slot ``index``: pid, generation, state, restarts, running..."""
        pool = self.pool(backend)
        if index >= len(pool["workers"]):
            raise AssertionError(f"pool {pool['backend']!r} has no worker {index} (it is "
                                 f"{pool['state']}): dispatch to it, or probe it "
                                 f"(driver.probe({pool['backend']!r})), first")
        return pool["workers"][index]

    def wait_idle(self, index: int = 0, backend: str | None = None,
                  timeout: float = PATIENCE) -> Row:
        """Slot ``index`` once its process is up and idle."""
        return wait_for(lambda: (w := self.row(index, backend))["state"] == "idle" and w,
                        timeout, f"worker {index} of {backend or self.backend!r} to be idle")

    def wait_running(self, index: int = 0, backend: str | None = None,
                     timeout: float = PATIENCE) -> Row:
        """Slot ``index`` once its main thread holds a request (its progress page says
        so): a fault injected now cuts off a request that really runs."""
        return wait_for(lambda: (w := self.row(index, backend))["running"] and w, timeout,
                        f"worker {index} of {backend or self.backend!r} to run a request")

    def wait_replaced(self, before: Row, backend: str | None = None,
                      timeout: float = PATIENCE) -> Row:
        """The slot of ``before`` once a later generation of it is idle."""
        return wait_for(lambda: (w := self.row(before["index"], backend))["generation"]
                        > before["generation"] and w["state"] == "idle" and w, timeout,
                        f"worker {before['index']} to be replaced")

    def _process(self, index: int, backend: str | None,
                 timeout: float) -> tuple[Row, psutil.Process]:
        """Slot ``index`` once the driver reports a live process for it (not one that
        already died and is not yet reaped), and that process."""
        def live() -> tuple[Row, psutil.Process] | None:
            row = self.row(index, backend)
            if not row["pid"]:
                return None
            try:
                proc = psutil.Process(row["pid"])
            except psutil.NoSuchProcess:
                return None
            return (row, proc) if _alive(proc) else None

        return wait_for(live, timeout, f"worker {index} of {backend or self.backend!r} to "
                                       "have a live process")

    def kill(self, index: int = 0, backend: str | None = None,
             sig: int = signal.SIGKILL, timeout: float = PATIENCE) -> Row:
        """Send ``sig`` to slot ``index``'s live process; for a signal that ends it, wait
        until it is gone and the driver has seen it go. Returns the slot as it was."""
        row, proc = self._process(index, backend, timeout)
        proc.send_signal(sig)  # (psutil: never a reused pid)
        if sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSEGV, signal.SIGABRT):
            wait_for(lambda: not _alive(proc) and self.row(index, backend)["pid"]
                     != row["pid"], timeout, f"pid {row['pid']} to end and be noticed")
        return row

    def freeze(self, index: int = 0, backend: str | None = None,
               timeout: float = PATIENCE) -> Row:
        """SIGSTOP slot ``index``'s live process and wait until the kernel has stopped it:
        alive, yet it neither beats nor answers. ``resume`` it, or let the supervisor act."""
        row, proc = self._process(index, backend, timeout)
        proc.send_signal(signal.SIGSTOP)
        wait_for(lambda: not _alive(proc) or proc.status() == psutil.STATUS_STOPPED, timeout,
                 f"pid {row['pid']} to stop")
        self._frozen[row["pid"]] = proc
        return row

    def resume(self, row: Row) -> None:
        """SIGCONT the process ``freeze`` returned ``row`` for, if it still exists."""
        proc = self._frozen.pop(row["pid"], None)
        if proc is not None and _alive(proc):
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.send_signal(signal.SIGCONT)

    def lose_device(self, backend: str | None = None, kind: str = "device_lost",
                    timeout: float = 30.0) -> DeviceLostError:
        """Make the device of the backend's worker lost with a dispatch asking for fault
        ``kind`` (on ``faults-wgpu``: ``destroy_device``) and return the DeviceLostError
        its caller got."""
        name = backend or self.backend
        try:
            self.driver.dispatch(one_word_program(), [], backend=name,
                                 config=fault(kind, timeout=timeout))
        except DeviceLostError as exc:
            return exc
        raise AssertionError(f"backend {name!r} ran a dispatch labelled with a device loss: "
                             "it does not obey fault labels (install vyre-faults and name "
                             "its backend 'faults')")


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
