"""Casts: u32/i32 reinterpretation, saturating float->int, rounding int->float and
float->float, bool<->number. Values are worked out by hand from docs/semantics.md."""

from __future__ import annotations

import numpy as np

from vyre_core import ir

from .base import INF, MAX, MIN, NAN, UMAX, arr, map_case

u32, i32, f32, f16, f64, b_ = ir.u32, ir.i32, ir.f32, ir.f16, ir.f64, ir.bool_


def _to(dtype: ir.DType):
    return lambda v: ir.cast(v, dtype)


CASES = [
    map_case("cast_u32_i32_reinterpret", [
        ("x", u32, arr(u32, [0, 1, 0x7FFFFFFF, 0x80000000, UMAX, 0xFFFFFFFE])),
        ("y", i32, arr(i32, [0, -1, MIN, MAX, -2, 5])),
    ], [
        ("to_i32", i32, lambda x, y: x.cast(i32), [0, 1, MAX, MIN, -1, -2]),
        ("to_u32", u32, lambda x, y: y.cast(u32),
         [0, UMAX, 0x80000000, 0x7FFFFFFF, 0xFFFFFFFE, 5]),
        ("round_trip", u32, lambda x, y: x.cast(i32).cast(u32),
         [0, 1, 0x7FFFFFFF, 0x80000000, UMAX, 0xFFFFFFFE]),
    ]),
    map_case("cast_f32_to_int_saturating", [
        ("x", f32, arr(f32, [1.5, -1.5, 0.99, -0.99, 3e9, 1e10, -1e10, INF, -INF, NAN,
                             4294967040.0, 4294967296.0, 2147483520.0, 2147483648.0,
                             -2147483648.0, -2147483904.0])),
    ], [
        ("to_u32", u32, _to(u32), [1, 0, 0, 0, 3000000000, UMAX, 0, UMAX, 0, 0, 4294967040,
                                   UMAX, 2147483520, 2147483648, 0, 0]),
        ("to_i32", i32, _to(i32), [1, -1, 0, 0, MAX, MAX, MIN, MAX, MIN, 0, MAX, MAX,
                                   2147483520, MAX, MIN, MIN]),
    ]),
    map_case("cast_f64_to_int_saturating", [
        ("x", f64, arr(f64, [2147483647.5, 2147483648.0, -2147483648.9, -2147483649.0,
                             4294967295.9, 4294967296.0, 1e300, -1e300, NAN, -0.5, INF])),
    ], [
        ("to_u32", u32, _to(u32), [2147483647, 2147483648, 0, 0, UMAX, UMAX, UMAX, 0, 0, 0,
                                   UMAX]),
        ("to_i32", i32, _to(i32), [MAX, MAX, MIN, MIN, MAX, MAX, MAX, MIN, 0, 0, MAX]),
    ]),
    map_case("cast_f16_to_int_saturating", [
        ("x", f16, arr(f16, [65504.0, -65504.0, INF, -INF, NAN, 1.5, -2.5, 0.0])),
    ], [
        ("to_u32", u32, _to(u32), [65504, 0, UMAX, 0, 0, 1, 0, 0]),
        ("to_i32", i32, _to(i32), [65504, -65504, MAX, MIN, 0, 1, -2, 0]),
    ]),
    map_case("cast_int_to_f32_rounding", [
        ("x", u32, arr(u32, [0, 1, 16777216, 16777217, 16777219, UMAX, 2147483648, 123456789])),
        ("y", i32, arr(i32, [0, -1, MIN, MAX, -16777217, -16777219, 33554435, 7])),
    ], [
        ("from_u32", f32, lambda x, y: x.cast(f32),
         [0.0, 1.0, 16777216.0, 16777216.0, 16777220.0, 4294967296.0, 2147483648.0,
          123456792.0]),
        ("from_i32", f32, lambda x, y: y.cast(f32),
         [0.0, -1.0, -2147483648.0, 2147483648.0, -16777216.0, -16777220.0, 33554436.0, 7.0]),
    ]),
    map_case("cast_int_bool_to_f16", [
        ("x", u32, arr(u32, [0, 1, 2049, 2051, 65504, 65519, 65520, UMAX])),
        ("y", i32, arr(i32, [-1, -2049, -65519, -65520, MIN, 1000, 2051, 0])),
        ("b", b_, arr(u32, [0, 1, 7, 0, 0, 0, 0, 1])),
    ], [
        ("from_u32", f16, lambda x, y, b: x.cast(f16),
         [0.0, 1.0, 2048.0, 2052.0, 65504.0, 65504.0, INF, INF]),
        ("from_i32", f16, lambda x, y, b: y.cast(f16),
         [-1.0, -2048.0, -65504.0, -INF, -INF, 1000.0, 2052.0, 0.0]),
        ("from_bool", f16, lambda x, y, b: b.cast(f16), [0.0, 1.0, 1.0, 0, 0, 0, 0, 1.0]),
    ]),
    map_case("cast_int_bool_to_f64_exact", [
        ("x", u32, arr(u32, [UMAX, 0, 16777217, 0x80000001])),
        ("y", i32, arr(i32, [MIN, MAX, -16777217, 0])),
        ("b", b_, arr(u32, [0, 1, 0xFFFFFFFF, 0])),
    ], [
        ("from_u32", f64, lambda x, y, b: x.cast(f64),
         [4294967295.0, 0.0, 16777217.0, 2147483649.0]),
        ("from_i32", f64, lambda x, y, b: y.cast(f64),
         [-2147483648.0, 2147483647.0, -16777217.0, 0.0]),
        ("from_bool", f64, lambda x, y, b: b.cast(f64), [0.0, 1.0, 1.0, 0.0]),
    ]),
    map_case("cast_f64_f32_rounding", [
        ("x", f64, arr(f64, [1 + 2**-24, 1 + 3 * 2**-24, 1e39, -1e39, 0.1, NAN, -0.0, 1e-50])),
        ("y", f32, arr(f32, [0.1, 3.0, -INF, 16777217.0, 1.5, NAN, 2**-126, 1e38])),
    ], [
        ("to_f32", f32, lambda x, y: x.cast(f32),
         [1.0, 1 + 2**-22, INF, -INF, np.float32(0.1), NAN, -0.0, 0.0]),
        ("to_f64", f64, lambda x, y: y.cast(f64),
         [float(np.float32(0.1)), 3.0, -INF, 16777216.0, 1.5, NAN, 2**-126,
          float(np.float32(1e38))]),
    ]),
    map_case("cast_f32_f16_rounding", [
        ("x", f32, arr(f32, [1.0, 65504.0, 65520.0, 1e6, -1e6, 1 + 2**-11, 1 + 3 * 2**-11,
                             0.1, NAN])),
        ("y", f16, arr(f16, [1.0, 65504.0, INF, -2.5, 0.1, 2**-14, -0.0, 1000.5, NAN])),
    ], [
        ("to_f16", f16, lambda x, y: x.cast(f16),
         [1.0, 65504.0, INF, INF, -INF, 1.0, 1 + 2**-9, np.float16(np.float32(0.1)), NAN]),
        ("to_f32", f32, lambda x, y: y.cast(f32),
         [1.0, 65504.0, INF, -2.5, float(np.float16(0.1)), 2**-14, -0.0, 1000.5, NAN]),
    ]),
    map_case("cast_f64_f16_rounding", [
        # 1 + 2**-11 + 2**-40 rounds up when converted once, but to 1.0 through f32.
        ("x", f64, arr(f64, [1 + 2**-11 + 2**-40, 1 + 2**-11, 65520.0, -7e4, 1e-10, 0.1, NAN])),
        ("y", f16, arr(f16, [2**-14, -65504.0, 0.1, 1 + 2**-10, -INF, 3.0, -0.0])),
    ], [
        ("to_f16", f16, lambda x, y: x.cast(f16),
         [1 + 2**-10, 1.0, INF, -INF, 0.0, np.float16(0.1), NAN]),
        ("to_f64", f64, lambda x, y: y.cast(f64),
         [2**-14, -65504.0, float(np.float16(0.1)), 1 + 2**-10, -INF, 3.0, -0.0]),
    ]),
    map_case("cast_bool_int_f32", [
        ("b", b_, arr(u32, [0, 1, 7, 0x80000000])),
        ("x", u32, arr(u32, [0, 1, 0x80000000, 3])),
        ("y", i32, arr(i32, [0, -1, MIN, 0])),
        ("f", f32, arr(f32, [-2.75, 2.75, 0.5, -0.0])),
    ], [
        ("b_to_u32", u32, lambda b, x, y, f: b.cast(u32), [0, 1, 1, 1]),
        ("b_to_i32", i32, lambda b, x, y, f: b.cast(i32), [0, 1, 1, 1]),
        ("b_to_f32", f32, lambda b, x, y, f: b.cast(f32), [0.0, 1.0, 1.0, 1.0]),
        ("u32_to_bool", b_, lambda b, x, y, f: x.cast(b_), [0, 1, 1, 1]),
        ("i32_to_bool", b_, lambda b, x, y, f: y.cast(b_), [0, 1, 1, 0]),
        ("f32_to_bool_by_compare", b_, lambda b, x, y, f: f != 0.0, [1, 1, 1, 0]),
        ("f32_to_i32", i32, lambda b, x, y, f: f.cast(i32), [-2, 2, 0, 0]),
        ("f32_to_u32", u32, lambda b, x, y, f: f.cast(u32), [0, 2, 0, 0]),
    ]),
]
