"""Tables: element ``index`` of a constant array, 0 past its end, worked out by hand from
docs/semantics.md ("Tables"): each element's own bits (-0, infinities, subnormals), every
width, and an index past the end (u32's largest among them) reading 0."""

from __future__ import annotations

from vyre_core import ir

from .base import INF, arr, map_case

u8, i8, i16, f16, u32, i32, f32, f64 = (ir.u8, ir.i8, ir.i16, ir.f16, ir.u32, ir.i32,
                                        ir.f32, ir.f64)

AT = [0, 1, 2, 3, 4, 5, 2**32 - 1]


def _read(values: list, dtype: ir.DType):
    return lambda i: ir.table(values, i, dtype)


CASES = [
    map_case("table_f32", [("i", u32, arr(u32, AT))], [
        ("out", f32, _read([1.5, -0.0, INF, 2.0**-149, -(2.0**-126)], f32),
         [1.5, -0.0, INF, 2.0**-149, -(2.0**-126), 0.0, 0.0]),
    ]),
    map_case("table_integers", [("i", u32, arr(u32, AT))], [
        ("u32s", u32, _read([7, 2**32 - 1, 0, 2**31], u32), [7, 2**32 - 1, 0, 2**31, 0, 0, 0]),
        ("i32s", i32, _read([-1, -(2**31), 2**31 - 1], i32), [-1, -(2**31), 2**31 - 1, 0, 0, 0, 0]),
        ("i16s", i16, _read([-32768, 32767, -1, 300, 2], i16), [-32768, 32767, -1, 300, 2, 0, 0]),
        ("u8s", u8, _read([255, 128, 0, 1, 2, 3], u8), [255, 128, 0, 1, 2, 3, 0]),
        ("i8s", i8, _read([-128, 127], i8), [-128, 127, 0, 0, 0, 0, 0]),
    ]),
    map_case("table_f16", [("i", u32, arr(u32, AT))], [
        ("out", f16, _read([1.5, -0.0, INF, 2.0**-24, -65504.0, 0.1], f16),
         [1.5, -0.0, INF, 2.0**-24, -65504.0, 0.1, 0.0]),
    ]),
    map_case("table_f64", [("i", u32, arr(u32, AT))], [
        ("out", f64, _read([1 / 3, -0.0, INF, 5e-324, -(2.0**-1022), 1.7976931348623157e308],
                           f64),
         [1 / 3, -0.0, INF, 5e-324, -(2.0**-1022), 1.7976931348623157e308, 0.0]),
    ]),
]
