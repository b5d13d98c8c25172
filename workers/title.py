"""Process titles: `ps` shows what each vyre process is and whose. A fork server's
workers would otherwise all carry their server's command line, and no line names the
driver they belong to."""

from __future__ import annotations

import setproctitle


def name_worker(backend: str, generation: int, device: int | None, driver_pid: int) -> None:
    on = "" if device is None else f" device {device}"
    setproctitle.setproctitle(
        f"vyre-worker {backend}{on} generation {generation} (driver {driver_pid})")


def name_fork_server(backend: str, driver_pid: int) -> None:
    setproctitle.setproctitle(f"vyre-fork-server {backend} (driver {driver_pid})")
