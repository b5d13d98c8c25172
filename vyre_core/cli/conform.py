"""``vyre conform``: the conformance corpus (its programs and its sequences) and the
capability-honesty probes on every installed backend (or one), each through its own
worker, judged by ``vyre_core.conformance.runner`` exactly as the pytest kit judges
them."""

from __future__ import annotations

import argparse
import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from vyre_core.cli import all_inputs
from vyre_core.cli.output import console, ok, print_json, print_table, progress, styled
from vyre_core.conformance import honesty, sweep
from vyre_core.driver import Driver
from vyre_core.errors import InvalidConfigError, VyreError

if TYPE_CHECKING:
    from vyre_core.conformance.runner import CaseResult

VERDICTS = ("pass", "refused", "unclaimed", "fail", "error")
CELL = {"pass": styled(("pass", "green")), "refused": styled(("refused", "yellow")),
        "unclaimed": styled(("n/a", "dim")), "fail": styled(("FAIL", "bold red")),
        "error": styled(("ERROR", "bold red"))}


#: Cases run at once, each backend's pool with as many workers: what a cold kernel cache
#: costs (the cpu backend compiles every case) is spread over the cores. Four at most: a
#: pool's workers each hold a device.
PARALLEL = max(1, min(4, len(os.sched_getaffinity(0))))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("conform", help="run the conformance corpus on the installed backends")
    p.add_argument("--backend", metavar="ID", help="only this backend")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--exhaustive", action="store_true",
                   help="the slow tier instead: every unary f32 op over --inputs values "
                        "spread over all bit patterns, the largest ULP distance per op")
    p.add_argument("--inputs", type=_count, default=sweep.DEFAULT_INPUTS, metavar="N",
                   help=f"inputs per op of --exhaustive (default {sweep.DEFAULT_INPUTS})")
    all_inputs.add_arguments(p)
    p.set_defaults(func=run)


def _count(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 1 << 32:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and 2^32")
    return value


def run(args: argparse.Namespace) -> int:
    if args.all_inputs and not args.exhaustive:
        raise InvalidConfigError("a mode of --exhaustive, --all-inputs, was given alone",
                                 "Write vyre conform --exhaustive --all-inputs.")
    if args.exhaustive:
        return all_inputs.run(args) if args.all_inputs else _exhaustive(args)
    # (the corpus is built when imported, half a second: only this command pays for it)
    from vyre_core.conformance.corpus import CASES, SEQUENCE_CASES

    with Driver(workers=PARALLEL) as drv, ThreadPoolExecutor(PARALLEL) as threads:
        backends = [drv.registry.get(args.backend).id] if args.backend else drv.registry.ids()
        results: list[CaseResult] = []
        started: dict[str, str | None] = {}
        per_backend = len(CASES) + len(SEQUENCE_CASES) + len(honesty.PROBES)
        with progress("conformance", len(backends) * per_backend, not args.json) as bar:
            for backend in backends:
                results += _conform(drv, backend, started, bar, threads)
    summary = {b: {"started": started[b] is None, "start_error": started[b],
                   "counts": dict(Counter(r.verdict for r in results if r.backend == b)),
                   "ok": started[b] is None and all(r.ok for r in results if r.backend == b)}
               for b in backends}
    if args.json:
        print_json({"backends": summary, "results": [r.to_dict() for r in results]})
    else:
        _print(backends, results, summary)
    return 0 if all(s["ok"] for s in summary.values()) else 1


def _conform(drv: Driver, backend: str, started: dict[str, str | None],
             bar: Any, threads: ThreadPoolExecutor) -> list[CaseResult]:
    """Every case on ``backend``, PARALLEL at a time (each case is independent), in
    corpus order."""
    from vyre_core.conformance.corpus import CASES, SEQUENCE_CASES
    from vyre_core.conformance.runner import run_any

    try:
        caps = drv.probe(backend)
    except VyreError as exc:
        started[backend] = exc.cause.splitlines()[0]
        return []
    started[backend] = None
    results = []
    for result in threads.map(lambda case: run_any(drv, backend, caps, case),
                              [*CASES, *SEQUENCE_CASES, *honesty.probes(caps)]):
        results.append(result)
        bar.advance(f"{backend} {result.case}")
    return results


def _exhaustive(args: argparse.Namespace) -> int:
    with Driver() as drv:
        backends = [drv.registry.get(args.backend).id] if args.backend else drv.registry.ids()
        results: list[sweep.SweepResult] = []
        with progress("exhaustive sweep", len(backends) * len(sweep.OPS), not args.json) as bar:
            for backend in backends:
                results += sweep.run_on(drv, backend, args.inputs, bar.advance)
    if args.json:
        print_json({"results": [{**asdict(r), "ok": r.ok} for r in results]})
    else:
        print_table(["backend", "op", "inputs", "max ULP", "budget", "worst input",
                     "correctly rounded", "got"],
                    [[r.backend, r.op, r.inputs, r.max_ulp, r.budget,
                      ", ".join(map(repr, r.worst_input)), repr(r.expected), repr(r.actual)]
                     for r in results],
                    title="f32 ops against the correctly rounded result")
    return 0 if all(r.ok for r in results) else 1


def _print(backends: list[str], results: list[CaseResult], summary: dict[str, Any]) -> None:
    by_case: dict[str, dict[str, CaseResult]] = {}
    for r in results:
        by_case.setdefault(r.case, {})[r.backend] = r
    print_table(["case", *backends],
                [[case, *(CELL[row[b].verdict] if b in row else "-" for b in backends)]
                 for case, row in by_case.items()],
                title="conformance matrix (n/a: not claimed, and refused as it must be)")
    print_table(["backend", *VERDICTS, "result"],
                [[b, *(s["counts"].get(v, 0) for v in VERDICTS),
                  ok(True) if s["ok"] else
                  styled(("FAILED", "bold red"),
                         f": {s['start_error']}" if s["start_error"] else "")]
                 for b, s in summary.items()])
    for r in results:
        if r.verdict != "pass":
            style = "red" if not r.ok else "dim"
            console.print(f"{r.backend} {r.verdict} {r.case}: {r.detail}", style=style)
