"""``vyre demo``: every bundled example through one Driver, each run on the backend routing
picks and checked twice — against the reference backend (the oracle every backend must
match) and against the numpy outputs the example worked out itself — then the
fault-tolerance walk-through (a worker killed mid-dispatch). Exit 0 when every check
holds, 1 otherwise: a quick end-to-end check of an installation."""

from __future__ import annotations

import argparse
import importlib
import time
from typing import Any

from rich.text import Text

from vyre_core.cli.output import console, ok, print_json, print_table, progress, styled
from vyre_core.cli.run import against_reference
from vyre_core.cli.targets import BUNDLED, bundled_examples, load_target
from vyre_core.driver import Driver
from vyre_core.errors import VyreError

#: The bundled module whose ``walkthrough(driver)`` the demo runs after the examples.
WALKTHROUGH = "fault_tolerance"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run every bundled example, checked against the "
                                    "reference and numpy, and the fault-tolerance walk-through")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=run)


def run_example(drv: Driver, name: str) -> dict[str, Any]:
    """One bundled example, routed and dispatched through ``drv`` and checked; a record
    whose ``ok`` says whether both checks held (a vyre error is a failed row, not an
    aborted demo)."""
    record: dict[str, Any] = {"example": name, "backend": None, "reason": None,
                              "reference": None, "numpy": None, "ms": None, "ok": False,
                              "error": None}
    try:
        example = load_target(name).example
        decision = drv.route(example.program)
        record.update(backend=decision.backend, reason=decision.reason)
        start = time.perf_counter()
        outputs = example.run(drv)
        record["ms"] = round((time.perf_counter() - start) * 1e3, 3)
        if drv.registry.reference() is not None:  # (else numpy alone checks: no DIVERGES)
            record["reference"] = against_reference(drv, example, outputs)
        if example.expected is not None:
            mismatch = example.mismatch(outputs)
            record["numpy"] = {"ok": mismatch is None, "mismatch": mismatch}
    except VyreError as exc:
        record["error"] = f"[E{exc.code}] {exc.cause.splitlines()[0]}"
        return record
    record["ok"] = all(check["ok"] for check in (record["reference"], record["numpy"]) if check)
    return record


def run_walkthrough(drv: Driver) -> list[dict[str, Any]]:
    """The bundled fault-tolerance walk-through's steps (one failed step when it is not
    installed)."""
    try:
        module = importlib.import_module(f"{BUNDLED}.{WALKTHROUGH}")
    except ImportError as exc:
        return [{"step": f"the walk-through {BUNDLED}.{WALKTHROUGH} is not installed ({exc})",
                 "ok": False}]
    return [{"step": text, "ok": flag} for text, flag in module.walkthrough(drv)]


def run(args: argparse.Namespace) -> int:
    names = bundled_examples()
    start = time.perf_counter()
    with Driver() as drv, progress("demo", len(names) + 1, not args.json) as bar:
        rows = []
        for name in names:
            rows.append(run_example(drv, name))
            bar.advance(name)
        steps = run_walkthrough(drv)
        bar.advance(WALKTHROUGH)
    passed = bool(names) and all(r["ok"] for r in rows) and all(s["ok"] for s in steps)
    if args.json:
        print_json({"ok": passed, "seconds": round(time.perf_counter() - start, 3),
                    "examples": rows, "fault_tolerance": steps})
    else:
        _print(rows, steps, passed)
    return 0 if passed else 1


def _check(check: dict[str, Any] | None) -> str | Text:
    return "-" if check is None else ok(check["ok"], "match", "DIVERGES")


def _print(rows: list[dict[str, Any]], steps: list[dict[str, Any]], passed: bool) -> None:
    if not rows:
        console.print(styled(("no bundled examples are installed", "bold red"),
                             f" (package {BUNDLED!r}); reinstall vyre"))
    else:
        print_table(["example", "backend", "reference", "numpy", "ms"],
                    [[r["example"], r["backend"] or "-", _check(r["reference"]),
                      _check(r["numpy"]), "-" if r["ms"] is None else f"{r['ms']:.1f}"]
                     for r in rows],
                    title="examples, each routed to the best backend in its own worker")
        if not any(r["reference"] for r in rows):
            console.print("  no reference backend is loaded: numpy alone checked the outputs")
        for backend, reason in dict.fromkeys((r["backend"], r["reason"]) for r in rows
                                             if r["backend"]):
            console.print(styled("  routed to ", (backend, "bold"), f": {reason}"))
    for r in rows:
        details = [r["error"], (r["reference"] or {}).get("divergence"),
                   (r["numpy"] or {}).get("mismatch")]
        for label, detail in zip(("error", "against the reference", "against numpy"), details,
                                 strict=True):
            if detail:
                console.print(styled("  ", (r["example"], "bold"), f" {label}: {detail}"))
    print_table(["step", "ok"], [[s["step"], ok(s["ok"])] for s in steps],
                title="fault tolerance: SIGKILL mid-dispatch")
    console.print(ok(passed, "every check passed", "some checks FAILED"))
