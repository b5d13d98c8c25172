"""``vyre conform --exhaustive --all-inputs``: the options, the run, the report
(``vyre_core.conformance.all_inputs`` does the work)."""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from vyre_core.cli.output import console, ok, print_json, print_table, progress
from vyre_core.conformance import all_inputs, digests
from vyre_core.conformance.oracle import correctly_rounded  # (gmpy2: only if a chunk differs)
from vyre_core.driver import Driver
from vyre_core.errors import InvalidConfigError

RUN_DIR = Path("vyre-exhaustive-run")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--all-inputs", action="store_true",
                   help="with --exhaustive: every input of each transcendental (2^32 for "
                        "f32, every f16 input and f16 pair), in chunks, by digest")
    p.add_argument("--op", action="append", metavar="OP",
                   help="--all-inputs: only this op (repeat, or a comma list)")
    p.add_argument("--dtype", action="append", metavar="T",
                   help="--all-inputs: only f32 or f16")
    p.add_argument("--chunks", metavar="SPEC",
                   help="--all-inputs: only these chunks, e.g. 0:16 (end excluded) or 0,5,9")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="--all-inputs: chunks at once (worker processes per backend, or "
                        "oracle processes with --record)")
    p.add_argument("--run-dir", type=Path, default=RUN_DIR, metavar="DIR",
                   help=f"--all-inputs: where the log of finished chunks goes; a run over "
                        f"the same directory resumes (default {RUN_DIR})")
    p.add_argument("--record", action="store_true",
                   help="--all-inputs: record the digests from the oracle (needs gmpy2)")
    p.add_argument("--chunk-bits", type=int, default=all_inputs.CHUNK_BITS, metavar="B",
                   help="--all-inputs: chunks of 2^B inputs (8 to 24; the records' are 24: "
                        "smaller ones for tests, with their own --digests)")
    p.add_argument("--digests", type=Path, default=digests.RECORDS, metavar="DIR",
                   help="--all-inputs: where the records are read and written (default: "
                        "the package's)")


def run(args: argparse.Namespace) -> int:
    selected = all_inputs.suites(_split(args.op), _split(args.dtype))
    chunks = all_inputs.parse_chunks(args.chunks) if args.chunks else None
    work = all_inputs.plan(selected, chunks, args.chunk_bits)
    if args.jobs < 1:
        raise InvalidConfigError(f"at least one job is needed (--jobs {args.jobs})",
                                 "Give --jobs 1 or more (the cores to use).")
    if args.record and args.backend:
        raise InvalidConfigError("a record (--record) runs the oracle, not a backend",
                                 "Leave out --backend with --record.")
    if args.record:
        log = all_inputs.RunLog(args.run_dir)
        with progress("recording digests", len(work), not args.json) as bar, \
                ProcessPoolExecutor(args.jobs) as pool:
            results = all_inputs.record(work, args.chunk_bits, args.digests, log, pool,
                                        correctly_rounded, bar.advance)
    else:
        expected = all_inputs.recorded(work, args.chunk_bits, args.digests)
        log = all_inputs.RunLog(args.run_dir)
        with Driver(workers=args.jobs) as drv, ThreadPoolExecutor(args.jobs) as threads:
            backends = [drv.registry.get(args.backend).id] if args.backend else drv.registry.ids()
            with progress("all inputs", len(backends) * len(work), not args.json) as bar:
                results = all_inputs.check(drv, backends, work, args.chunk_bits, expected,
                                           log, threads, correctly_rounded, bar.advance)
    rows = all_inputs.summary(results)
    if args.json:
        print_json({"run_dir": str(args.run_dir), "summary": rows,
                    "chunks": [asdict(r) for r in results]})
    else:
        _print(rows, results, args.record)
    return 0 if all(r.ok for r in results) else 1


def _split(values: list[str] | None) -> list[str]:
    """``--op exp --op log,sin`` as ``[exp, log, sin]``."""
    return [v for value in values or () for v in value.split(",") if v]


def _print(rows: list[dict], results: list[all_inputs.ChunkResult], recorded: bool) -> None:
    for r in results:
        if r.error:
            console.print(f"{r.backend} {r.dtype} {r.op} chunk {r.chunk}: {r.error}",
                          style="red")
        for miss in r.first:
            console.print(f"{r.backend} {r.dtype} {r.op} chunk {r.chunk}: input "
                          f"{_hex(miss['input'], r.dtype)} "
                          f"({', '.join(map(repr, miss['input_value']))}): expected "
                          f"{_hex([miss['expected']], r.dtype)} {miss['expected_value']!r}, "
                          f"got {_hex([miss['actual']], r.dtype)} {miss['actual_value']!r}")
    print_table(["backend", "op", "dtype", "chunks", "inputs", "misrounded", "errors",
                 "time (s)", "result"],
                [[row["backend"], row["op"], row["dtype"], row["chunks"], row["inputs"],
                  row["misrounded"], row["errors"], f"{row['seconds']:.1f}",
                  ok(row["misrounded"] == 0 and row["errors"] == 0)] for row in rows],
                title="digests recorded from the oracle" if recorded else
                "every input against the correctly rounded result (first 20 misrounded "
                "of each chunk above)")
    if not recorded:
        console.print("misrounded: the count over all chunks; time: the backend's, chunk "
                      "by chunk (summed over parallel chunks)", style="dim")


def _hex(bits: list[int], dtype: str) -> str:
    width = 8 if dtype == "f32" else 4
    return "/".join(f"0x{b:0{width}x}" for b in bits)
