"""Float operations on f32, f16 and f64: arithmetic, IEEE specials, exact unary ops,
compares with NaN, transcendentals (in f32 and f16: 2 ULP of numpy's; tan, tanh, exp2,
log2, pow and atan2 within the budget of the correctly rounded result; in f64 MPFR's
correctly rounded bits, held to identical bytes), fma, round/trunc (ties to even) and the
NaN/infinity tests. Expected: numpy in the operand type."""

from __future__ import annotations

import numpy as np

from vyre_core import ir

from .base import INF, NAN, Case, arr, map_case
from .cases_special import correctly_rounded, correctly_rounded_pow

b_ = ir.bool_


#: exp, log, sin and cos of ``_float_cases``'s ``x`` (0.25, 0.5, 0.75, 1.25, 2, 2.5, 4,
#: 5.5) correctly rounded to f64, by MPFR at 53 bits.
F64_CORRECTLY_ROUNDED = {op: np.array(bits, np.uint64).view(np.float64) for op, bits in {
    "exp": [0x3FF48B5E3C3E8186, 0x3FFA61298E1E069C, 0x4000EF9DB467DCF8, 0x400BEC38EDB0FAF0,
            0x401D8E64B8D4DDAE, 0x40285D6FD931E0BB, 0x404B4C902E273A58, 0x406E96244F21BBF6],
    "log": [0xBFF62E42FEFA39EF, 0xBFE62E42FEFA39EF, 0xBFD269621134DB92, 0x3FCC8FF7C79A9A22,
            0x3FE62E42FEFA39EF, 0x3FED5240F0E0E078, 0x3FF62E42FEFA39EF, 0x3FFB46A5EF8151A0],
    "sin": [0x3FCFAAEED4F31577, 0x3FDEAEE8744B05F0, 0x3FE5CFFC16BF8F0D, 0x3FEE5E14FE11418C,
            0x3FED18F6EAD1B446, 0x3FE326AF0DCFCAB1, 0xBFE837B9DDDC1EAE, 0xBFE693C94E0AB057],
    "cos": [0x3FEF01549F7DEEA1, 0x3FEC1528065B7D50, 0x3FE769FEC655211F, 0x3FD42E3DD88BD952,
            0xBFDAA22657537205, 0xBFE9A2F7EF858B7D, 0xBFE4EAA606DB24C1, 0x3FE6AD6C3C07D448],
}.items()}
#: ``f64_transcendental_more``'s results correctly rounded to f64, by MPFR at 53 bits
#: (``tools/f64_constants.py`` prints them): ``tan tanh exp2 log2`` of its ``x``,
#: ``pow(x, y)``, ``atan2(y, x)``.
F64_MORE_CORRECTLY_ROUNDED = {op: np.array(bits, np.uint64).view(np.float64) for op, bits in {
    "tan": [0xC0017AF62E0950F8, 0x40017AF62E0950F8, 0x40017AF62E0950F8, 0x3FE17B4F5BF3474A,
            0x3FE4BF5F34BE3782, 0x402C33ED50B88777, 0x8000000000000000, 0x0000000000000000,
            0x3FF8EB245CBEE3A6, 0xBFF8EB245CBEE3A6, 0x3FF2866F9BE4DE13, 0x3FEDCFA36110EEEC,
            0x3FC23EF71254B86F, 0xBFEFDBD31615B07A],
    "tanh": [0x3FEED9505E1BC3D4, 0xBFEED9505E1BC3D4, 0xBFEED9505E1BC3D4, 0x3FDD9353D7568AF3,
             0x3FEFFFFFFDC96F35, 0x3FECF6F9786DF577, 0x8000000000000000, 0x0000000000000000,
             0x3FE85EFAB514F394, 0xBFE85EFAB514F394, 0x3FEFFA81708A0B42, 0x3FE45323E552F228,
             0xBFEFD77D111A0B00, 0x3FEFFFB9F2FC1E91],
    "exp2": [0x4010000000000000, 0x3FD0000000000000, 0x3FD0000000000000, 0x3FF6A09E667F3BCD,
             0x4090000000000000, 0x4006A09E667F3BCD, 0x3FF0000000000000, 0x3FF0000000000000,
             0x4000000000000000, 0x3FE0000000000000, 0x4030000000000000, 0x3FFAE89F995AD3AD,
             0x3FC0000000000000, 0x4046A09E667F3BCD],
    "log2": [0x3FF0000000000000, 0x7FF8000000000000, 0x7FF8000000000000, 0xBFF0000000000000,
             0x400A934F0979A371, 0x3FE2B803473F7AD1, 0xFFF0000000000000, 0xFFF0000000000000,
             0x0000000000000000, 0x7FF8000000000000, 0x4000000000000000, 0xBFDA8FF971810A5E,
             0x7FF8000000000000, 0x4003ACEA7C065D42],
    "pow": [0x4090000000000000, 0xC020000000000000, 0x7FF8000000000000, 0x4020000000000000,
            0x3F69E7C6E43390B7, 0x4032E8A070829B99, 0xFFF0000000000000, 0x3FF0000000000000,
            0x3FF0000000000000, 0x3FF0000000000000, 0x4000000000000000, 0x3FF0000000000000,
            0x3FBC71C71C71C71C, 0x4016000000000000],
    "atan2": [0x3FF5F97315254857, 0x400145385FA3AF71, 0x40072C43F4B1650A, 0xBFF67D8863BC99BD,
              0xBFCF5B75F92C80DD, 0x3FF5DE52F8E1D71D, 0xBFF921FB54442D18, 0x0000000000000000,
              0x7FF8000000000000, 0x3FF921FB54442D18, 0x3FBFD5BA9AAC2F6E, 0x8000000000000000,
              0xC0046DC09EC29433, 0x3FC7057081D704E6],
}.items()}


def _float_cases(t: ir.DType) -> list[Case]:
    n = t.value
    a = arr(t, [1.5, -2.25, 0.5, 3.0, -0.75, 8.0, 100.0, -6.5, 0.125, 7.0])
    b = arr(t, [0.25, 4.0, -0.5, 3.0, -0.25, 2.5, 0.0, 2.0, 1024.0, -2.0])
    sa = arr(t, [1.0, -1.0, 0.0, INF, INF, NAN, 2.0, NAN, -INF, 5.5, 60000.0])
    sb = arr(t, [0.0, 0.0, 0.0, INF, 1.0, 2.0, NAN, NAN, 3.0, -INF, 60000.0])
    u = arr(t, [1.5, -1.5, 2.0, -2.5, 0.0, 0.75, -0.25, 3.0, -7.0, 100.5, INF, -INF, NAN])
    ca = arr(t, [1.0, 2.0, -1.0, NAN, 0.0, -0.0, INF, 1.0, -INF, NAN])
    cb = arr(t, [1.0, 1.0, 3.0, 1.0, -0.0, 0.0, INF, NAN, 5.0, NAN])
    za = arr(t, [0.0, -0.0, 0.0, -0.0, -0.0, 1.0, -1.0, -1.0])
    zb = arr(t, [0.0, 0.0, -0.0, -0.0, 0.0, -1.0, 1.0, 1.0])
    x = arr(t, [0.25, 0.5, 0.75, 1.25, 2.0, 2.5, 4.0, 5.5])
    ties = arr(t, [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -0.4, 3.7, -3.7, 0.0, -0.0, INF, -INF, NAN,
                   100.5, 7.0])
    fa = arr(t, [1.5, -2.0, 0.25, 3.0, 0.375, 10.0, -1.25])
    fb = arr(t, [2.0, 0.5, -8.0, 3.0, 12.0, 0.75, 1.75])
    fc = arr(t, [0.5, 1.0, 1.0, -4.0, 0.25, -7.5, 3.0])
    px = arr(t, [2.0, -2.0, -2.0, 0.5, 10.0, 1.5, -0.0, 0.0, 1.0, -1.0, 4.0, 0.75, -3.0, 5.5])
    py = arr(t, [10.0, 3.0, 0.5, -3.0, -2.5, 7.25, -1.0, 0.0, NAN, INF, 0.5, -0.0, -2.0, 1.0])
    third = arr(t, [1.0 / 3.0])[0]
    fma_a = np.concatenate([fa, arr(t, [3.0, 1.0 + 2.0 ** -10])])
    fma_b = np.concatenate([fb, arr(t, [third, 1.0 + 2.0 ** -10])])
    fma_c = np.concatenate([fc, -(fma_a[-2:] * fma_b[-2:])])

    def binary_ops(p: np.ndarray, q: np.ndarray) -> list:
        with np.errstate(all="ignore"):
            return [
                ("add", t, lambda x, y: x + y, p + q), ("sub", t, lambda x, y: x - y, p - q),
                ("mul", t, lambda x, y: x * y, p * q), ("div", t, lambda x, y: x / y, p / q),
                *rem_op(p, q),
                ("min", t, ir.min, np.fmin(p, q)), ("max", t, ir.max, np.fmax(p, q)),
            ]

    def rem_op(p: np.ndarray, q: np.ndarray) -> list:
        """fmod, except in f64: its own case (``f64_rem``), as a backend may refuse it."""
        with np.errstate(all="ignore"):
            return [] if t is ir.f64 else [("rem", t, lambda x, y: x % y, np.fmod(p, q))]

    with np.errstate(all="ignore"):
        f64_rem = [map_case("f64_rem", [("a", t, a), ("b", t, b)], [
            ("rem", t, lambda x, y: x % y, np.fmod(a, b)),
            ("rem_signed_zero", t, lambda x, y: (x * 4.0) % (y * 2.0),
             np.fmod(a * 4.0, b * 2.0))])] if t is ir.f64 else []
    return [
        *f64_rem,
        map_case(f"{n}_arith", [("a", t, a), ("b", t, b)], [
            *binary_ops(a, b),
            ("select", t, lambda x, y: ir.select(x < y, x * 2.0, y), np.where(a < b, a * 2, b)),
        ]),
        map_case(f"{n}_ieee_specials", [("a", t, sa), ("b", t, sb)], binary_ops(sa, sb)),
        # the sign of zero, written out (IEEE 754: x + (-x) and -0 + 0 are +0, -0 - 0 is
        # -0, min/max order -0 below +0, fmod takes the dividend's sign), with operands and
        # literals a shader compiler would otherwise fold
        map_case(f"{n}_signed_zeros", [("a", t, za), ("b", t, zb)], [
            ("add", t, lambda x, y: x + y, arr(t, [0.0, 0.0, 0.0, -0.0, 0.0, 0.0, 0.0, 0.0])),
            ("sub", t, lambda x, y: x - y,
             arr(t, [0.0, -0.0, 0.0, 0.0, -0.0, 2.0, -2.0, -2.0])),
            ("mul", t, lambda x, y: x * y,
             arr(t, [0.0, -0.0, -0.0, 0.0, -0.0, -1.0, -1.0, -1.0])),
            ("min", t, ir.min, arr(t, [0.0, -0.0, -0.0, -0.0, -0.0, -1.0, -1.0, -1.0])),
            ("max", t, ir.max, arr(t, [0.0, 0.0, 0.0, -0.0, 0.0, 1.0, 1.0, 1.0])),
            ("plus_zero", t, lambda x, y: x + t(0.0),
             arr(t, [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, -1.0, -1.0])),
            ("zero_minus", t, lambda x, y: t(0.0) - x,
             arr(t, [0.0, 0.0, 0.0, 0.0, 0.0, -1.0, 1.0, 1.0])),
            ("times_zero", t, lambda x, y: x * t(0.0),
             arr(t, [0.0, -0.0, 0.0, -0.0, -0.0, 0.0, -0.0, -0.0])),
            *([] if t is ir.f64 else [("rem", t, lambda x, y: (x * 4.0) % (y * 2.0),
                                        arr(t, [NAN, NAN, NAN, NAN, NAN, 0.0, -0.0, -0.0]))]),
        ]),
        map_case(f"{n}_exact_unary", [("x", t, u)], [
            ("neg", t, lambda v: -v, -u), ("abs", t, abs, np.abs(u)),
            ("floor", t, ir.floor, np.floor(u)), ("ceil", t, ir.ceil, np.ceil(u)),
        ]),
        # ties go to the even neighbour; the sign of a zero result is the operand's
        map_case(f"{n}_round_trunc_isnan", [("x", t, ties)], [
            ("round", t, ir.round, arr(t, [0.0, 2.0, 2.0, -0.0, -2.0, -2.0, -0.0, 4.0, -4.0, 0.0,
                                            -0.0, INF, -INF, NAN, 100.0, 7.0])),
            ("trunc", t, ir.trunc, arr(t, [0.0, 1.0, 2.0, -0.0, -1.0, -2.0, -0.0, 3.0, -3.0, 0.0,
                                            -0.0, INF, -INF, NAN, 100.0, 7.0])),
            ("isnan", b_, ir.isnan, [v != v for v in ties]),
        ]),
        # (its own case: a backend may refuse it on f64)
        map_case(f"{n}_isinf", [("x", t, ties)], [
            ("isinf", b_, ir.isinf, [abs(float(v)) == INF for v in ties]),
        ]),
        map_case(f"{n}_compare_nan", [("a", t, ca), ("b", t, cb)], [
            ("eq", b_, lambda x, y: x == y, ca == cb), ("ne", b_, lambda x, y: x != y, ca != cb),
            ("lt", b_, lambda x, y: x < y, ca < cb), ("le", b_, lambda x, y: x <= y, ca <= cb),
            ("gt", b_, lambda x, y: x > y, ca > cb), ("ge", b_, lambda x, y: x >= y, ca >= cb),
        ]),
        map_case(f"{n}_transcendental", [("x", t, x)], [
            ("sqrt", t, ir.sqrt, np.sqrt(x)),
            *((op, t, getattr(ir, op), F64_CORRECTLY_ROUNDED[op] if t is ir.f64
               else correctly_rounded(getattr(np, op), x)) for op in ("exp", "log", "sin", "cos")),
        # every type held to the correctly rounded bits: f64 to MPFR's (numpy's own f64
        # functions depend on the host), f16 and f32 to f64's rounded once
        ]),
        # C's special cases among ordinary values: negative bases to odd, even and
        # non-integer powers, signed zeros, 1 ** NaN, (-1) ** inf
        # (f64: MPFR's bits, held to identical bytes, as f64_transcendental)
        map_case(f"{n}_transcendental_more", [("x", t, px), ("y", t, py)], [
            *((op, t, lambda v, _, op=op: getattr(ir, op)(v),
               F64_MORE_CORRECTLY_ROUNDED[op] if t is ir.f64 else
               correctly_rounded(getattr(np, op), px))
              for op in ("tan", "tanh", "exp2", "log2")),
            ("pow", t, ir.pow, F64_MORE_CORRECTLY_ROUNDED["pow"] if t is ir.f64 else
             correctly_rounded_pow(px, py)),
            ("atan2", t, lambda v, w: ir.atan2(w, v), F64_MORE_CORRECTLY_ROUNDED["atan2"]
             if t is ir.f64 else correctly_rounded(np.arctan2, py, px)),
        ]),
        # fma is a * b + c rounded twice, in the type (docs/semantics.md); the last two
        # lanes cancel: fused, they would keep the product's rounding error
        map_case(f"{n}_fma", [("a", t, fma_a), ("b", t, fma_b), ("c", t, fma_c)], [
            ("fma", t, ir.fma, fma_a * fma_b + fma_c),
        ]),
    ]


CASES = [c for t in (ir.f32, ir.f16, ir.f64) for c in _float_cases(t)]
