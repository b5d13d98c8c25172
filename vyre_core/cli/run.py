"""``vyre run TARGET``: one program (or sequence) through the Driver — which backend ran it and why,
a summary of every output, the time it took, and (``--shadow``) the reference's verdict."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import blake3
import numpy as np

from vyre_core.cli.kernel_target import split_spec
from vyre_core.cli.output import console, ok, print_json, print_table, styled
from vyre_core.cli.targets import load_target, save_target
from vyre_core.compare import buffers_divergence
from vyre_core.driver import Driver
from vyre_core.errors import PluginLoadError
from vyre_core.example import Example
from vyre_core.registry import SELECT_ENV
from vyre_core.sequence import Sequence as StepSequence

HEAD = 6  # output values shown per buffer


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run an example module or a saved program")
    add_target_argument(p)
    p.add_argument("--inputs", metavar="FILE.npz",
                   help="inputs of a saved program (default: TARGET with .npz), or a "
                        "kernel's arguments by parameter name")
    p.add_argument("--backend", metavar="ID", help="run on this backend instead of routing")
    p.add_argument("--shadow", action="store_true",
                   help="also run it on the reference backend and compare every output")
    p.add_argument("--save", metavar="FILE.vyir", type=Path,
                   help="also write the program's wire bytes here and its inputs next to it")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def add_target_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", metavar="TARGET",
                   help="example module (.py) or bundled example name, a kernel "
                        "(file.py:kernel_name, with --dim), or saved program (.vyir)")
    p.add_argument("--dim", metavar="N[,N[,N]]",
                   help="a kernel target's invocations per axis (its arrays' sizes follow)")


def summarize(example: Example, outputs: list[np.ndarray]) -> list[dict[str, Any]]:
    """Per output: name, dtype, length, the first values and a blake3 of the bytes."""
    return [{"name": name, "dtype": dtype.value, "count": len(a),
             "head": a[:HEAD].tolist(), "blake3": blake3.blake3(a.tobytes()).hexdigest()[:16]}
            for (name, dtype), a in zip(example.output_buffers(), outputs, strict=True)]


def against_reference(drv: Driver, example: Example, outputs: list[np.ndarray]
                      ) -> dict[str, Any]:
    """``outputs`` held against the same program run on the reference backend:
    ``{reference, ok, divergence}``; PluginLoadError when no reference is loaded."""
    reference = drv.registry.reference()
    if reference is None:
        raise PluginLoadError(
            "no reference backend is loaded to hold the outputs against",
            f"Install it (pip install vyre-reference), add 'reference' to {SELECT_ENV}, or "
            "leave out --shadow.")
    ref_out = example.run(drv, reference.id)
    divergence = buffers_divergence(example.output_buffers(), ref_out, outputs, example.ulp)
    return {"reference": reference.id, "ok": divergence is None, "divergence": divergence}


def run(args: argparse.Namespace) -> int:
    target = load_target(args.target, args.inputs, dim=args.dim)
    example = target.example
    kind = "sequence" if isinstance(example.program, StepSequence) else \
        "kernel" if split_spec(args.target) else "program"
    record: dict[str, Any] = {"target": target.name, "kind": kind,
                              "program": example.program.fingerprint()[:16]}
    if args.save:
        record["saved"] = [str(path) for path in save_target(target, args.save)]
    with Driver() as drv:
        decision = drv.route(example.program, backend=args.backend, config=example.config)
        start = time.perf_counter()
        outputs = example.run(drv, args.backend)
        seconds = time.perf_counter() - start
        record.update(backend=decision.backend, reason=decision.reason, seconds=seconds,
                      outputs=summarize(example, outputs))
        failures = []
        mismatch = example.mismatch(outputs)
        record["oracle"] = None if example.expected is None else {"ok": mismatch is None,
                                                                  "mismatch": mismatch}
        if mismatch:
            failures.append(f"against the example's expected outputs: {mismatch}")
        if args.shadow:
            record["shadow"] = against_reference(drv, example, outputs)
            if not record["shadow"]["ok"]:
                failures.append(f"against the reference: {record['shadow']['divergence']}")
    if args.json:
        print_json(record)
    else:
        _print(record)
    return 1 if failures else 0


def _print(record: dict[str, Any]) -> None:
    console.print(styled((record["target"], "bold"), f"  {record['kind']} {record['program']}"))
    console.print(styled("  ran on ", (record["backend"], "bold"), f": {record['reason']}"))
    console.print(f"  {record['seconds'] * 1e3:.2f} ms for the dispatch through its worker")
    print_table(["output", "dtype", "count", "first values", "blake3"],
                [[o["name"], o["dtype"], o["count"],
                 np.array2string(np.asarray(o["head"]), precision=6, separator=", "),
                 o["blake3"]]
                 for o in record["outputs"]])
    for key, label in (("oracle", "expected outputs (numpy)"), ("shadow", "reference")):
        check = record.get(key)
        if check:
            detail = check.get("mismatch") or check.get("divergence") or "match"
            console.print(styled(f"  {label}: ", ok(check["ok"], "match", "DIVERGES"),
                                 "" if check["ok"] else f" — {detail}"))
    for path in record.get("saved", []):
        console.print(f"  saved {path}")
