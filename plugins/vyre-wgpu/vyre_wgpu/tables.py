"""Tables in WGSL: a constant array read at any index, 0 past its end. Pure text, for
lowering.py.

A table is a module-scope ``var<private>`` array of its bits (a variable: WGSL lets any
index read a variable, where dynamic indexing of a constant array is not promised), one
``u32`` an element (an 8- or 16-bit one in its low bits) or a ``vec2<u32>`` for an f64,
and one 0 element after the last, which an index past the end reads. An element read is
xored with a word the compiler cannot see (the lowering's ``OPAQUE_ZERO``, as literals
are) and made the table's type with the bitcasts of ``bitcasts.py``; an f64 from its two
words with ``vyre_f64_of_words``. 64-bit integers never reach here (the lowering refuses
them: WGSL has none).
"""

from __future__ import annotations

from vyre_core.ir.dtypes import DType
from vyre_wgpu import bitcasts

_UNSIGNED = {8: DType.U8, 16: DType.U16, 32: DType.U32}


def declaration(name: str, dtype: DType, bits: tuple[int, ...]) -> str:
    """The module-scope array holding a table's bits, and the 0 after them."""
    wide = dtype.bits == 64
    kind = "vec2<u32>" if wide else "u32"
    values = ", ".join(f"vec2<u32>({b & 0xFFFFFFFF}u, {b >> 32}u)" if wide else f"{b}u"
                       for b in (*bits, 0))
    return f"var<private> {name}: array<{kind}, {len(bits) + 1}> = " \
           f"array<{kind}, {len(bits) + 1}>({values});"


def element(name: str, dtype: DType, count: int, index: str,
            hidden_zero: str) -> tuple[str, dict[str, str]]:
    """The WGSL of element ``index`` (a u32 expression) of the table ``name`` of ``count``
    values, in ``dtype``'s carrier, and the helpers it calls."""
    if dtype.bits == 64:
        word = f"({name}[min({index}, {count}u)] ^ vec2<u32>({hidden_zero}))"
        return f"vyre_f64_of_words({word})", {"vyre_f64_of_words": _f64_of_words(hidden_zero)}
    word = f"({name}[min({index}, {count}u)] ^ {hidden_zero})"
    return bitcasts.bitcast(_UNSIGNED[dtype.bits], dtype, word)


def _f64_of_words(hidden_zero: str) -> str:
    """The f64 of the bits ``w.y:w.x`` (WGSL has no 64-bit bitcast): the significand as an
    exact f64 integer, scaled by two normal powers of two, the first product behind the
    hidden word (merged, the two make one scaling to a subnormal result, which gives 0 on
    some drivers); infinities and NaN through f32, which holds them."""
    return f"""\
fn vyre_f64_of_words(w: vec2<u32>) -> f64 {{
    let e = (w.y >> 20u) & 0x7ffu;
    let m = f64(w.y & 0xfffffu) * 4294967296.0lf + f64(w.x);
    var first = -537i;
    var rest = -537i;
    var whole = m;
    if (e != 0u) {{
        first = (i32(e) - 1075i) / 2i;
        rest = i32(e) - 1075i - first;
        whole = m + 4503599627370496.0lf;
    }}
    let part = whole * ldexp(1.0lf, first);
    var v = select(part, -part, {hidden_zero} != 0u) * ldexp(1.0lf, rest);
    if (e == 0x7ffu) {{
        v = f64(bitcast<f32>(select(0x7f800000u, 0x7fc00000u, m != 0.0lf) ^ {hidden_zero}));
    }}
    return select(v, -v, (w.y & 0x80000000u) != 0u);
}}"""
