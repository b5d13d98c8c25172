"""What the tuner tries: workgroup sizes and specialization values, as candidates.

Pure: from a program, the capabilities its backend probed and what the caller asks for,
the list of candidates, the program's own configuration first (the baseline every other
candidate's output bytes are compared with).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vyre_core.config import DispatchConfig
from vyre_core.contract.types import Capabilities
from vyre_core.errors import InvalidConfigError
from vyre_core.ir import Program
from vyre_core.ir.nodes import Access
from vyre_core.ir.specialize import Values, canonical_values, literal_of

#: The most candidates one tuning run measures unless the caller raises it.
DEFAULT_LIMIT = 64
#: Workgroup sizes tried along x for a 1-D program that shares no workgroup memory.
DEFAULT_WIDTHS = (32, 64, 128, 256)
#: At most this many values of one constant are tried by default.
DEFAULT_VALUES = 6


@dataclass(frozen=True)
class Candidate:
    workgroup: tuple[int, int, int]
    constants: Values = field(default_factory=Values)

    def describe(self) -> str:
        size = "x".join(map(str, self.workgroup)).removesuffix("x1").removesuffix("x1")
        chosen = " ".join(f"{n}={v!r}" for n, v in self.constants)
        return f"workgroup {size}" + (f", {chosen}" if chosen else "")

    def config(self, base: DispatchConfig) -> DispatchConfig:
        return base.replace(workgroup_override=self.workgroup, constants=self.constants)

    def to_dict(self) -> dict[str, Any]:
        return {"workgroup": list(self.workgroup),
                "constants": {name: value for name, value in self.constants}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Candidate:
        return cls(tuple(data["workgroup"]), canonical_values(data["constants"]))


def candidates(program: Program, caps: Capabilities, base: DispatchConfig | None = None,
               workgroups: Sequence[Sequence[int]] | None = None,
               constants: Mapping[str, Sequence[Any]] | None = None,
               limit: int = DEFAULT_LIMIT) -> list[Candidate]:
    """Every combination of the workgroups and constant values to try, the caller's own
    configuration first (``base``: its workgroup override and constants over the
    program's); what ``base`` sets stays fixed unless ``workgroups`` or ``constants``
    name it. Sizes past ``caps`` are left out. Raises ``InvalidConfigError`` (with a Fix)
    for a malformed request, a value the program would refuse, or more than ``limit``
    combinations."""
    base = base or DispatchConfig()
    chosen = dict(base.constants)
    _check_shapes(workgroups, constants, limit)
    if workgroups is None and base.workgroup_override is not None:
        workgroups = [base.workgroup_override]
    sizes = _workgroups(program, caps, workgroups)
    values = _values(program, {**{n: [v] for n, v in chosen.items()}, **(constants or {})})
    names = sorted(values)
    combos = [Candidate(size, canonical_values(dict(zip(names, chosen, strict=True))))
              for size in sizes for chosen in itertools.product(*(values[n] for n in names))]
    if len(combos) > limit:
        raise InvalidConfigError(
            f"{len(combos)} candidates ({len(sizes)} workgroup sizes x "
            + " x ".join(f"{len(values[n])} values of {n}" for n in names) + f") is more "
            f"than the limit of {limit}", "Pass fewer workgroups or constant values, or "
            "raise the limit.")
    own = Candidate(base.workgroup_override or program.workgroup, canonical_values(
        {**{c.name: c.default.value for c in program.constants}, **chosen}))
    return [own, *(c for c in combos if c != own)]


def _check_shapes(workgroups: Any, constants: Any, limit: Any) -> None:
    if workgroups is not None and (not isinstance(workgroups, list | tuple) or not all(
            isinstance(w, list | tuple) for w in workgroups)):
        raise InvalidConfigError(f"workgroups={workgroups!r} is not a list of sizes",
                                 "Pass e.g. workgroups=[(64,), (128,)] or [(8, 8)].")
    if constants is not None and (not isinstance(constants, Mapping) or not all(
            isinstance(v, list | tuple) for v in constants.values())):
        raise InvalidConfigError(f"constants={constants!r} is not a dict of value lists",
                                 "Pass e.g. constants={'TILE': [8, 16, 32]}.")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise InvalidConfigError(f"limit={limit!r} must be an int >= 1",
                                 "Pass the most candidates to measure, e.g. 64.")


def _workgroups(program: Program, caps: Capabilities,
                asked: Sequence[Sequence[int]] | None) -> list[tuple[int, int, int]]:
    if asked is None:
        shares = any(b.access is Access.WORKGROUP for b in program.buffers)
        if shares or program.workgroup[1:] != (1, 1):  # (sizes the program itself relies on)
            asked = [program.workgroup]
        else:
            asked = [program.workgroup, *((w,) for w in DEFAULT_WIDTHS)]
    out = []
    subgroup = program.requirements().subgroup_size or 1  # (V034: it divides a workgroup)
    for size in asked:
        axes = DispatchConfig(workgroup_override=tuple(size)).workgroup_override
        assert axes is not None
        fits = all(a <= m for a, m in zip(axes, caps.max_workgroup_size, strict=True)) and \
            math.prod(axes) <= caps.max_invocations_per_workgroup and \
            math.prod(axes) % subgroup == 0
        if fits and axes not in out:
            out.append(axes)
    if not out:
        raise InvalidConfigError(
            f"no workgroup size to try fits the backend (at most "
            f"{caps.max_workgroup_size}, {caps.max_invocations_per_workgroup} invocations)"
            + (f" and holds whole subgroups of {subgroup}" if subgroup > 1 else ""),
            "Pass workgroup sizes within the backend's limits (vyre backends --probe)"
            + (f", each a multiple of {subgroup} invocations." if subgroup > 1 else "."))
    return out


def _values(program: Program, asked: Mapping[str, Sequence[Any]]) -> dict[str, list[Any]]:
    declared = {c.name: c for c in program.constants}
    unknown = sorted(set(asked) - set(declared))
    if unknown:
        raise InvalidConfigError(f"the program has no constant {unknown[0]!r} (it declares: "
                                 f"{', '.join(sorted(declared)) or 'none'})",
                                 "Name only constants the program declares.")
    out: dict[str, list[Any]] = {}
    for name, constant in declared.items():
        if name in asked:
            tried = list(asked[name])
            for value in tried:
                literal_of(constant, value)  # (raises, naming the constant, with a Fix)
        else:
            tried = _default_values(constant)
        out[name] = list(dict.fromkeys(tried))  # (order kept, repeats dropped)
        if not out[name]:
            raise InvalidConfigError(f"no value of constant {name!r} to try",
                                     "Pass at least one value for each named constant.")
    return out


def _default_values(constant: Any) -> list[Any]:
    """Powers of two inside an integer constant's declared range (around its default),
    else only the default: a value outside what the author declared is never tried."""
    default = constant.default.value
    if not constant.dtype.is_int or constant.low is None or constant.high is None:
        return [default]
    low, high = constant.low.value, constant.high.value
    powers = [2**k for k in range(32) if low <= 2**k <= high]
    nearest = sorted(powers, key=lambda p: abs(math.log2(p) - math.log2(max(default, 1))))
    return [default, *sorted(nearest[:DEFAULT_VALUES - 1])]
