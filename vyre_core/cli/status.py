"""``vyre status``: the pools and workers of every vyre driver running as this user, from
the snapshots each pool publishes in its driver's run directory about once a second
(``supervisor/published.py``): generations, states, spares, restarts, calls in flight."""

from __future__ import annotations

import argparse
import time
from typing import Any

from vyre_core.cli.output import console, print_json, print_output_tail, print_table
from vyre_core.supervisor import published, rundir

COLUMNS = ("backend", "slot", "device", "pid", "gen", "state", "served", "restarts",
           "in flight")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="show the pools and workers of running vyre drivers")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    base = rundir.base_dir()
    drivers = published.running_drivers(base)
    if args.json:
        print_json({"base": str(base), "drivers": drivers})
        return 0
    if not drivers:
        console.print(f"no running vyre driver of this user (looked in {base})")
        return 0
    for driver in drivers:
        pools = driver["pools"]
        title = f"driver pid {driver['pid']}: {len(pools)} pool(s) published"
        if pools:
            age = time.time() - max(p.get("published", 0) for p in pools.values())
            title += f", as of {age:.1f} s ago"
        else:
            title += (" (none started yet, or none can write its snapshot: that pool's "
                      "log says so)")
        print_table(COLUMNS, rows(pools), title=title)
        for backend, pool in sorted(pools.items()):
            print_output_tail(pool.get("failure_output"),
                              f"pool {backend!r} failed; its last worker's output", console)
    return 0


def worker_state(worker: dict[str, Any]) -> str:
    """A worker row's state; a spare's slot serving as a regular worker says so."""
    state = str(worker.get("state"))
    return state + " (spare slot)" if worker.get("spare") and state != "spare" else state


def rows(pools: dict[str, Any]) -> list[list[str]]:
    """One row per worker slot; a pool that failed or waits also says why."""
    found = []
    for backend, pool in sorted(pools.items()):
        for w in pool.get("workers", []):
            found.append([str(cell) for cell in (
                backend, w.get("index"), "-" if w.get("device") is None else w["device"],
                w.get("pid") or "-", w.get("generation"), worker_state(w),
                w.get("served"), w.get("restarts"), w.get("in_flight"))])
        if pool.get("state") != "running":
            why = f": {pool['failure']}" if pool.get("failure") else ""
            found.append([backend, "-", "-", "-", "-", f"pool {pool.get('state')}{why}", "",
                          "", ""])
    return found
