"""Specialization: choosing values for a program's named constants.

A choice makes a new program in which each constant is a literal, with its own
fingerprint, validation and pipeline cache key, and in which the conditions the choice
decides are folded (``fold.py``: ``if FLAT:`` keeps the branch taken). Backends only
ever see such programs, so none needs to know about constants (wgpu's override constants
would be one way to lower them; substitution is the one every backend gets for free).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from vyre_core.errors import InvalidConfigError, did_you_mean
from vyre_core.ir.dtypes import DType
from vyre_core.ir.fold import substitute
from vyre_core.ir.nodes import Lit, SpecConstant

if TYPE_CHECKING:
    from vyre_core.ir.program import Program

class Values(tuple):
    """Chosen values in canonical form: (name, value) pairs sorted by name, compared and
    hashed exactly, so that caches keyed by them (or by a config holding them) never take
    ``True`` for ``1``, ``1.0`` for ``1`` or ``-0.0`` for ``0.0``."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, tuple):
            return NotImplemented
        return _exact_pairs(self) == _exact_pairs(other)

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash(_exact_pairs(self))

    def exact(self) -> tuple:
        """The pairs as compared: each value with its type and (floats) every bit."""
        return _exact_pairs(self)


def _exact_pairs(pairs: tuple) -> tuple:
    try:
        return tuple((name, type(value), struct.pack("<d", value) if isinstance(value, float)
                      else repr(value)) for name, value in pairs)  # (floats: every bit)
    except (TypeError, ValueError):  # (not pairs: compares as itself)
        return pairs


def canonical_values(values: Mapping[str, Any] | Iterable[tuple[str, Any]] | None) -> Values:
    """``values`` as sorted (name, Python value) pairs; refuses what can never be a
    constant's value (a name that is not text, a value that is not a bool or a number)."""
    if values is None:
        return Values()
    if not isinstance(values, Mapping | list | tuple):
        raise InvalidConfigError(f"constants={values!r} is not a dict of values",
                                 "Pass constants as a dict, e.g. {'TILE': 16}.")
    pairs = list(values.items()) if isinstance(values, Mapping) else list(values)
    out: dict[str, Any] = {}
    for pair in pairs:
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise InvalidConfigError(f"constants entry {pair!r} is not a (name, value) pair",
                                     "Pass constants as a dict, e.g. {'TILE': 16}.")
        name, value = pair
        if not isinstance(name, str):
            raise InvalidConfigError(f"constant name {name!r} is not a str",
                                     "Name constants as the program declares them.")
        if name in out:
            raise InvalidConfigError(f"constant {name!r} is given twice",
                                     "Give each constant one value.")
        if isinstance(value, np.generic):
            value = value.item()
        if not isinstance(value, bool | int | float):
            raise InvalidConfigError(f"constant {name!r} = {value!r} is a "
                                     f"{type(value).__name__}, not a bool or a number",
                                     "Give each constant a bool, int or float.")
        out[name] = value
    return Values(sorted(out.items()))


def typed_literal(dtype: DType, value: Any, name: str) -> Lit:
    """``value`` as a literal of ``dtype``, refused (naming it ``name``) when it is of
    another kind (a bool for an int, a float for an int, anything but a bool for a
    bool) or does not fit the type (``DType.to_bits``: a finite float that would round
    to infinity too)."""
    if isinstance(value, np.generic):
        value = value.item()
    kind_ok = isinstance(value, bool) if dtype is DType.BOOL else (
        isinstance(value, int) and not isinstance(value, bool) if dtype.is_int
        else isinstance(value, int | float) and not isinstance(value, bool))
    if not kind_ok:
        wanted = "a bool" if dtype is DType.BOOL else "an int" if dtype.is_int else "a number"
        raise InvalidConfigError(f"{name} is given {value!r}, a {type(value).__name__}",
                                 f"Give it {wanted}.")
    try:
        return Lit.of(dtype, value)
    except (TypeError, ValueError) as exc:  # (out of range: it says so)
        why = str(exc).split(". Fix")[0]
        raise InvalidConfigError(f"{name} cannot hold {value!r}: {why}",
                                 f"Give it a value of the {dtype.value} range.") from None


def literal_of(constant: SpecConstant, value: Any, what: str = "constant") -> Lit:
    """``value`` as a literal of ``constant``'s type (``typed_literal``), refused also
    when it lies outside the declared range."""
    name = f"{what} {constant.name!r} ({constant.dtype.value})"
    lit = typed_literal(constant.dtype, value, name)
    if not in_range(constant, lit):
        raise InvalidConfigError(
            f"{name} = {value!r} lies outside its declared range {describe_range(constant)}",
            "Choose a value inside the range the program declares.")
    return lit


def in_range(constant: SpecConstant, lit: Lit) -> bool:
    """Whether ``lit`` lies in ``constant``'s inclusive range (NaN lies in no range)."""
    value = lit.value
    if constant.low is not None and not constant.low.value <= value:
        return False
    return constant.high is None or value <= constant.high.value


def describe_range(constant: SpecConstant) -> str:
    low = "" if constant.low is None else repr(constant.low.value)
    high = "" if constant.high is None else repr(constant.high.value)
    return f"[{low}, {high}]"


def resolve(program: Program, values: Values) -> dict[str, Lit]:
    """The literal of every constant of ``program``: the chosen value, else its default."""
    declared = {c.name: c for c in program.constants}
    unknown = [name for name, _ in values if name not in declared]
    if unknown:
        names = ", ".join(sorted(declared)) or "none"
        raise InvalidConfigError(
            f"program {program.fingerprint()[:12]} has no constant {unknown[0]!r}"
            f"{did_you_mean(unknown[0], declared)} (it declares: {names})",
            "Name only constants the program declares (ir.Kernel.constant).")
    chosen = dict(values)
    return {name: literal_of(c, chosen[name]) if name in chosen else c.default
            for name, c in declared.items()}


def specialize(program: Program, values: tuple = ()) -> Program:
    """``program`` with every constant replaced by its chosen (or default) value; the
    program itself when it declares none. Check the program first: an invalid one gives
    an invalid result."""
    if not program.constants:
        if values:
            resolve(program, values)  # (raises: names a constant the program lacks)
        return program
    return _specialized(_ByFingerprint(program),
                        values if isinstance(values, Values) else Values(values))


class _ByFingerprint:
    """A program as a cache key: hashed and compared by fingerprint, not by its tree."""

    __slots__ = ("program",)

    def __init__(self, program: Program) -> None:
        self.program = program

    def __hash__(self) -> int:
        return hash(self.program.fingerprint())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ByFingerprint) and \
            other.program.fingerprint() == self.program.fingerprint()


@lru_cache(maxsize=256)
def _specialized(key: _ByFingerprint, values: Values) -> Program:
    from vyre_core.ir.program import Program

    program = key.program
    lits = resolve(program, values)
    return Program(program.buffers, program.workgroup,
                   tuple(substitute(s, lits) for s in program.body))

