"""Development tool for vyre_core/mathlib/exp2.py (not product code; needs the ``test``
extra's gmpy2):

    python tools/exp2_exhaustive.py constants
        the source of exp2.py's tables: 2^(j/64) and ln 2 as f32 pairs, from MPFR at 200
        bits, each part rounded once to f32.
    python tools/exp2_exhaustive.py check [--backend cpu] [--chunks A:B,C,...] [--out FILE]
        runs ``exp2_f32`` on every f32 input of the chunks A..B-1, C, ... (chunk c holds the bits
        c * 2^24 .. (c + 1) * 2^24 - 1, made in the kernel) through a Driver and compares
        each chunk with the oracle; prints one line per chunk (misrounded count, seconds,
        a digest of the output bytes) and appends every misrounded input as
        ``input_bits result_bits correct_bits`` (hex) to FILE.
    python tools/exp2_exhaustive.py exceptions FILE...
        the source of exp2.py's exception list from such files (made with the list empty).
    python tools/exp2_exhaustive.py f16 [--backend cpu]
        every f16 input against MPFR's binary16; prints the misrounded ones.

The oracle: numpy's f64 ``exp2`` of the input, rounded to f32, trusted where it lies
farther than 2^-40 (relative) from every f32 rounding boundary; MPFR's ``exp2`` in the
binary32 context (``gmpy2``) for the rest.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import gmpy2
import numpy as np

from vyre_core import Driver, ir
from vyre_core.mathlib.exp2 import exp2_f16, exp2_f32

CHUNK = 1 << 24
BINARY32 = gmpy2.context(precision=24, emin=-148, emax=128, subnormalize=True)
BINARY16 = gmpy2.context(precision=11, emin=-23, emax=16, subnormalize=True)


def constants() -> str:
    def pair(v: gmpy2.mpfr) -> tuple[int, int]:
        with gmpy2.context(BINARY32):
            hi = gmpy2.mpfr(v)
        with gmpy2.context(precision=200):
            rest = v - hi
        with gmpy2.context(BINARY32):
            lo = gmpy2.mpfr(rest)
        return tuple(int(np.float32(float(h)).view(np.uint32)) for h in (hi, lo))

    with gmpy2.context(precision=200):
        table = [pair(gmpy2.exp2(gmpy2.mpfr(j) / 64)) for j in range(64)]
        ln2 = pair(gmpy2.log(2))
    lines = [_hex_list("_T_HI", [h for h, _ in table]), _hex_list("_T_LO", [lo for _, lo in table]),
             f"_LN2_HI, _LN2_LO = _f32([0x{ln2[0]:08X}, 0x{ln2[1]:08X}])"]
    return "\n".join(lines)


def _hex_list(name: str, values: list[int], call: str = "_f32") -> str:
    words = [f"0x{v:08X}" for v in values]
    rows = [", ".join(words[i:i + 7]) for i in range(0, len(words), 7)]
    opening, closing = (f"{call}([", "])") if call else ("[", "]")
    return f"{name} = {opening}\n    " + ",\n    ".join(rows) + closing


def program_f32() -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    base = k.read("base", ir.u32, 1)
    out = k.output("out", ir.u32, CHUNK)
    i = k.let("i", ir.global_id())
    x = k.let("x", ir.bitcast(base[0] + i, ir.f32))
    out[i] = ir.bitcast(exp2_f32(k, x), ir.u32)
    return k.build()


def program_f16() -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    out = k.output("out", ir.u16, 1 << 16)
    i = k.let("i", ir.global_id())
    x = k.let("x", ir.bitcast(ir.cast(i, ir.u16), ir.f16))
    out[i] = ir.bitcast(exp2_f16(k, x), ir.u16)
    return k.build()


def oracle_f32(bits: np.ndarray) -> np.ndarray:
    """The correctly rounded f32 ``2^x`` of each input's bits, as bits (NaN canonical)."""
    x = bits.view(np.float32).astype(np.float64)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        y = np.exp2(x)
        want = y.astype(np.float32)
        _, e = np.frexp(y)
        quantum = np.maximum(e.astype(np.int64) - 24, -149)
        m = np.ldexp(y, -quantum)  # y in units of its f32 quantum
        off = np.abs(m - np.floor(m) - 0.5)
        doubtful = np.isfinite(y) & (y > 0) & (off <= 2.0**-40 * m + 2.0**-60)
    out = want.view(np.uint32).copy()
    out[np.isnan(x)] = 0x7FC00000
    with gmpy2.context(BINARY32):
        for at in np.flatnonzero(doubtful):
            exact = gmpy2.exp2(gmpy2.mpfr(float(x[at])))
            out[at] = np.float32(float(exact)).view(np.uint32)
    return out


def oracle_f16(x: np.ndarray) -> np.ndarray:
    """The correctly rounded f16 ``2^x`` of each f16 input, as bits (NaN canonical)."""
    out = np.full(x.size, 0x7E00, np.uint16)
    with gmpy2.context(BINARY16):
        for at, v in enumerate(x.astype(np.float64)):
            if v == v:
                out[at] = np.float16(float(gmpy2.exp2(gmpy2.mpfr(float(v))))).view(np.uint16)
    return out


def check(backend: str, chunks: list[int], out: Path | None) -> int:
    prog = program_f32()
    total = 0
    with Driver() as drv:
        for c in chunks:
            start = time.perf_counter()
            base = np.array([c * CHUNK], np.uint32)
            got = np.asarray(drv.dispatch(prog, [base], backend)[0]).view(np.uint32)
            ran = time.perf_counter() - start
            bits = np.arange(c * CHUNK, (c + 1) * CHUNK, dtype=np.uint64).astype(np.uint32)
            want = oracle_f32(bits)
            wrong = np.flatnonzero(got != want)
            total += wrong.size
            digest = hashlib.blake2b(got.tobytes(), digest_size=8).hexdigest()
            print(f"chunk {c:3d} {backend} misrounded {wrong.size:5d} run {ran:6.1f}s "
                  f"total {time.perf_counter() - start:6.1f}s digest {digest}", flush=True)
            if out is not None and wrong.size:
                with out.open("a") as f:
                    for at in wrong:
                        f.write(f"{bits[at]:08x} {got[at]:08x} {want[at]:08x}\n")
    print(f"{len(chunks)} chunks on {backend}: {total} misrounded", flush=True)
    return total


def exceptions(files: list[Path]) -> str:
    rows = sorted({tuple(int(w, 16) for w in line.split())
                   for f in files for line in f.read_text().split("\n") if line})
    return "\n".join([_hex_list("_EXCEPTION_INPUTS", [r[0] for r in rows], ""),
                      _hex_list("_EXCEPTION_RESULTS", [r[2] for r in rows], "")])


def f16(backend: str) -> int:
    """Every f16 input; a NaN input must give a NaN (any payload: stores canonicalize)."""
    with Driver() as drv:
        got = np.asarray(drv.dispatch(program_f16(), [], backend)[0]).view(np.uint16)
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    want = oracle_f16(x)
    nan = np.isnan(got.view(np.float16)) & np.isnan(x)
    wrong = np.flatnonzero((got != want) & ~nan)
    for at in wrong:
        print(f"f16 {at:04x}: got {got[at]:04x} want {want[at]:04x}")
    print(f"f16 on {backend}: {wrong.size} misrounded, digest "
          f"{hashlib.blake2b(got.tobytes(), digest_size=8).hexdigest()}", flush=True)
    return wrong.size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("constants")
    c = sub.add_parser("check")
    c.add_argument("--backend", default="cpu")
    c.add_argument("--chunks", default="0:256")
    c.add_argument("--out", type=Path)
    e = sub.add_parser("exceptions")
    e.add_argument("files", nargs="+", type=Path)
    h = sub.add_parser("f16")
    h.add_argument("--backend", default="cpu")
    args = parser.parse_args()
    if args.command == "constants":
        print(constants())
        return 0
    if args.command == "exceptions":
        print(exceptions(args.files))
        return 0
    if args.command == "f16":
        return 1 if f16(args.backend) else 0
    chunks = [c for part in args.chunks.split(",") for c in (
        range(*(int(v) for v in part.split(":"))) if ":" in part else [int(part)])]
    return 1 if check(args.backend, chunks, args.out) else 0


if __name__ == "__main__":
    sys.exit(main())
