"""Tables in WGSL: a constant array read at any index, 0 past its end. Pure text and
words, for lowering.py.

Every table of a kernel lives in one read-only storage buffer, ``vyre_tables``, made once
with the kernel (pipelines.py) and bound with its buffers. A module-scope array would be
a per-invocation copy: SPIR-V indexes only variables, so a ``var<private>`` array (or a
constant one indexed at run time) is written into each invocation's memory before its
first read, which lavapipe pays per lane (the math library's tables made ``log2`` 2.5x
its cost). In the buffer a table is its words, one ``u32`` an element (an 8- or 16-bit
one in its low bits) or two for an f64 (low word first), then one 0 element that an index
past the end reads. The compiler cannot see a buffer's contents, so no element folds into
the code around it; an element is made the table's type with the bitcasts of
``bitcasts.py``, an f64 from its two words with ``vyre_f64_of_words``. 64-bit integers
never reach here (the lowering refuses them: WGSL has none).
"""

from __future__ import annotations

import numpy as np

from vyre_core.ir.dtypes import DType
from vyre_wgpu import bitcasts

#: The buffer's name in WGSL.
BUFFER = "vyre_tables"
_UNSIGNED = {8: DType.U8, 16: DType.U16, 32: DType.U32}


class Tables:
    """The tables of one kernel, each stored once, at a word offset of the buffer."""

    def __init__(self) -> None:
        self._offsets: dict[tuple[DType, tuple[int, ...]], int] = {}
        self._words: list[int] = []

    def offset(self, dtype: DType, bits: tuple[int, ...]) -> int:
        """The word where the table of these ``bits`` starts, stored on first use."""
        key = dtype, bits
        if key not in self._offsets:
            self._offsets[key] = len(self._words)
            for b in (*bits, 0):
                self._words += [b & 0xFFFFFFFF, b >> 32] if dtype.bits == 64 else [b]
        return self._offsets[key]

    def data(self) -> bytes:
        """The buffer's bytes (empty when the kernel reads no table)."""
        return np.array(self._words, np.uint32).tobytes()


def declaration(binding: int) -> str:
    """The buffer's binding in WGSL."""
    return f"@group(0) @binding({binding}) var<storage, read> {BUFFER}: array<u32>;"


def element(offset: int, dtype: DType, count: int, index: str,
            hidden_zero: str) -> tuple[str, dict[str, str]]:
    """The WGSL of element ``index`` (a u32 expression) of the table of ``count`` values
    at word ``offset``, in ``dtype``'s carrier, and the helpers it calls."""
    position = f"min({index}, {count}u)"
    if dtype.bits == 64:
        at = f"{offset}u + 2u * {position}"
        word = f"vec2<u32>({BUFFER}[{at}], {BUFFER}[{at} + 1u])"
        return f"vyre_f64_of_words({word})", {"vyre_f64_of_words": _f64_of_words(hidden_zero)}
    return bitcasts.bitcast(_UNSIGNED[dtype.bits], dtype, f"{BUFFER}[{offset}u + {position}]")


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
