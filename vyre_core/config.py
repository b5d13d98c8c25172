"""``DispatchConfig``: the per-call options of a dispatch, immutable and checked when made.

A bad value is refused at construction with a ``Fix:``, never discovered mid-dispatch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from vyre_core import deprecations
from vyre_core.deadline import seconds_wrong
from vyre_core.errors import InvalidConfigError
from vyre_core.ir.specialize import canonical_values

_U32_MAX = 2**32 - 1
#: Labels name a dispatch in messages; longer ones are refused, not truncated.
MAX_LABEL_CHARS = 256


def _axes(name: str, value: Any) -> tuple[int, int, int] | None:
    if value is None:
        return None
    axes = tuple(value) if isinstance(value, list | tuple) else (value,)
    if not 1 <= len(axes) <= 3 or any(
            isinstance(a, bool | np.bool_) or not isinstance(a, int | np.integer)
            or not 1 <= a <= _U32_MAX for a in axes):
        raise InvalidConfigError(f"{name}={value!r} is not 1 to 3 axes of at least 1",
                                 f"Pass {name} as e.g. (64,) or (8, 8, 1); every axis >= 1.")
    return tuple(int(a) for a in axes) + (1,) * (3 - len(axes))  # type: ignore[return-value]


def _dim(value: Any) -> tuple[int, ...] | None:
    """``dim`` as 1 to 3 invocation counts (an int: along x), each 1 to 2**32 (global ids
    are u32); its length is kept (a 2-D dim over a shaped output is checked axis by axis)."""
    if value is None:
        return None
    axes = tuple(value) if isinstance(value, list | tuple) else (value,)
    if not 1 <= len(axes) <= 3 or any(
            isinstance(a, bool | np.bool_) or not isinstance(a, int | np.integer)
            or not 1 <= a <= _U32_MAX + 1 for a in axes):
        raise InvalidConfigError(
            f"dim={value!r} is not 1 to 3 invocation counts from 1 to 2**32",
            "Pass dim as the number of invocations per axis, e.g. dim=len(x) or "
            "dim=(64, 32): dim[i] is the extent of global_id(i).")
    return tuple(int(a) for a in axes)


@dataclass(frozen=True)
class DispatchConfig:
    """Options of one dispatch. Every field has an effect; see docs/operations.md."""

    workgroup_override: tuple[int, int, int] | None = None  # replaces the program's workgroup
    grid_override: tuple[int, int, int] | None = None       # workgroups per axis
    dispatch_elements: int | None = None  # invocations to cover when inferring the grid
    dim: tuple[int, ...] | None = None    # invocations per axis: dim[i] is global_id(i)'s extent
    fixpoint_iterations: int = 1          # re-run, feeding read_write back, until unchanged
    ulp_budget: int = 0                   # float tolerance of shadow checks (0: the bytes)
    max_output_bytes: int | None = None   # refuse dispatches whose outputs exceed this
    profile: bool = False                 # return wall and device time with the outputs
    label: str | None = None              # names the dispatch in errors and timings
    timeout: float | None = None          # seconds; enforced by the supervisor
    retries: int = 1                      # re-runs after a worker crash (pure work only)
    constants: Any = ()  # specialization values by name: a dict, kept as sorted pairs
    tuned: bool = False  # use the workgroup and constants Driver.tune chose
    fuse: bool = False   # a sequence runs with its fusable steps fused (Sequence.fused)

    def __post_init__(self) -> None:
        key = _plain_key(self.__dict__)
        known = _VALIDATED.get(key) if key is not None else None
        if known is None:
            self._validate()
            if key is not None:
                if len(_VALIDATED) >= VALIDATED_LIMIT:
                    _VALIDATED.clear()  # (many configs, made once each: start again)
                _VALIDATED[key] = (self.workgroup_override, self.grid_override, self.dim)
        else:  # (the same values, of the same types, passed every check before)
            object.__setattr__(self, "workgroup_override", known[0])
            object.__setattr__(self, "grid_override", known[1])
            object.__setattr__(self, "dim", known[2])
        for name, deprecation in deprecations.of_kind("config").items():
            if getattr(self, name) != _DEFAULTS[name]:
                deprecations.enforce(deprecation, "DispatchConfig", InvalidConfigError)

    def _validate(self) -> None:
        """Every field checked (a bad one refused with its Fix), and the axes and the
        constants in their one form."""
        object.__setattr__(self, "workgroup_override",
                           _axes("workgroup_override", self.workgroup_override))
        object.__setattr__(self, "grid_override", _axes("grid_override", self.grid_override))
        _require(self.dispatch_elements is None or _is_int(self.dispatch_elements, 1),
                 f"dispatch_elements={self.dispatch_elements!r} must be an int >= 1",
                 "Pass the number of invocations to cover, or None to infer it.")
        object.__setattr__(self, "dim", _dim(self.dim))
        _check_dim_alone(self.dim, self)
        _require(_is_int(self.fixpoint_iterations, 1),
                 f"fixpoint_iterations={self.fixpoint_iterations!r} must be an int >= 1",
                 "Use 1 for a single dispatch, N to re-run until the result stops changing.")
        _require(_is_int(self.ulp_budget, 0) and self.ulp_budget <= _U32_MAX,
                 f"ulp_budget={self.ulp_budget!r} must be an int from 0 to 2**32-1",
                 "Use 0 for exact float comparison, a small count of ULPs otherwise.")
        _require(self.max_output_bytes is None or _is_int(self.max_output_bytes, 0),
                 f"max_output_bytes={self.max_output_bytes!r} must be an int >= 0",
                 "Pass a byte count, or None for no limit.")
        _require(isinstance(self.profile, bool), f"profile={self.profile!r} must be a bool",
                 "Pass profile=True or profile=False.")
        _require(self.label is None or isinstance(self.label, str),
                 f"label={self.label!r} must be a str", "Pass a short string, or None.")
        _require(self.label is None or _encodable(self.label),
                 f"label={self.label!r} is not valid text (it holds a lone surrogate)",
                 "Pass a label that encodes as UTF-8.")
        _require(self.label is None or len(self.label) <= MAX_LABEL_CHARS,
                 f"label is {len(self.label or '')} characters, over the {MAX_LABEL_CHARS} "
                 "a label may have", f"Pass a name of at most {MAX_LABEL_CHARS} characters.")
        wrong = None if self.timeout is None else seconds_wrong(self.timeout, infinite=False)
        _require(wrong is None, f"timeout={self.timeout!r} {wrong}",
                 "Pass e.g. timeout=30.0, or None for no deadline.")
        _require(_is_int(self.retries, 0), f"retries={self.retries!r} must be an int >= 0",
                 "Use 0 to never retry, 1 (default) to retry once after a worker crash.")
        _require(isinstance(self.tuned, bool), f"tuned={self.tuned!r} must be a bool",
                 "Pass tuned=True to run with what Driver.tune chose, else leave it out.")
        _require(isinstance(self.fuse, bool), f"fuse={self.fuse!r} must be a bool",
                 "Pass fuse=True to fuse a sequence's fusable steps, else leave it out.")
        if not (isinstance(self.constants, tuple) and not self.constants):
            object.__setattr__(self, "constants", canonical_values(self.constants))

    def replace(self, **changes: Any) -> DispatchConfig:
        """A copy with ``changes`` applied (and checked)."""
        return replace(self, **changes)

    def with_dim(self, dim: Any) -> DispatchConfig:
        """A copy launching ``dim`` invocations: ``replace(dim=dim)`` checking only what
        the new dim changes (the rest was checked when this config was made), since a
        launch makes one per call."""
        dim = _dim(dim)
        _check_dim_alone(dim, self)
        return self.evolve(dim=dim)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _FIELDS}

    def to_wire(self) -> dict[str, Any]:
        """The fields that differ from their defaults (``from_dict`` gives the rest their
        defaults): what a request carries, so a worker decodes and keys a launch's config
        in a fraction of the time of all 14."""
        return {name: value for name, value in self.__dict__.items()
                if name in _DEFAULTS and (value != _DEFAULTS[name]
                                          or type(value) is not type(_DEFAULTS[name]))}

    def evolve(self, **checked: Any) -> DispatchConfig:
        """A copy with ``checked`` changes that are valid by construction (e.g. a grid the
        launch planner normalised); skips re-validation on the dispatch hot path."""
        new = object.__new__(DispatchConfig)
        new.__dict__.update(self.__dict__, **checked)
        return new

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DispatchConfig:
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise InvalidConfigError(f"unknown DispatchConfig fields {sorted(unknown)}",
                                     "Use matching vyre versions on both sides.")
        return cls(**data)

    def describe(self) -> str:
        """How errors name this dispatch."""
        return f"dispatch {self.label!r}" if self.label else "dispatch"


_FIELDS = tuple(DispatchConfig.__dataclass_fields__)
_DEFAULTS = {name: f.default for name, f in DispatchConfig.__dataclass_fields__.items()}


def _check_dim_alone(dim: tuple[int, ...] | None, config: DispatchConfig) -> None:
    """A dim says how many invocations run, and so do grid_override and
    dispatch_elements: only one of them may be given."""
    _require(dim is None or (config.grid_override is None
                             and config.dispatch_elements is None),
             f"dim={dim!r} is given with "
             f"{'grid_override' if config.grid_override else 'dispatch_elements'}: two "
             "answers to how many invocations run",
             "Pass only dim= (invocations per axis); grid_override counts workgroups "
             "and dispatch_elements is dim's 1-D form.")


#: The values of configs made and checked so far (``_plain_key``), with the axes each
#: normalised to: a config made again of the same values (a launch's, on every call)
#: takes those instead of passing the same checks again. Emptied when full.
_VALIDATED: dict[tuple, tuple] = {}
VALIDATED_LIMIT = 256
#: The types whose equal values (of the same type) pass or fail every check alike (a
#: tuple's items: ints).
_PLAIN = frozenset({type(None), bool, int, float, str, tuple})
_INT = frozenset({int})


def _plain_key(fields: dict[str, Any]) -> tuple | None:
    """A config's field values with the type of each, when every one is of a plain type
    (the axes tuples of ints, the constants none): two configs of equal keys pass or fail
    every check alike. None otherwise (a list, an array, numpy integers, constants: such
    a config is checked every time)."""
    values = tuple(fields.values())
    kinds = tuple(map(type, values))
    if not _PLAIN.issuperset(kinds) or fields["constants"] != ():
        return None
    for axes in (fields["workgroup_override"], fields["grid_override"], fields["dim"]):
        if type(axes) is tuple and not _INT.issuperset(map(type, axes)):
            return None
    return values, kinds


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _is_int(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _require(ok: bool, cause: str, fix: str) -> None:
    if not ok:
        raise InvalidConfigError(cause, fix)
