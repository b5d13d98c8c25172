"""The correctly rounded result of each IR transcendental in f32 and f16, for numpy arrays
of inputs: the oracle the exhaustive digests are recorded from (docs/design-42.md 6.2).

Two stages, so that 2^32 inputs take minutes and not hours:

- **filter**: numpy's f64 function on the inputs widened to f64, rounded once to the
  target type. Its result is *decided* where the f64 value ``w`` is farther than
  ``MARGIN`` = 2^-40 (relative) from every rounding boundary of the target type: both
  ``w (1 - MARGIN)`` and ``w (1 + MARGIN)`` round to the same value (rounding is
  monotonic, so no boundary lies between them; the subnormal grid and the overflow
  threshold are boundaries of the conversion like any other). 2^-40 is about 2^13 ULPs
  of f64, far above any libm's error, so the filter does not trust numpy's last bits.
- **MPFR** (gmpy2) for the rest, about 2^-15 of f32 inputs and the exact cases (a
  result exactly on a midpoint, e.g. ``pow(1 + 2^-12, 2)``): a context of the target's
  precision and exponent range with ``subnormalize``, in which MPFR's functions are
  correctly rounded, exact cases included. gmpy2 is imported only when some input is
  undecided: the product imports this module without it.

Special values are docs/semantics.md's "Floats", applied by rule where it states them:
every NaN is the canonical quiet NaN (f32 ``0x7fc00000``, f16 ``0x7e00``; numpy's and
MPFR's NaNs carry a sign or none); ``pow(x, ±0) == pow(1, y) == pow(-1, ±inf) == 1``,
NaN included. The other special values (signed zeros, infinities, ``log(±0) == -inf``,
``tanh(±inf) == ±1``, ``exp2(-inf) == +0``, ``tan(±inf)`` NaN, atan2's C cases) are what
the f64 functions give (C99 Annex F, which semantics.md follows) and are exact, so the
filter decides them; tests/test_conformance_oracle.py holds each to semantics.md. MPFR
follows Annex F as well (its ``pow`` and ``atan2`` special cases are C's), so its
convention never overrides semantics.md here: it only ever sees finite inputs whose f64
result is finite and undecided.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from vyre_core.errors import InvalidConfigError

UNARY = ("exp", "exp2", "log", "log2", "sin", "cos", "tan", "tanh", "sqrt")
BINARY = ("pow", "atan2")
OPS = (*UNARY, *BINARY)

#: How far (relative) the f64 value must be from every rounding boundary to be trusted.
MARGIN = 2.0**-40


@dataclass(frozen=True)
class Format:
    kind: type[np.floating]
    bits: type[np.unsignedinteger]
    nan: int          # the canonical quiet NaN's bits
    precision: int    # MPFR's context for the format: significand bits,
    emin: int         # and the exponent range in MPFR's convention (x = m 2^e, 1/2 <= m < 1):
    emax: int         # the smallest subnormal is 2^(emin - 1), every finite value < 2^emax


FORMATS = {
    "f32": Format(np.float32, np.uint32, 0x7FC00000, 24, -148, 128),
    "f16": Format(np.float16, np.uint16, 0x7E00, 11, -23, 16),
}

#: numpy's f64 function of each op, IR operand order (``atan2(y, x)``, ``pow(x, y)``)
F64: dict[str, Callable[..., np.ndarray]] = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sin": np.sin,
    "cos": np.cos, "tan": np.tan, "tanh": np.tanh, "sqrt": np.sqrt, "pow": np.power,
    "atan2": np.arctan2,
}


def correctly_rounded(op: str, dtype: str, *args: np.ndarray) -> np.ndarray:
    """``op`` of ``args`` (arrays of the ``dtype`` type, or their bits' values) correctly
    rounded to ``dtype`` ("f32" or "f16"), round to nearest even, special values and NaN
    as docs/semantics.md states them."""
    fmt = FORMATS[dtype]
    with np.errstate(all="ignore"):
        wide = [np.asarray(a, fmt.kind).astype(np.float64) for a in args]
        w = F64[op](*wide)
        out = w.astype(fmt.kind)
        low = (w * (1.0 - MARGIN)).astype(fmt.kind).view(fmt.bits)
        high = (w * (1.0 + MARGIN)).astype(fmt.kind).view(fmt.bits)
    undecided = np.flatnonzero(low != high)
    if undecided.size:
        out[undecided] = mpfr(op, dtype, *(a[undecided] for a in wide))
    if op == "pow":
        x, y = wide
        out[(y == 0) | (x == 1) | ((x == -1) & np.isinf(y))] = 1
    bits = out.view(fmt.bits)
    bits[np.isnan(out)] = fmt.nan
    return out


def mpfr(op: str, dtype: str, *args: np.ndarray) -> np.ndarray:
    """``op`` of each input by MPFR in ``dtype``'s context (correctly rounded, subnormal
    results on their grid, overflow to infinity), one call per input: only for the few the
    filter leaves, and for the tests. NaN as MPFR gives it (not yet canonical)."""
    try:
        import gmpy2
    except ImportError as exc:  # (an optional extra: say how to get it)
        raise InvalidConfigError(
            f"the correctly rounded result of {len(args[0])} {dtype} {op} input(s) lies too "
            f"near a rounding boundary for f64 to decide, and MPFR (gmpy2) is not installed "
            f"({exc})", "Install it in this environment: pip install 'vyre[conform]'.") \
            from None

    fmt = FORMATS[dtype]
    fn = {"exp": gmpy2.exp, "exp2": gmpy2.exp2, "log": gmpy2.log, "log2": gmpy2.log2,
          "sin": gmpy2.sin, "cos": gmpy2.cos, "tan": gmpy2.tan, "tanh": gmpy2.tanh,
          "sqrt": gmpy2.sqrt, "pow": lambda x, y: x**y, "atan2": gmpy2.atan2}[op]
    # (the inputs are made outside the narrow context: exact at 53 bits, and an f32 or
    # f16 value lies inside its own format's exponent range, as MPFR requires)
    operands = [[gmpy2.mpfr(float(v)) for v in a] for a in args]
    out = np.empty(len(operands[0]), np.float64)
    context = gmpy2.context(precision=fmt.precision, emin=fmt.emin, emax=fmt.emax,
                            subnormalize=True, round=gmpy2.RoundToNearest)
    with gmpy2.context(context):
        for j, values in enumerate(zip(*operands, strict=True)):
            out[j] = float(fn(*values))
    return out.astype(fmt.kind)


def correctly_rounded_bits(op: str, dtype: str, *args: np.ndarray) -> np.ndarray:
    """``correctly_rounded`` as the result's bits (u32 for f32, u16 for f16)."""
    return correctly_rounded(op, dtype, *args).view(FORMATS[dtype].bits)
