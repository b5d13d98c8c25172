"""``vyre route TARGET``: every backend in routing order, chosen or capable or rejected
with its exact reasons — what ``dispatch`` would decide, after probing the winner."""

from __future__ import annotations

import argparse
from dataclasses import asdict

from vyre_core.cli.output import console, print_json, styled
from vyre_core.cli.run import add_target_argument
from vyre_core.cli.targets import load_target
from vyre_core.driver import Driver
from vyre_core.sequence import Sequence as StepSequence


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("route", help="explain which backend a program routes to, and why")
    add_target_argument(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    target = load_target(args.target, with_inputs=False, dim=args.dim)
    program = target.example.program
    with Driver() as drv:
        explanation = drv.explain(program, config=target.example.config)
    if args.json:
        print_json({"target": target.name, "program": program.fingerprint()[:16],
                    "requirements": _requirements(program),
                    "backends": [asdict(e) for e in explanation]})
    else:
        console.print(styled((target.name, "bold"), f"  program {program.fingerprint()[:16]}"))
        console.print(str(explanation))
    return 0


def _requirements(work) -> dict | list[dict]:
    """A program's requirements; a sequence's, per distinct program with its steps."""
    if isinstance(work, StepSequence):
        return [{"steps": steps, **_requirements(program)} for program, steps in
                work.programs()]
    req = work.requirements()
    return {k: sorted(str(getattr(x, "value", x)) for x in v)
            if isinstance(v, frozenset | set) else v for k, v in asdict(req).items()}
