"""``vyre top``: a live view of every vyre driver running as this user: its pools, their
workers with generations and calls in flight, and each operation's calls per second,
errors and latency percentiles. It reads what each pool publishes in its driver's run
directory about once a second (``supervisor/published.py``), so it watches a program
without touching it. Rates and percentiles are over the time between a pool's last two
snapshots; an operation without calls in that time shows the percentiles of its whole
history, as the first frame does."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import Any

from rich import box
from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from vyre_core.cli.output import console
from vyre_core.cli.status import worker_state
from vyre_core.supervisor import published, rundir
from vyre_core.supervisor.metrics import percentile, since

WORKER_COLUMNS = ("backend", "slot", "pid", "gen", "state", "running", "served", "restarts",
                  "silent")
CALL_COLUMNS = ("backend", "op", "calls", "per s", "errors", "p50", "p90", "p99")
QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("top", help="watch running vyre drivers live: pools, workers, "
                                   "calls per second and latency percentiles")
    p.add_argument("--interval", type=_interval, default=1.0, metavar="SECONDS",
                   help="time between frames (0.1 to 60; default 1)")
    p.add_argument("--iterations", type=_iterations, default=None, metavar="N",
                   help="stop after N frames (default: until Ctrl-C)")
    p.add_argument("--json", action="store_true",
                   help="print each frame as one line of JSON instead of the live view")
    p.set_defaults(func=run)


def _interval(text: str) -> float:
    value = float(text)
    if not 0.1 <= value <= 60:  # (NaN fails too)
        raise argparse.ArgumentTypeError(f"{text} is not between 0.1 and 60 seconds")
    return value


def _iterations(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not 1 or more")
    return value


class Watch:
    """What the frames so far saw of each pool (by its driver's run directory, which two
    drivers of one process do not share, and backend): the newest snapshot and the one
    before it that differs, so rates need no clock of their own."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], tuple[dict | None, dict]] = {}

    def frame(self, drivers: list[dict[str, Any]]) -> dict[str, Any]:
        """One frame of ``published.running_drivers()`` output, as plain data."""
        seen: dict[tuple[str, str], tuple[dict | None, dict]] = {}
        frame = []
        for driver in drivers:
            pools = []
            for backend, pool in sorted(driver["pools"].items()):
                key = (driver["run_dir"], backend)
                older, newer = self._seen.get(key, (None, None))
                if newer is None or pool.get("published") != newer.get("published"):
                    older, newer = newer, pool
                seen[key] = (older, newer)
                pools.append(summary(newer, older))
            frame.append({"pid": driver["pid"], "run_dir": driver["run_dir"], "pools": pools})
        self._seen = seen
        return {"time": time.time(), "drivers": frame}


def summary(pool: dict[str, Any], older: dict[str, Any] | None) -> dict[str, Any]:
    """A pool's row data: its state and workers, and per operation the calls, their rate
    and percentiles since ``older`` (the previous snapshot), or since the pool started."""
    metrics = pool.get("metrics") or {}  # (none from a vyre without metrics)
    before = (older or {}).get("metrics") or {}
    span = pool.get("published", 0) - (older or {}).get("published", 0) if older else None
    bounds = metrics.get("latency_bounds", ())
    ops = []
    for op, histogram in sorted(metrics.get("latency", {}).items()):
        outcomes = metrics.get("calls", {}).get(op, {})
        window = since(histogram, before.get("latency", {}).get(op))
        fresh = window["count"]
        if not fresh:
            window = histogram  # (no calls lately: show what it did before)
        ops.append({"op": op, "calls": histogram["count"],
                    "per_s": fresh / span if span and span > 0 else None,
                    "errors": sum(n for outcome, n in outcomes.items() if outcome != "ok"),
                    **{name: percentile(window, q, bounds) for name, q in QUANTILES}})
    return {"backend": pool.get("backend"), "state": pool.get("state"),
            "failure": pool.get("failure"), "queued": pool.get("queued", 0),
            "published": pool.get("published"),
            "workers": [{k: w.get(k) for k in ("index", "pid", "generation", "state",
                                               "in_flight", "served", "restarts",
                                               "silent_for", "spare")}
                        for w in pool.get("workers", [])],
            "restarts": metrics.get("restarts", {}), "ops": ops}


def run(args: argparse.Namespace) -> int:
    base, watch = rundir.base_dir(), Watch()
    frames = 0

    def next_frame() -> dict[str, Any]:
        nonlocal frames
        frames += 1
        return watch.frame(published.running_drivers(base))

    def more() -> bool:
        return args.iterations is None or frames < args.iterations

    if args.json or not console.is_terminal:  # (a pipe or a file: no screen to redraw)
        while more():
            frame = next_frame()
            sys.stdout.write(json.dumps(frame) + "\n" if args.json
                             else "".join(line + "\n" for line in lines(frame, base)))
            sys.stdout.flush()  # (each frame as it comes)
            if more():
                time.sleep(args.interval)  # (the pace of the frames, not a wait on an event)
        return 0
    with Live(render(next_frame(), base), console=console, auto_refresh=False) as live:
        while more():
            time.sleep(args.interval)
            live.update(render(next_frame(), base), refresh=True)
    return 0


def _heading(frame: dict[str, Any], base: Any) -> str:
    stamp = time.strftime("%H:%M:%S", time.localtime(frame["time"]))
    if not frame["drivers"]:
        return (f"vyre top {stamp}: no running vyre driver of this user (looked in {base}); "
                "waiting for one")
    return f"vyre top {stamp}: {len(frame['drivers'])} driver(s)"


def _pool_states(driver: dict[str, Any]) -> str:
    return "; ".join(f"{p['backend']} {p['state']}"
                     + (f", {p['queued']} queued" if p["queued"] else "")
                     + "".join(f", {n} {why}" for why, n in p["restarts"].items())
                     for p in driver["pools"]) or "no pool started yet"


def _worker_cells(pool: dict[str, Any], w: dict[str, Any]) -> tuple[str, ...]:
    """A worker's row, one cell per WORKER_COLUMNS."""
    return (pool["backend"], str(w["index"]), str(w["pid"] or "-"), str(w["generation"]),
            worker_state(w), str(w["in_flight"]), str(w["served"]), str(w["restarts"]),
            "-" if w["silent_for"] is None else f"{w['silent_for']:.1f} s")


def _op_cells(pool: dict[str, Any], op: dict[str, Any]) -> tuple[str, ...]:
    """An operation's row, one cell per CALL_COLUMNS."""
    return (pool["backend"], op["op"], str(op["calls"]),
            "-" if op["per_s"] is None else f"{op['per_s']:,.1f}", str(op["errors"]),
            *(_seconds(op[name]) for name, _ in QUANTILES))


def lines(frame: dict[str, Any], base: Any) -> list[str]:
    """The frame as plain lines, for a pipe or a file: the heading, then per driver its
    pools' states, a line per worker and a line per operation, each cell named."""
    out = [_heading(frame, base)]
    for driver in frame["drivers"]:
        out.append(f"driver pid {driver['pid']}: {_pool_states(driver)}")
        for pool in driver["pools"]:
            out += [_named("worker", WORKER_COLUMNS, _worker_cells(pool, w))
                    for w in pool["workers"]]
            if pool["failure"]:
                out.append(f"  pool {pool['backend']} {pool['state']}: {pool['failure']}")
            out += [_named("calls", CALL_COLUMNS, _op_cells(pool, op)) for op in pool["ops"]]
    return out


def _named(kind: str, columns: tuple[str, ...], cells: tuple[str, ...]) -> str:
    """``  kind backend id: column cell, column cell...`` (backend and id lead the row)."""
    return f"  {kind} {cells[0]} {cells[1]}: " + ", ".join(
        f"{column} {cell}" for column, cell in zip(columns[2:], cells[2:], strict=True))


def render(frame: dict[str, Any], base: Any) -> Group:
    """The frame as tables: per driver, its workers, then its calls by operation."""
    if not frame["drivers"]:
        return Group(Text(_heading(frame, base)))
    parts: list[Any] = [Text(_heading(frame, base), style="bold")]
    for driver in frame["drivers"]:
        workers = _table(WORKER_COLUMNS, f"driver pid {driver['pid']}: {_pool_states(driver)}")
        calls = _table(CALL_COLUMNS, None)
        for pool in driver["pools"]:
            for w in pool["workers"]:
                workers.add_row(*map(Text, _worker_cells(pool, w)))
            if pool["failure"]:
                workers.add_row(Text(pool["backend"]), *[Text("")] * 3,
                                Text(f"pool {pool['state']}: {pool['failure']}",
                                     style="red"), *[Text("")] * 4)
            for op in pool["ops"]:
                calls.add_row(*map(Text, _op_cells(pool, op)))
        parts += [workers, calls]
    return Group(*parts)


def _table(columns: tuple[str, ...], title: str | None) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    for column in columns:
        table.add_column(column, no_wrap=True)
    return table


def _seconds(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    if value < 1e-3:
        return f"{value * 1e6:.0f} us"
    return f"{value * 1e3:.3g} ms" if value < 1 else f"{value:.3g} s"
