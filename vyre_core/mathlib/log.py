"""``ln x``, correctly rounded in f32 and f16 (docs/design-42.md, sections 2.4 and 8).

log2.py's reduction and series (imported, not copied), with a table of natural logarithms
in place of its ``log2`` one, so the same bits come from every backend that runs the basic
operations as written (f32 pairs, no f64, no ``fma``):

- ``x = 2^e m / c_j (1 + r)`` by ``log2.reduce`` (subnormal ``x`` normalized with integer
  operations; ``r`` exact as a pair, ``|r| <= 2^-8``; ``e = 0`` and ``c_j`` 1 or 1/2 for
  ``x`` near 1, below as above, so nothing cancels there) and ``ln(1 + r)`` as a pair by
  ``log2.log1p`` (relative error about 2^-48).
- ``ln x = e ln 2 + (-ln c_j) + ln(1 + r)``: ``-ln c_j`` (``-ln(2 c_j)`` in the halved
  cells) as a pair from two tables; ``e ln 2`` with ln 2 in three parts, the first of 16
  significant bits so that ``e L1`` is exact (``|e| <= 149``), ``e L2`` exactly as a pair
  (``two_prod``), joined by ``fast_two_sum`` and ``e L3`` added to its low part. The
  table's pair and the series' are added in float-float, then ``e ln 2``'s: a normalized
  pair within about 2^-47 (relative) of ``ln x``, exactly +0 at ``x = 1``.

The f32 result is the pair's ``hi`` (the last step is a ``fast_two_sum``: ``hi`` is the
exact sum rounded to nearest even, the one rounding wanted; no result is subnormal, the
least nonzero ``|ln x|`` being about 2^-24). f16 is the same pair rounded once to f16 by
``ff.round_ff``. ``x = 1`` is the only finite input with a rational result (Lindemann);
the f32 inputs whose pair lies too near a rounding boundary are listed with their correct
results in ``_EXCEPTION_INPUTS``, found by running every f32 input against MPFR
(``tools/math_exceptions.py log`` with the list empty).

Special values (docs/semantics.md, Floats), as ``log2``'s: NaN for NaN and below zero,
``-inf`` for ``+-0``, ``+inf`` for ``+inf``; ``ln 1 = +0``.
"""

from __future__ import annotations

from vyre_core.ir.builder import Kernel, Val, cast, table
from vyre_core.ir.dtypes import DType
from vyre_core.mathlib import exceptions, ff, log2
from vyre_core.mathlib.ff import FF

F32 = DType.F32



# Made by ``tools/log_constants.py`` (gmpy2 at 200 bits, each part rounded once to f32):
# ``-ln(c_j)`` (``-ln(2 c_j)`` from ``j = 53``) as ``hi + lo`` for log2.py's ``c_j``; ln 2
# as L1 (16 significant bits) + L2 + L3.
_T_HI = ff.from_bits([
    0x80000000, 0x3BFF4EF5, 0x3C7E233B, 0x3CBDD439, 0x3CFC1D08, 0x3D1CF744, 0x3D3BA4D5,
    0x3D5A1874, 0x3D785284, 0x3D8B2A0E, 0x3D9A0EFF, 0x3DA8D85A, 0x3DB786A5, 0x3DC61A3C,
    0x3DD4936C, 0x3DE2F2AF, 0x3DF13831, 0x3DFF648A, 0x3E06BBF0, 0x3E0DB953, 0x3E14AA9B,
    0x3E1B8FE1, 0x3E22695E, 0x3E293734, 0x3E2FF98D, 0x3E36B07E, 0x3E3D5C4D, 0x3E43FD0E,
    0x3E4A92DE, 0x3E511DF4, 0x3E579E6B, 0x3E5E145E, 0x3E647FEF, 0x3E6AE14C, 0x3E713891,
    0x3E7785D6, 0x3E7DC93C, 0x3E820173, 0x3E851976, 0x3E882CBA, 0x3E8B3B50, 0x3E8E453F,
    0x3E914A97, 0x3E944B69, 0x3E9747BF, 0x3E9A3FA5, 0x3E9D332F, 0x3EA0225F, 0x3EA30D4A,
    0x3EA5F3F8, 0x3EA8D67A, 0x3EABB4D4, 0x3EAE8F1D, 0xBEB17EE0, 0xBEAEACA6, 0xBEABDE65,
    0xBEA9140C, 0xBEA64D97, 0xBEA38AFA, 0xBEA0CC23, 0xBE9E110F, 0xBE9B59B2, 0xBE98A600,
    0xBE95F5F1, 0xBE93497D, 0xBE90A099, 0xBE8DFB3D, 0xBE8B595E, 0xBE88BAEE, 0xBE861FED,
    0xBE83884A, 0xBE80F407, 0xBE7CC620, 0xBE77AAC7, 0xBE7295E6, 0xBE6D8778, 0xBE687F6B,
    0xBE637DAB, 0xBE5E8224, 0xBE598CC9, 0xBE549D92, 0xBE4FB468, 0xBE4AD143, 0xBE45F40A,
    0xBE411CBA, 0xBE3C4B3B, 0xBE377F80, 0xBE32B984, 0xBE2DF92C, 0xBE293E78, 0xBE248946,
    0xBE1FD9A2, 0xBE1B2F6F, 0xBE168AAB, 0xBE11EB38, 0xBE0D511A, 0xBE08BC46, 0xBE042C9D,
    0xBDFF4451, 0xBDF639AA, 0xBDED392E, 0xBDE442A6, 0xBDDB563E, 0xBDD273B2, 0xBDC99AE4,
    0xBDC0CBF1, 0xBDB80690, 0xBDAF4ACE, 0xBDA6987C, 0xBD9DEFA7, 0xBD95501D, 0xBD8CB9EA,
    0xBD842CBE, 0xBD77519C, 0xBD665BB1, 0xBD55778E, 0xBD44A523, 0xBD33E47D, 0xBD23352F,
    0xBD1296E7, 0xBD0209EC, 0xBCE31B98, 0xBCC244DE, 0xBCA18F38, 0xBC80FA74, 0xBC410BB5,
    0xBC0062E4, 0xBB7FE5EF, 0x80000000])
_T_LO = ff.from_bits([
    0x00000000, 0x2F601C41, 0xAFE23A0B, 0x300166E9, 0x30699B78, 0x30E07E55, 0x3046E276,
    0x30D1BCCB, 0x2D12F553, 0x309476B3, 0x30C37E8C, 0xB12F9DFF, 0x30395B5F, 0xB0F9CC71,
    0x3124AD57, 0xB0290DF9, 0x3162AF3B, 0x2FEDF55E, 0xB125EE2D, 0x31E2F67D, 0xB17C0157,
    0xB19E1709, 0x31ECB7D4, 0xB0D792DB, 0xB1F586AF, 0x31E19D22, 0xB077934C, 0xB0F7CD49,
    0xB1617502, 0xB1C1D453, 0x31A80D0D, 0xB19D2578, 0x317357F5, 0xB1FB0042, 0x2EAD9527,
    0xB1445FF4, 0xB1541BEE, 0x322356C5, 0x318E8A87, 0xB1742DE7, 0x323AD0BD, 0x311AD8F0,
    0xB222E4EA, 0xB229EA6F, 0x320E49E6, 0x3249CA5D, 0xB2191A53, 0x3220C843, 0xB25DCDC2,
    0x320FF330, 0xB22C92B3, 0x31C9E531, 0xB1273096, 0x320D141F, 0x30D9EC01, 0xB25BA9C3,
    0xB23292E2, 0x3237934B, 0xB0B06F6C, 0xAF882C03, 0x3137D0B0, 0x3115372C, 0x321401AC,
    0xB2348CB7, 0x326DF110, 0xB277B00A, 0x3038EDB1, 0xB239A397, 0xB26155C7, 0x31960EC7,
    0x326C40C4, 0x326E9698, 0x31B6ADF5, 0xB1581906, 0xB1DCCABF, 0xB1ABC5FA, 0x319B0602,
    0x31F23555, 0xB08A9D93, 0xB184C361, 0x30E0AFC8, 0xB11F9891, 0x31D12F8B, 0xAEC1F290,
    0xB194AB69, 0x3060B194, 0xB03860E4, 0x312EF019, 0x3115D2FE, 0x2F40AD38, 0x318CDFB2,
    0x31F6807F, 0x31FEB4D3, 0x31C7A083, 0x319B6A62, 0x31BDC4D9, 0xB089F0DB, 0xB0E78814,
    0x30C48880, 0xB0E14105, 0x308F7758, 0x31643BA6, 0xB11AD5AD, 0x305390F2, 0x3029AE0E,
    0xB0E81C7E, 0xB12EAC06, 0xB0B2F235, 0xB15207D0, 0x3102E11F, 0xB088E2E5, 0xAFA32A2F,
    0x31261C68, 0xB000D6F7, 0xB0DDDB16, 0xB0CFB10C, 0xB013F566, 0xB0AD4B46, 0xB005B9FE,
    0x2E66C86F, 0xB09E6444, 0xB04102DF, 0x2FE80DCD, 0xB0585A7B, 0x2FF1D4F0, 0xAEC25793,
    0x2FB54DCE, 0xAECDF261, 0x00000000])
_LN2_1, _LN2_2, _LN2_3 = ff.from_bits([0x3F317200, 0x35BFBE8E, 0x29779ABD])

#: The f32 inputs (their bits, sorted) whose pair rounds the wrong way, and their correctly
#: rounded results' bits (``exceptions.corrected``): 59 of 2^32, most with large ``|ln x|``
#: (past 8, where the pair's last roundings are largest against the result's ulp). Made
#: over every f32 input with the list emptied (``tools/math_exceptions.py log``, cpu).
_EXCEPTION_INPUTS = [
    0x03B0FFA6, 0x03D2F29F, 0x07B2C054, 0x0B265D7B, 0x0F61FF63, 0x111C87F8, 0x145CB6D4,
    0x16A57EA8, 0x18B06F2A, 0x1A21DB87, 0x1A8446CB, 0x1B1CDFA8, 0x1DC9E7C1, 0x22925AD4,
    0x25F12E61, 0x2702172E, 0x2758EEC4, 0x28D6AF22, 0x29FD22F8, 0x2E7A6221, 0x3031622E,
    0x30A201DC, 0x39C31348, 0x39C7B1F9, 0x3C413D3A, 0x3FA66C0B, 0x3FD364D7, 0x4056EE45,
    0x41178FEB, 0x46067543, 0x464D5B2B, 0x4665A9A6, 0x46CA6C75, 0x4BF70DB3, 0x4C08FF78,
    0x4C5D65A5, 0x4CA8A9EE, 0x4DCB02F0, 0x4E85F412, 0x50DFEF2E, 0x51E8644F, 0x526A304F,
    0x5B777193, 0x5B98E163, 0x5BE9C85F, 0x5CAFFB5E, 0x5D8B2D5B, 0x5EE8984E, 0x64E27FA3,
    0x65D890D3, 0x6BE8CF96, 0x6D1F23EB, 0x6E7054F2, 0x6F31A8EC, 0x7405DEE8, 0x74896A73,
    0x789E5998, 0x79E7EC37, 0x7DBDFE04]
_EXCEPTION_RESULTS = [
    0xC2A5B505, 0xC2A55B2D, 0xC29A98D7, 0xC291095F, 0xC2855565, 0xC28085DF, 0xC26F092F,
    0xC262531B, 0xC256FA6F, 0xC24F0163, 0xC24D0A45, 0xC24995D9, 0xC23AB685, 0xC220462D,
    0xC20DA3FB, 0xC207CAC3, 0xC205BF23, 0xC1FAF0E9, 0xC1EE8859, 0xC1BCB6A9, 0xC1A94A4D,
    0xC1A4786F, 0xC0FCAF65, 0xC0FBEFA7, 0xC08E158F, 0x3E8665F9, 0x3F006EF3, 0x3F9B103B,
    0x400FE5E7, 0x4110F651, 0x4117BCF1, 0x41198725, 0x41229929, 0x418A5849, 0x418B2C45,
    0x418F034B, 0x419261B3, 0x419EF46F, 0x41A6B811, 0x41C102B7, 0x41CC65C5, 0x41D2011D,
    0x421B2105, 0x421BF9B9, 0x421DACA7, 0x42221563, 0x4226B0B1, 0x422E4A21, 0x424F7453,
    0x4254D1F9, 0x4276616F, 0x427D2D35, 0x42822F73, 0x42845A89, 0x4291A68D, 0x429316D3,
    0x429E768F, 0x42A1FFB7, 0x42ACB0BF]


def log_f32(k: Kernel, x: Val) -> Val:
    """``ln x`` correctly rounded to f32, for an f32 ``x``."""
    rounded = log2.special(k, x, _core(k, x).hi)
    return exceptions.corrected(k, x, rounded, _EXCEPTION_INPUTS, _EXCEPTION_RESULTS)


def log_f16(k: Kernel, x: Val) -> Val:
    """``ln x`` correctly rounded to f16, for an f16 ``x``: the f32 algorithm's pair
    rounded once to f16."""
    return log2.special(k, x, ff.round_ff(k, _core(k, cast(x, F32)), 0, DType.F16))



def _core(k: Kernel, x: Val) -> FF:
    """``ln x`` as a normalized pair, for a positive finite f32 ``x`` (any other input is
    read as 1 and its result replaced by ``log2.special``)."""
    e, j, r = log2.reduce(k, x)
    frac = ff.add(k, FF(ff.let(k, table(_T_HI, j)), ff.let(k, table(_T_LO, j))),
                  log2.log1p(k, r))
    e_f = ff.let(k, cast(e, F32))
    second = ff.two_prod(k, e_f, _LN2_2)
    scaled = ff.fast_two_sum(k, e_f * _LN2_1, second.hi)
    scaled = FF(scaled.hi, ff.let(k, scaled.lo + (second.lo + e_f * _LN2_3)))
    return ff.add(k, scaled, frac)
