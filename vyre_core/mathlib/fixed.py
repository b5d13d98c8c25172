"""Fixed-point numbers of u32 limbs in the IR: what an accurate path needs beyond a pair's
48 bits (``atan2``'s: about 90), exact where float-float is not.

A number is a tuple of u32 values, the most significant first, read as a fraction: limb
``i`` weighs ``2^(-32 (i + 1))`` (a caller may read the same limbs with another scale,
as ``to_pair`` takes one). The IR's integer operations (``mulhi`` for a product's high
word) are exact on every backend, so the only errors are the truncations each function
names; addition and subtraction wrap modulo 1 and are exact. Everything binds what it
makes with ``ff.let``, and nothing here compares or selects: carries, borrows and choices
are bit operations on words (a ``select`` is a branch in numba's helpers, and their
compile time grows with the branches, not the operations). tests/test_mathlib_fixed.py
holds each function to Python's integers.
"""

from __future__ import annotations

from vyre_core.ir import expressions as ir
from vyre_core.ir.builder import Kernel
from vyre_core.ir.dtypes import DType
from vyre_core.ir.values import Val, cast, lit
from vyre_core.mathlib import ff
from vyre_core.mathlib.ff import FF

F32, I32, U32 = DType.F32, DType.I32, DType.U32
Fixed = tuple[Val, ...]

_ZERO, _ONE = lit(0, U32), lit(1, U32)


def const(value: int, limbs: int) -> Fixed:
    """The integer ``value`` (below ``2^(32 limbs)``) as literal limbs: a fraction
    ``value / 2^(32 limbs)``."""
    return tuple(lit((value >> (32 * (limbs - 1 - i))) & 0xFFFFFFFF, U32)
                 for i in range(limbs))


def mask(bit: Val) -> Val:
    """All ones where the u32 ``bit`` is 1, 0 where it is 0."""
    return _ZERO - bit


def is_zero(v: Val) -> Val:
    """1 where the u32 ``v`` is 0, else 0."""
    return ((v | (_ZERO - v)) >> 31) ^ 1


def pick(bit: Val, a: Val, b: Val) -> Val:
    """``a`` where the u32 ``bit`` is 1, ``b`` where it is 0."""
    return b ^ ((a ^ b) & mask(bit))


def either(k: Kernel, bit: Val, a: Fixed, b: Fixed) -> Fixed:
    """``a`` where the u32 ``bit`` is 1, else ``b``, limb by limb."""
    m = ff.let(k, mask(bit))
    return tuple(ff.let(k, y ^ ((x ^ y) & m)) for x, y in zip(a, b, strict=True))


def add(k: Kernel, a: Fixed, b: Fixed) -> Fixed:
    """``a + b`` modulo 1, exactly (each carry the top bit of the full adder's
    ``(x & y) | ((x | y) & ~s)``)."""
    out, carry = [], None
    for x, y in zip(reversed(a), reversed(b), strict=True):
        s = ff.let(k, x + y if carry is None else x + y + carry)
        carry = ff.let(k, ((x & y) | ((x | y) & ~s)) >> 31)
        out.append(s)
    return tuple(reversed(out))


def sub(k: Kernel, a: Fixed, b: Fixed) -> Fixed:
    """``a - b`` modulo 1, exactly (each borrow the top bit of
    ``(~x & y) | ((~x | y) & d)``)."""
    out, borrow = [], None
    for x, y in zip(reversed(a), reversed(b), strict=True):
        d = ff.let(k, x - y if borrow is None else x - y - borrow)
        borrow = ff.let(k, ((~x & y) | ((~x | y) & d)) >> 31)
        out.append(d)
    return tuple(reversed(out))


def negative(a: Fixed) -> Val:
    """1 where ``a``, read as a two's complement fraction in [-1/2, 1/2), is negative,
    else 0."""
    return a[0] >> 31


def magnitude(k: Kernel, a: Fixed) -> Fixed:
    """``|a|`` of a two's complement fraction (``negative``)."""
    return either(k, ff.let(k, negative(a)), sub(k, const(0, len(a)), a), a)


def mul(k: Kernel, a: Fixed, b: Fixed, limbs: int) -> Fixed:
    """The top ``limbs`` limbs of the fractions' product, below it by less than
    ``(len(a) + len(b)) 2^(-32 (limbs + 1)) + 2^(-32 limbs)``: every partial product
    down to one guard limb, whose carries are kept, and no lower word."""
    columns: list[list[Val]] = [[] for _ in range(limbs + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            if i + j < limbs:
                columns[i + j].append(ff.let(k, ir.mulhi(x, y)))
                columns[i + j + 1].append(ff.let(k, x * y))
            elif i + j == limbs:
                columns[limbs].append(ff.let(k, ir.mulhi(x, y)))
    out: list[Val] = []
    carry = None
    for column in reversed(columns):
        terms = column + ([carry] if carry is not None else [])
        s, c = (terms[0] if terms else _ZERO), None
        for t in terms[1:]:
            total = ff.let(k, s + t)
            wrapped = ((s & t) | ((s | t) & ~total)) >> 31
            c = wrapped if c is None else c + wrapped
            s = total
        carry = _ZERO if c is None else ff.let(k, c)
        out.append(s)
    return tuple(reversed(out[1:]))


def _words(k: Kernel, a: Fixed, words: Val, most: int, left: bool) -> list[Val]:
    """``a`` moved by ``words`` (u32, up to ``most``) whole limbs, right or left, zeros
    coming in: one stage a bit of ``words``, as a barrel shifter."""
    moved = list(a)
    n, stage = len(a), 0
    while (1 << stage) <= most:
        step = 1 << stage
        bit = ff.let(k, mask((words >> stage) & 1))
        shifted = ([_ZERO] * step + moved[:n - step] if not left
                   else moved[step:] + [_ZERO] * step)[:n]
        moved = [ff.let(k, m ^ ((s ^ m) & bit)) if s is not m else m
                 for m, s in zip(moved, shifted, strict=True)]
        stage += 1
    return moved


def shr(k: Kernel, a: Fixed, amount: Val | int, most: int | None = None) -> Fixed:
    """``a / 2^amount``, truncated: ``amount`` a Python int, or a u32 up to ``most``
    (default: any; from ``32 len(a)`` on, 0)."""
    n = len(a)
    if isinstance(amount, int):
        words, bits = divmod(min(amount, 32 * n), 32)
        moved = [_ZERO] * words + list(a[:n - words])
        return tuple(_funnel(moved, i, bits) if bits else moved[i] for i in range(n))
    most = 32 * n if most is None else min(most, 32 * n)
    if most == 32 * n:
        amount = ff.let(k, ir.min(amount, 32 * n))
    bits = ff.let(k, amount & 31)
    moved = _words(k, a, ff.let(k, amount >> 5), most >> 5, left=False)
    back = ff.let(k, 31 - bits)  # (the spilled bits: << 1 << back, 0 when bits is 0)
    return tuple(ff.let(k, (moved[i] >> bits) | ((moved[i - 1] << 1) << back) if i
                        else moved[i] >> bits) for i in range(n))


def _funnel(moved: list[Val], i: int, bits: int) -> Val:
    """Limb ``i`` of ``moved`` shifted right by ``bits`` (1 to 31) bits."""
    high = moved[i] >> bits
    return high | (moved[i - 1] << (32 - bits)) if i else high


def shl(k: Kernel, a: Fixed, amount: Val) -> Fixed:
    """``a * 2^amount`` modulo 1, for a u32 ``amount`` below ``32 len(a)``."""
    n = len(a)
    bits = ff.let(k, amount & 31)
    moved = _words(k, a, ff.let(k, amount >> 5), n - 1, left=True)
    back = ff.let(k, 31 - bits)
    return tuple(ff.let(k, (moved[i] << bits) | ((moved[i + 1] >> 1) >> back)
                        if i + 1 < n else moved[i] << bits) for i in range(n))


def from_pair(k: Kernel, p: FF) -> Fixed:
    """A pair with ``hi`` in [1/2, 1) as two limbs, truncated below 2^-64: ``hi 2^32``
    is an integer, ``lo 2^32`` (below 2^8 in size) an integer and a fraction, each part
    exact in f32."""
    low = ff.let(k, p.lo * 4294967296.0)
    whole = ff.let(k, ir.floor(low))
    first = cast(p.hi * 4294967296.0, U32) + cast(cast(whole, I32), U32)
    return ff.let(k, first), ff.let(k, cast((low - whole) * 4294967296.0, U32))


def to_pair(k: Kernel, a: Fixed, exponent: Val) -> tuple[FF, Val]:
    """``A 2^exponent``, ``A`` the limbs read as one integer (three limbs), as ``2^scale
    (hi + lo)``: its top 48 bits with every lower bit ORed into the last (round to odd),
    so any rounding of it to 46 bits or fewer is that of the exact value. ``A`` nonzero;
    ``exponent`` an i32."""
    if len(a) != 3:
        raise TypeError("to_pair reads three limbs")
    zeros = [ff.let(k, ir.clz(limb)) for limb in a]  # (32 for a zero limb)
    lead = ff.let(k, zeros[0] + (mask(zeros[0] >> 5) & (
        zeros[1] + (mask(zeros[1] >> 5) & zeros[2]))))
    top, mid, low = shl(k, a, lead)
    hi = cast(top >> 8, F32)
    sticky = is_zero((mid & 0xFFFF) | low) ^ 1
    lo = cast((((top & 0xFF) << 16) | (mid >> 16)) | sticky, F32) * 2.0**-24
    scale = ff.let(k, exponent + 72 - cast(lead, I32))
    return ff.fast_two_sum(k, hi, lo), scale
