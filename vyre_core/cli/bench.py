"""``vyre bench``: run the suites of ``vyre_benchmarks`` and show each figure next to a
baseline measured in the same run, with their ratio — on shared, noisy machines only
the ratio says something. ``--json`` keeps every result with the machine's facts."""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import platform
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from rich.table import Column

from vyre_benchmarks import SUITES, harness
from vyre_core import __version__
from vyre_core.cli.output import (
    console,
    err_console,
    print_json,
    print_table,
    progress,
    styled,
)
from vyre_core.errors import InvalidInputError
from vyre_core.registry import Registry

QUICK_NOTE = "--quick: few repeats, so every figure is rough; run without it to quote one"

Benchmark = tuple[str, Callable[[], harness.Result]]  # (id "suite.function", function)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="run the benchmarks, each next to a same-run baseline")
    p.add_argument("--json", metavar="FILE", dest="json_file",
                   help="write every result and the machine facts as JSON to FILE "
                        "('-': stdout, instead of the table)")
    p.add_argument("--quick", action="store_true",
                   help="few repeats: every figure rough, all of them in minutes (about 5 on "
                        "two cores shared with other work; for tests)")
    p.add_argument("--only", metavar="SUBSTRING", action="append",
                   help="run only the benchmarks whose id (suite.function, e.g. "
                        "workers.recovery_after_kill) contains SUBSTRING (repeat it: any of "
                        "them)")
    p.set_defaults(func=run)


def select(only: list[str] | None, registry: Registry
           ) -> tuple[list[Benchmark], list[dict[str, Any]]]:
    """The benchmarks to run (those whose id contains any of ``only``; None: all), in suite
    order, and the suites skipped (with why) because a backend they need is not
    registered."""
    wanted = None if only is None else [part.lower() for part in only]
    chosen: list[Benchmark] = []
    skipped: list[dict[str, Any]] = []
    for name in SUITES:
        suite = importlib.import_module(f"vyre_benchmarks.bench_{name}")
        ids = [(f"{name}.{fn.__name__}", fn) for fn in suite.BENCHMARKS]
        ids = [(i, fn) for i, fn in ids
               if wanted is None or any(part in i.lower() for part in wanted)]
        if not ids:
            continue
        reason = _missing_backends(suite.REQUIRES, registry) \
            or getattr(suite, "unavailable", lambda: None)()
        if reason:
            skipped.append({"suite": name, "benchmarks": [i for i, _ in ids], "reason": reason})
        else:
            chosen += ids
    return chosen, skipped


def _missing_backends(required: tuple[str, ...], registry: Registry) -> str | None:
    for backend in required:
        if backend in registry.ids():
            continue
        why = f"the {backend!r} backend is not registered"
        broken = [p.error for p in registry.broken if p.name == backend]
        if broken:
            why += f": its plugin failed to load ({broken[0]})"
        elif any(p.name == backend for p in registry.disabled):
            why += " (left out by VYRE_LOAD_PLUGINS)"
        else:
            why += " (its distribution is not installed)"
        return why + "; `vyre doctor` says more"
    return None


def machine_facts() -> dict[str, Any]:
    """What the figures depend on besides the code: the CPU, memory, Python."""
    return {"platform": platform.platform(), "cpu": _cpu_model(),
            "cpu_count": os.cpu_count(), "cpus_usable": len(os.sched_getaffinity(0)),
            "memory_bytes": psutil.virtual_memory().total,
            "python": f"{platform.python_implementation()} {platform.python_version()}"}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _record(bench_id: str, result: harness.Result, seconds: float) -> dict[str, Any]:
    """A result as JSON; ``seconds``: what running its benchmark took, set-up and checks
    included (which benchmarks make a run long)."""
    data = {"id": bench_id, **result.to_dict(), "seconds": round(seconds, 2)}
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v
            for k, v in data.items()}


def run(args: argparse.Namespace) -> int:
    args.json = args.json_file == "-"  # errors go to stdout as JSON only then
    target = None if args.json_file in (None, "-") else Path(args.json_file)
    if target is not None and not target.parent.is_dir():
        raise InvalidInputError(f"cannot write {str(target)!r}: no folder {str(target.parent)!r}",
                                "Name a file in an existing folder, or '-' for stdout.")
    chosen, skipped = select(args.only, Registry.discover())
    if not chosen and skipped:
        raise InvalidInputError(
            "nothing to run: " + "; ".join(f"the {s['suite']} suite is skipped ({s['reason']})"
                                           for s in skipped),
            "Install (or stop leaving out) the backend the suite needs, or choose other "
            "benchmarks with --only.")
    if not chosen:
        raise InvalidInputError(
            f"no benchmark id contains {' or '.join(map(repr, args.only))}",
            "Pass part of a suite.function id: " + ", ".join(
                f"{s}.*" for s in SUITES) + " (see benchmarks/ for the functions).")
    for skip in skipped:
        err_console.print(styled(("skipped", "yellow"),
                                 f" {skip['suite']} suite: {skip['reason']}"))
    harness.set_quick(args.quick)
    started, clock = datetime.now(UTC), time.perf_counter()
    results, failed = [], []
    upcoming = [*(i for i, _ in chosen[1:]), "done"][:len(chosen)]  # the bar's next label
    with progress("benchmarks", len(chosen), live=False) as bar:  # (no display thread)
        for (bench_id, fn), after in zip(chosen, upcoming, strict=True):
            try:
                began = time.perf_counter()
                results.append(_record(bench_id, fn(), time.perf_counter() - began))
            except harness.Unavailable as exc:  # (it cannot run here: its row says why)
                skipped.append({"suite": bench_id.partition(".")[0], "benchmarks": [bench_id],
                                "reason": str(exc)})
                err_console.print(styled(("skipped", "yellow"), f" {bench_id}: {exc}"))
            except Exception as exc:  # one broken figure must not lose the others
                failed.append({"id": bench_id, "error": f"{type(exc).__name__}: {exc}"})
                err_console.print(styled(("failed", "bold red"),
                                         f" {bench_id}: {type(exc).__name__}: {exc}"))
            bar.advance(after)
    facts = machine_facts()
    for name in SUITES:
        suite = importlib.import_module(f"vyre_benchmarks.bench_{name}")
        facts.update(getattr(suite, "facts", dict)())
    doc = {"vyre": __version__, "quick": args.quick, "note": QUICK_NOTE if args.quick else None,
           "started": started.isoformat(timespec="seconds"),
           "seconds": round(time.perf_counter() - clock, 1), "machine": facts,
           "results": results, "skipped": skipped, "failed": failed}
    if args.json:
        print_json(doc)
    else:
        _print(doc)
    if target is not None:
        try:
            target.write_text(json.dumps(doc, indent=2, default=str) + "\n")
        except OSError as exc:
            raise InvalidInputError(f"cannot write {str(target)!r}: {exc.strerror}",
                                    "Name a writable file, or '-' for stdout.") from None
        err_console.print(f"wrote {target}")
    return 1 if failed else 0


def _figure(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    digits = 0 if abs(value) >= 100 else 2 if abs(value) >= 1 else 3
    return f"{value:,.{digits}f} {unit}".rstrip()


def _skipped_ids(skip: dict[str, Any]) -> str:
    """A skip's row: the benchmark's id, or a whole suite's as ``suite.*`` and how many."""
    ids = skip["benchmarks"]
    return ids[0] if len(ids) == 1 else f"{skip['suite']}.* ({len(ids)} benchmarks)"


def _print(doc: dict[str, Any]) -> None:
    machine = doc["machine"]
    adapter = machine.get("wgpu_adapter")
    title = (f"vyre bench: {machine['cpu']}, {machine['cpus_usable']} usable CPUs, "
             f"{machine['python']}"
             + (f"; wgpu on {adapter['device']}" if adapter else ""))
    rows = [[styled(f"{r['name']}\n", (r["id"], "dim")), _figure(r["value"], r["unit"]),
             r["baseline"], _figure(r["baseline_value"], r["unit"]),
             "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"]
            for r in doc["results"]]
    rows += [[styled((_skipped_ids(skip), "dim")), styled(("skipped", "yellow")),
              skip["reason"], "-", "-"] for skip in doc["skipped"]]
    # (an id is what --only takes, and a baseline says what was compared: neither is cut
    # short with an ellipsis; on a narrow screen they fold onto the next line instead)
    print_table([Column("benchmark", overflow="fold"), "value",
                 Column("baseline", overflow="fold"), "baseline value", "ratio"], rows,
                title=title)
    skips = sum(len(skip["benchmarks"]) for skip in doc["skipped"])
    console.print(f"{len(doc['results'])} figures in {doc['seconds']:.0f} s; ratio = value / "
                  "baseline (for rates, above 1 is faster; for times, below 1 is faster)"
                  + (f"; {skips} skipped" if skips else ""))
    if doc["quick"]:
        console.print(QUICK_NOTE, style="yellow")
