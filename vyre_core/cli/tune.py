"""``vyre tune TARGET``: try workgroup sizes and specialization values on one backend, in
its worker, and keep the fastest that gives the program's own bytes (Driver.tune).
A progress bar while it measures; then a table of every candidate, the choice and where
it was saved. Dispatches with ``DispatchConfig(tuned=True)`` use it from then on."""

from __future__ import annotations

import argparse
import ast
from typing import Any

from vyre_core.cli.output import console, print_json, print_table, progress, styled
from vyre_core.cli.run import add_target_argument
from vyre_core.cli.targets import load_target
from vyre_core.driver import Driver
from vyre_core.errors import InvalidInputError
from vyre_core.sequence import Sequence as StepSequence
from vyre_core.tuning.candidates import DEFAULT_LIMIT, candidates
from vyre_core.tuning.tuner import DEFAULT_REPEATS, Measured


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="find the fastest workgroup size and constants for a "
                                    "program, and keep them")
    add_target_argument(p)
    p.add_argument("--inputs", metavar="FILE.npz",
                   help="inputs of a saved program (default: TARGET with .npz)")
    p.add_argument("--backend", metavar="ID", help="tune on this backend instead of routing")
    p.add_argument("--workgroup", metavar="X[,Y[,Z]]", action="append", default=None,
                   help="a workgroup size to try (repeat the option for more); default: "
                        "the program's own and 32, 64, 128, 256 for a 1-D program")
    p.add_argument("--constant", metavar="NAME=V1,V2", action="append", default=[],
                   help="values of a specialization constant to try (repeat for more); "
                        "default: powers of two within its declared range")
    p.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, metavar="N",
                   help=f"timed runs per candidate, the best kept (default {DEFAULT_REPEATS})")
    p.add_argument("--limit", type=int, default=DEFAULT_LIMIT, metavar="N",
                   help=f"refuse more candidates than this (default {DEFAULT_LIMIT})")
    p.add_argument("--refresh", action="store_true",
                   help="measure again even when the cache holds a choice")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    target = load_target(args.target, args.inputs, dim=args.dim)
    example = target.example
    if isinstance(example.program, StepSequence):
        raise InvalidInputError(f"{target.name!r} is a sequence; vyre tune tunes one program",
                                "Tune each step's program on its own.")
    workgroups = None if args.workgroup is None else [_axes(w) for w in args.workgroup]
    constants = dict(_values(c) for c in args.constant)
    with Driver() as drv:
        backend = args.backend or drv.route(example.program, config=example.config).backend
        total = len(candidates(example.program, drv.probe(backend), example.config,
                               workgroups, constants or None, args.limit))
        with progress(f"tuning on {backend}", total, not args.json) as bar:
            def measured(row: Measured) -> None:
                bar.advance(row.candidate.describe())

            result = drv.tune(example.program, example.inputs, backend=backend,
                              config=example.config,
                              workgroups=workgroups, constants=constants or None,
                              repeats=args.repeats, limit=args.limit, refresh=args.refresh,
                              on_measured=measured)
    record = {"target": target.name, "program": example.program.fingerprint()[:16],
              "backend": backend, **result.to_dict()}
    if args.json:
        print_json(record)
    else:
        _print(record)
    return 0


def _axes(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(a) for a in text.split(","))
    except ValueError:
        raise InvalidInputError(f"--workgroup {text!r} is not 1 to 3 integers",
                                "Write a size as e.g. 64 or 8,8.") from None


def _values(text: str) -> tuple[str, list[Any]]:
    name, sep, values = text.partition("=")
    try:
        parsed = [ast.literal_eval(v.strip()) for v in values.split(",")] if sep else []
    except (ValueError, SyntaxError):
        parsed = []
    if not name or not parsed:
        raise InvalidInputError(f"--constant {text!r} is not NAME=VALUE[,VALUE...]",
                                "Write e.g. --constant TILE=8,16,32 (numbers, or True/False).")
    return name.strip(), parsed


def _print(record: dict[str, Any]) -> None:
    console.print(styled((record["target"], "bold"), f"  program {record['program']} on ",
                         (record["backend"], "bold")))
    rows = record["candidates"]
    if rows:
        baseline = rows[0]["seconds"]
        print_table(["workgroup", "constants", "best time", "vs own", "verdict"],
                    [[_size(r["workgroup"]), _constants(r["constants"]),
                      "-" if r["seconds"] is None else f"{r['seconds'] * 1e6:,.1f} us",
                      "-" if r["seconds"] is None else f"{baseline / r['seconds']:.2f}x",
                      styled((r["verdict"], "bold green")) if r["verdict"] == "best"
                      else r["verdict"] + (f": {r['reason']}" if r["reason"] else "")]
                     for r in rows], title="candidates (own configuration first)")
    best = record["best"]
    chosen = f"workgroup {_size(best['workgroup'])}" + (
        f", {_constants(best['constants'])}" if best["constants"] else "")
    console.print(styled("  chosen: ", (chosen, "bold"),
                         f", {record['speedup']:.2f}x its own configuration"
                         + (" (from the cache; --refresh measures again)"
                            if record["cached"] else "")))
    console.print(f"  kept in {record['path']}; DispatchConfig(tuned=True) uses it")


def _size(axes: list[int]) -> str:
    while len(axes) > 1 and axes[-1] == 1:
        axes = axes[:-1]
    return "x".join(map(str, axes))


def _constants(values: dict[str, Any]) -> str:
    return " ".join(f"{k}={v!r}" for k, v in values.items()) or "-"
