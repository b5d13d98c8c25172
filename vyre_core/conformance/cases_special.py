"""Float special values, every pair: ±0, ±smallest subnormal, ±smallest normal, ±1,
±largest, ±inf and NaN through every binary float op, every unary one and every cast, in
f32, f16 and f64 (pow, atan2 and the transcendentals in f32 and f16); and each unary op
over inputs stepping through all f32 bit patterns. Expected: numpy in the operand type
(IEEE for add sub mul div and fmod), the min/max and sign-of-zero rules of
docs/semantics.md written out here, transcendentals correctly rounded (f64, rounded once)
within the budget docs/semantics.md gives them."""

from __future__ import annotations

import itertools

import numpy as np

from vyre_core import ir

from .base import Case, arr, map_case


def _specials(t: ir.DType) -> list[float]:
    info = np.finfo(t.storage_np)
    values = [0.0, float(info.smallest_subnormal), float(info.tiny), 1.0, float(info.max),
              float("inf")]
    return [*values, *(-v for v in values), float("nan")]


def _extreme(pick, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """minimumNumber/maximumNumber: a NaN loses to a number; -0 below +0."""
    out = pick(p, q)
    zeros = (p == 0) & (q == 0)
    negative = (np.signbit(p) | np.signbit(q)) if pick is np.fmin else \
        (np.signbit(p) & np.signbit(q))
    return np.where(zeros, np.where(negative, -0.0, 0.0), out).astype(p.dtype)


def _binary(t: ir.DType) -> list[Case]:
    """Every pair through the arithmetic, and (its own case: a backend may refuse f64 rem)
    through fmod."""
    pairs = list(itertools.product(_specials(t), repeat=2))
    a = arr(t, [x for x, _ in pairs])
    b = arr(t, [y for _, y in pairs])
    inputs = [("a", t, a), ("b", t, b)]
    with np.errstate(all="ignore"):
        return [
            map_case(f"{t.value}_special_pairs", inputs, [
                ("add", t, lambda x, y: x + y, a + b), ("sub", t, lambda x, y: x - y, a - b),
                ("mul", t, lambda x, y: x * y, a * b), ("div", t, lambda x, y: x / y, a / b),
                ("min", t, ir.min, _extreme(np.fmin, a, b)),
                ("max", t, ir.max, _extreme(np.fmax, a, b)),
            ]),
            map_case(f"{t.value}_special_rem", inputs,
                     [("rem", t, lambda x, y: x % y, np.fmod(a, b))]),
            *([] if t is ir.f64 else [map_case(f"{t.value}_special_pow_atan2", inputs, [
                ("pow", t, ir.pow, correctly_rounded_pow(a, b)),
                ("atan2", t, ir.atan2, correctly_rounded(np.arctan2, a, b)),
            ])]),
        ]


def correctly_rounded(fn, *args: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return fn(*(x.astype(np.float64) for x in args)).astype(args[0].dtype)


def correctly_rounded_pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """pow with C's special cases for every NaN (``x ** ±0 == 1 ** y == 1``)."""
    out = correctly_rounded(np.power, x, y)
    out[(y == 0) | (x == 1)] = 1.0
    return out


def _unary(t: ir.DType, name: str, x: np.ndarray) -> list[Case]:
    with np.errstate(all="ignore"):
        exact = [("neg", t, lambda v: -v, -x), ("abs", t, abs, np.abs(x)),
                 ("floor", t, ir.floor, np.floor(x)), ("ceil", t, ir.ceil, np.ceil(x)),
                 ("sqrt", t, ir.sqrt, correctly_rounded(np.sqrt, x))]
    cases = [map_case(f"{t.value}_{name}_exact_unary", [("x", t, x)], exact)]
    if t is not ir.f64:  # (f64 transcendentals: the f64 cases of cases_float.py)
        rounded = [(op, t, getattr(ir, op), correctly_rounded(getattr(np, op), x))
                   for op in ("exp", "log", "sin", "cos", "tan", "tanh", "exp2", "log2")]
        cases.append(map_case(f"{t.value}_{name}_transcendental", [("x", t, x)], rounded))
    return cases


def _to_int(x: np.ndarray, dtype: ir.DType) -> np.ndarray:
    """docs/semantics.md: truncate toward zero, saturate to the range, NaN gives 0."""
    low, high = (0, 2**32 - 1) if dtype is ir.u32 else (-(2**31), 2**31 - 1)
    with np.errstate(all="ignore"):
        wide = np.trunc(x.astype(np.float64))
    out = np.where(np.isnan(wide), 0, np.clip(np.nan_to_num(wide, posinf=high, neginf=low),
                                              low, high))
    return arr(dtype, out.astype(np.int64))


def _casts(t: ir.DType) -> list[Case]:
    """Every special value of ``t`` to every other float type (f64 -> f16 a case of its
    own: a backend may refuse it) and to both integer types."""
    x = arr(t, _specials(t))
    floats = [d for d in (ir.f32, ir.f16, ir.f64) if d is not t]
    with np.errstate(all="ignore"):
        to_float = [(f"to_{d.value}", d, lambda v, d=d: ir.cast(v, d), x.astype(d.storage_np))
                    for d in floats if not (t is ir.f64 and d is ir.f16)]
        cases = [map_case(f"cast_{t.value}_special", [("x", t, x)], [
            *to_float,
            ("to_i32", ir.i32, lambda v: ir.cast(v, ir.i32), _to_int(x, ir.i32)),
            ("to_u32", ir.u32, lambda v: ir.cast(v, ir.u32), _to_int(x, ir.u32)),
        ])]
        if t is ir.f64:
            cases.append(map_case("cast_f64_f16_special", [("x", t, x)], [
                ("to_f16", ir.f16, lambda v: ir.cast(v, ir.f16), x.astype(np.float16))]))
    return cases


def _f32_sweep(count: int) -> np.ndarray:
    """``count`` f32 whose bit patterns step evenly through all 2^32."""
    step = (1 << 32) // count
    return (np.arange(count, dtype=np.uint64) * step).astype(np.uint32).view(np.float32)


CASES: list[Case] = [
    *(c for t in (ir.f32, ir.f16, ir.f64) for c in _binary(t)),
    *(c for t in (ir.f32, ir.f16, ir.f64) for c in _unary(t, "special", arr(t, _specials(t)))),
    *_unary(ir.f32, "bit_sweep", _f32_sweep(1 << 12)),
    *(c for t in (ir.f32, ir.f16, ir.f64) for c in _casts(t)),
]
