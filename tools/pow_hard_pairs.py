"""Development tool for vyre_core/mathlib/pow.py (not product code; needs the ``test``
extra's gmpy2): a search for the f32 pairs its fast path leaves undecided (the pair's
two roundings, ``P -+ err``, differ), the ones its accurate path exists for, by family:

- ``sample``: the 2^24 pairs of ``vyre conform --exhaustive --all-inputs --op pow --dtype
  f32`` (``sweep.operands``), the fast path's undecided ones among them;
- ``near-one``: x within 2^-7 of 1 (the pair's error times a large y counts most) with y
  taking ``|t| = |y log2 x|`` up to 150;
- ``integer-y``: y an integer from 2 to 15 (exact results and midpoints: odd x of up to
  12 bits squared, 3^15, ...) and random x;
- ``dyadic-y``: exact squares and fourth powers to y = n/2 and n/4;
- ``thresholds``: results near the overflow threshold (t near 128) and through the
  subnormal range (t in [-150, -126]).

Each undecided pair is computed by MPFR (24 bits, binary32's exponent range) and by the
function's IR on the reference (pairs whose result is NaN left out); the tool prints per
family how many it drew, how many were undecided, how many of those are exactly a
midpoint, how many the fast path's rule alone (the even neighbour) and the function
misround, then the undecided pairs (at most ``--keep`` per family) as ``(x bits, y bits)`` for
tests/test_mathlib_pow.py's ``F32_UNDECIDED``.

    python tools/pow_hard_pairs.py [--draws N] [--keep K] [--seed S] [--families ...]
"""

from __future__ import annotations

import argparse
import sys

import gmpy2
import numpy as np
from math_constants import BINARY32  # (tools/ is the script's folder)

from vyre_core import ir
from vyre_core.conformance import sweep
from vyre_core.mathlib import ff
from vyre_core.mathlib import pow as pow_module
from vyre_reference import run

F32, U32 = ir.f32, ir.u32
#: Lanes per reference run (the interpreter keeps every value of the block per lane).
LANES = 1 << 17


def _undecided_block(lanes: int) -> ir.Program:
    """``out[i]`` = 1 where the fast path's two roundings of ``|x|^y`` differ."""
    k = ir.Kernel(workgroup=(64,))
    xs, ys = k.read("x", U32), k.read("y", U32)
    out = k.output("out", U32, lanes)
    i = k.let("i", ir.global_id())
    y = k.let("vy", ir.bitcast(ys[i], F32))
    ax = k.let("ax", ir.bitcast(xs[i] & 0x7FFFFFFF, F32))
    pair, n, err = pow_module._core(k, ax, y)
    scale = k.let("scale", n >> 6)
    below = pow_module._round(k, ff.fast_two_sum(k, pair.hi, pair.lo - err), scale, F32)
    above = pow_module._round(k, ff.fast_two_sum(k, pair.hi, pair.lo + err), scale, F32)
    out[i] = ir.select(ir.bitcast(below, U32) == ir.bitcast(above, U32), ir.lit(0, U32),
                       ir.lit(1, U32))
    return k.build()


def _function_block(lanes: int) -> ir.Program:
    """``out0[i]``: ``pow_f32``; ``out1[i]``: ``|x|^y`` by the fast path's rule alone
    (the even neighbour wherever it is undecided), as f32 bits."""
    k = ir.Kernel(workgroup=(64,))
    xs, ys = k.read("x", U32), k.read("y", U32)
    out, rule = k.output("out0", U32, lanes), k.output("out1", U32, lanes)
    i = k.let("i", ir.global_id())
    x, y = k.let("vx", ir.bitcast(xs[i], F32)), k.let("vy", ir.bitcast(ys[i], F32))
    out[i] = ir.bitcast(pow_module.pow_f32(k, x, y), U32)
    pair, n, err = pow_module._core(k, ir.bitcast(xs[i] & 0x7FFFFFFF, F32), y)
    rule[i] = ir.bitcast(pow_module._rounded(k, pair, n >> 6, err, F32), U32)
    return k.build()


def undecided(xb: np.ndarray, yb: np.ndarray) -> np.ndarray:
    """The indices of the pairs the fast path leaves undecided."""
    found = []
    for start in range(0, xb.size, LANES):
        x, y = xb[start:start + LANES], yb[start:start + LANES]
        if x.size < LANES:
            x, y = np.resize(x, LANES), np.resize(y, LANES)
        flags = run(_undecided_block(LANES), [x, y])[0][:min(LANES, xb.size - start)]
        found.append(np.flatnonzero(flags) + start)
    return np.concatenate(found) if found else np.zeros(0, np.int64)


def mpfr_pow(x: int, y: int) -> tuple[int, bool]:
    """MPFR's ``x^y`` rounded to f32 (its bits; NaN canonical), and whether ``|x|^y`` is
    exactly a midpoint of f32 (representable in 25 bits but not in 24)."""
    fx, fy = (float(np.uint32(v).view(np.float32)) for v in (x, y))
    with gmpy2.context(BINARY32):
        result = np.float32(float(gmpy2.mpfr(fx) ** gmpy2.mpfr(fy)))
    with gmpy2.context(precision=25, emin=-149, emax=128, subnormalize=True) as wide:
        gmpy2.mpfr(abs(fx)) ** gmpy2.mpfr(fy)
        exact25 = not wide.inexact
    with gmpy2.context(precision=24, emin=-148, emax=128, subnormalize=True) as narrow:
        gmpy2.mpfr(abs(fx)) ** gmpy2.mpfr(fy)
        exact24 = not narrow.inexact
    bits = 0x7FC00000 if np.isnan(result) else int(result.view(np.uint32))
    return bits, exact25 and not exact24


def _bits(values) -> np.ndarray:
    return np.asarray(values, np.float32).view(np.uint32)


def families(draws: int, rng: np.random.Generator) -> dict[str, tuple[np.ndarray, ...]]:
    """The candidate pairs of each family (x bits, y bits)."""
    out = {}
    xs, ys = zip(*(list(c) for c in sweep.operands("pow", sweep.DEFAULT_INPUTS)),
                 strict=True)
    out["sample"] = (_bits(np.concatenate(xs)), _bits(np.concatenate(ys)))
    near = 1 + rng.uniform(-2**-7, 2**-7, draws) * 10.0 ** rng.uniform(-5, 0, draws)
    near = near.astype(np.float32)
    log = np.log2(near.astype(np.float64))
    log[log == 0] = 1.0
    t = rng.uniform(-150, 128, draws) * 10.0 ** rng.uniform(-3, 0, draws)
    out["near-one"] = (_bits(near), _bits(t / log))
    x = (rng.uniform(0.5, 1.0, draws) * 2.0 ** rng.integers(-20, 20, draws)).astype(
        np.float32)
    small = rng.integers(1, 4096, draws).astype(np.float32) * np.float32(2.0) ** \
        rng.integers(-12, 12, draws).astype(np.float32)
    x = np.where(rng.random(draws) < 0.5, x, small)
    out["integer-y"] = (_bits(x), _bits(rng.integers(2, 16, draws)))
    root = rng.integers(1, 4096, draws).astype(np.float64)
    power = rng.choice([2, 4], draws)
    base = root ** power * 2.0 ** (power * rng.integers(-8, 8, draws))
    n = rng.integers(1, 16, draws)
    keep = base < 2.0**24 * 2.0 ** 60
    out["dyadic-y"] = (_bits(base[keep]), _bits((n / power)[keep]))
    x = rng.uniform(0.25, 4.0, draws)
    x = np.where(np.abs(np.log2(x)) < 2**-10, 2.0, x)
    t = np.where(rng.random(draws) < 0.5, rng.uniform(127.5, 128.2, draws),
                 rng.uniform(-151.0, -125.0, draws))
    out["thresholds"] = (_bits(x), _bits(t / np.log2(x)))
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1 << 18)
    parser.add_argument("--keep", type=int, default=64)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--families", nargs="*")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    kept: list[tuple[str, int, int]] = []
    for name, (xb, yb) in families(args.draws, rng).items():
        if args.families and name not in args.families:
            continue
        at = undecided(xb, yb)
        pairs = sorted(set(zip(xb[at].tolist(), yb[at].tolist(), strict=True)))
        wants = [mpfr_pow(x, y) for x, y in pairs]
        # (a negative x to a non-integer y is NaN: its |x|^y was never a result)
        pairs, wants = [p for p, w in zip(pairs, wants, strict=True) if w[0] != 0x7FC00000], \
            [w for w in wants if w[0] != 0x7FC00000]
        got = rule = np.zeros(0, np.uint32)
        if pairs:
            px, py = (np.array(c, np.uint32) for c in zip(*pairs, strict=True))
            got, rule = run(_function_block(px.size), [px, py])
        wrong = [p for p, g, (w, _) in zip(pairs, got, wants, strict=True) if int(g) != w]
        by_rule = sum(int(r) != w & 0x7FFFFFFF for r, (w, _) in zip(rule, wants, strict=True))
        midpoints = sum(m for _, m in wants)
        print(f"# {name}: {xb.size} pairs, {len(pairs)} undecided, {midpoints} of them "
              f"midpoints, {by_rule} misrounded by the fast path's rule alone, {len(wrong)} "
              f"by pow_f32 {[(hex(a), hex(b)) for a, b in wrong]}", flush=True)
        kept += [(name, x, y) for x, y in pairs[:args.keep]]
    for name, x, y in kept:
        print(f"    (0x{x:08X}, 0x{y:08X}),  # {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
