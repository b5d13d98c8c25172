"""Ranking: pick the backend that runs a program, from its requirements (and, for a
dispatch, its launch: grid and buffer sizes) and each backend's capabilities, walking
candidates in precedence order; every rejection can be explained. Decisions are cached
per program fingerprint (and launch) until the candidate set is invalidated."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from vyre_core import deprecations
from vyre_core.contract.types import Capabilities
from vyre_core.errors import InvalidInputError, NoCapableBackendError, PluginLoadError
from vyre_core.ir.requirements import ALL_OPS, FEATURES
from vyre_core.launch import Launch
from vyre_core.limits import buffer_exceeded, grid_exceeded, workgroup_exceeded
from vyre_core.mathlib.inline import requirements
from vyre_core.registry import BackendRegistration
from vyre_core.sequence import Sequence as StepSequence

if TYPE_CHECKING:
    from vyre_core.ir.program import Program
    from vyre_core.ir.requirements import Requirements
    from vyre_core.registry import Registry

    # what routing places: a program, one launch of it, or a sequence whole
    Routable = Program | Launch | StepSequence

_log = logging.getLogger("vyre.routing")


class Candidate(NamedTuple):
    """A backend as routing sees it: its capabilities, on one of its devices when its pool
    runs one worker set per device (a backend is then listed once per device)."""

    registration: BackendRegistration
    capabilities: Capabilities
    device: int | None = None


# (registration, capabilities) pairs, or Candidates naming a device
Candidates = Callable[[], list[tuple]]
# (backend, program fingerprint, device or None for the backend as a whole) -> reason
Skip = Callable[[str, str, int | None], str | None]


@dataclass(frozen=True)
class Rejection:
    """One backend that cannot run a program, with every reason."""

    backend: str
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class RouteDecision:
    """The backend a program runs on, and why that one (for logs and ``explain``);
    ``devices``: the ones of its devices that can run it (None: any)."""

    backend: str
    reason: str
    devices: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Explanation:
    """One candidate as routing saw it, in routing order. ``demoted``: a software adapter
    moved below the reference backend (to the end when there is none)."""

    backend: str
    precedence: int
    accepted: bool
    reasons: tuple[str, ...]
    chosen: bool
    demoted: bool = False
    device: int | None = None

    def __str__(self) -> str:
        """Its block of ``explain``'s text: the backend, its rank, and why not."""
        status = "chosen" if self.chosen else "capable" if self.accepted else "rejected"
        demoted = f", {DEMOTED}" if self.demoted else ""
        device = "" if self.device is None else f" device {self.device}"
        return "\n".join([f"{'*' if self.chosen else ' '} {self.backend}{device} (rank "
                          f"{self.precedence}{demoted}): {status}",
                          *(f"    - {r}" for r in self.reasons)])


class Explanations(tuple[Explanation, ...]):
    """What ``Driver.explain`` answers: every candidate in routing order; ``str()`` (or
    ``print``) gives the text, one block per backend."""

    def __str__(self) -> str:
        return "\n".join(map(str, self)) if self else "no backends are registered"


def rejection_reasons(req: Requirements, caps: Capabilities) -> list[str]:
    """Every reason a backend with ``caps`` cannot run a program with ``req``; empty when it
    can. All reasons, not the first, so a user fixes them in one pass. A requirement
    routing does not know is refused outright (fail closed): no backend is checked for it."""
    refuse_unknown(req)
    reasons: list[str] = []
    missing = req.ops - caps.supported_ops
    if missing:
        reasons.append(f"uses ops not supported: {', '.join(sorted(missing))}")
    if "f16" in req.features and not caps.supports_f16:
        reasons.append("needs f16 (supports_f16 is false)")
    if "f64" in req.features and not caps.supports_f64:
        reasons.append("needs f64 (supports_f64 is false)")
    if "subgroups" in req.features:
        reasons += subgroups_refused(req.subgroup_size, caps)
    over = workgroup_exceeded(req.workgroup_size, req.workgroup_memory_bytes,
                              "workgroup_memory" in req.features, caps)
    over_storage = buffer_exceeded(req.largest_buffer, req.largest_buffer_bytes, caps)
    reasons += [e.cause for e in over] + ([over_storage.cause] if over_storage else [])
    # A loop known to run past the adapter's trip limit is routed away; a loop whose
    # bound is only known at run time is guarded by the backend, which discards a
    # truncated result with an error instead of returning it.
    trip_max = caps.max_loop_trip
    if trip_max is not None and req.loop_trip_bound is not None \
            and req.loop_trip_bound > trip_max:
        reasons.append(f"loops run {req.loop_trip_bound} iterations, more than the "
                       f"{trip_max} this adapter allows")
    return reasons


def claim_reasons(work: Routable, caps: Capabilities) -> list[str]:
    """``rejection_reasons`` of a program (or a launch's), or of every distinct program of
    a sequence, each then prefixed with the steps it holds for: one backend runs a
    sequence whole, so it is capable only when it accepts every step."""
    return [f"{where}{r}" for where, part in _requirements(work)
            for r in rejection_reasons(part, caps)]


def launch_reasons(launch: Launch, caps: Capabilities) -> list[str]:
    """Every reason a backend with ``caps`` cannot make ``launch`` (its grid, its largest
    buffer as bound): the rules a worker's launch plan applies (``vyre_core.limits``)."""
    over = grid_exceeded(launch.grid, caps)
    name, nbytes = launch.largest
    over_storage = buffer_exceeded(name, nbytes, caps) if name else None
    return [e.cause for e in over] + ([over_storage.cause] if over_storage else [])


def subgroups_refused(size: int | None, caps: Capabilities) -> list[str]:
    """Why a backend cannot run subgroups of ``size``: it must run subgroup operations,
    and run them over exactly that many invocations (its range holds the size)."""
    if not caps.supports_subgroup_ops:
        return ["needs subgroup operations (supports_subgroup_ops is false)"]
    low, high = caps.subgroup_size_range or (0, 0)
    if size is None or not low <= size <= high:
        sizes = "none" if caps.subgroup_size_range is None else \
            (f"{low}" if low == high else f"{low} to {high}")
        return [f"needs subgroups of {size} invocations (this backend runs {sizes})"]
    return []


def refuse_unknown(req: Requirements) -> None:
    """InvalidInputError naming every op or feature of ``req`` routing has no rule for,
    with the known ones: passing it would route to a backend nobody checked for it."""
    unknown_ops = sorted(req.ops - ALL_OPS)
    unknown_features = sorted(req.features - set(FEATURES))
    if not unknown_ops and not unknown_features:
        return
    names = ", ".join(unknown_ops + unknown_features)
    raise InvalidInputError(
        f"routing does not know the requirement(s) {names}",
        f"Use only known names: features {', '.join(FEATURES)}; ops as in "
        "vyre_core.ir.ALL_OPS (e.g. binop.add, atomic.add). A new capability needs a "
        "routing rule first (vyre_core/routing/rank.py).",
        unknown=unknown_ops + unknown_features, known_features=list(FEATURES))


def is_software_adapter(caps: Capabilities) -> bool:
    """True for a CPU implementation of a GPU API (e.g. lavapipe), which routing demotes."""
    return caps.extra.get("software_adapter") is True


def no_capable_backend(program_label: str, rejections: list[Rejection]) -> NoCapableBackendError:
    """The error for a program no candidate can run: one line per backend with its reasons,
    and ``details['rejections']`` as plain data so it crosses a process boundary."""
    if not rejections:
        return NoCapableBackendError(
            f"no backend can run {program_label}: no backends are registered",
            "Install a backend distribution with pip (the reference backend runs every "
            "program), or check `vyre doctor` for plugins that failed to load.",
            rejections={})
    lines = "\n".join(f"  - {r.backend}: {'; '.join(r.reasons)}" for r in rejections)
    return NoCapableBackendError(
        f"no backend can run {program_label} ({len(rejections)} rejected):\n{lines}",
        rejections={r.backend: list(r.reasons) for r in rejections})


#: How routing names a demotion, in decisions and explanations.
DEMOTED = "demoted: software adapter"

# (registration, capabilities, demoted, device): built on every uncached route
_Ranked = tuple[BackendRegistration, Capabilities, bool, int | None]


def demotable(registrations: list[BackendRegistration], backend: str) -> bool:
    """Whether a probe could demote ``backend`` (``registrations`` in precedence order):
    it ranks ahead of the reference, or there is none (demotion moves a software adapter
    below the reference, to the end without one), and its claims do not say it never runs
    on one (``extra={"software_adapter": False}``: a host backend, say)."""
    for reg in registrations:
        if reg.is_reference:
            return False
        if reg.id == backend:
            return reg.claims.extra.get("software_adapter") is not False
    return True


def routing_order(found: list[tuple]) -> list[_Ranked]:
    """Precedence then id (then device), with software adapters moved to just below the
    reference backend (to the end when there is no reference): a CPU Vulkan driver is
    slower than the reference and no more trustworthy, so it runs only when asked for or
    nothing else can. A backend's hardware devices keep their place when its software
    ones move."""
    ordered = sorted((Candidate(*c) for c in found),
                     key=lambda c: (c[0].precedence, c[0].id, c.device or 0))
    ref = next((i for i, c in enumerate(ordered) if c[0].is_reference), len(ordered))
    moved = [i for i, c in enumerate(ordered[:ref])
             if is_software_adapter(c[1]) and not c[0].is_reference]
    kept = [(r, c, False, d) for i, (r, c, d) in enumerate(ordered[:ref + 1]) if i not in moved]
    return (kept + [(ordered[i][0], ordered[i][1], True, ordered[i][2]) for i in moved]
            + [(r, c, False, d) for r, c, d in ordered[ref + 1:]])


class Router:
    """Chooses a backend per program. ``candidates`` returns (registration, capabilities)
    pairs (static claims or probed ones, the caller decides); ``skip(backend, fingerprint)``
    returns a reason when a backend must be passed over for reasons outside capability
    (its pool failed; it refused this program at compile).

    Decisions are cached by (fingerprint, with a launch its grid and largest buffer,
    backend override, version) in a bounded LRU; call
    :meth:`invalidate` whenever the candidates, their capabilities or ``skip``'s answers
    change. As a safety net a cached decision whose backend ``skip`` now rejects is
    recomputed, so a failed pool is never returned from the cache."""

    def __init__(self, candidates: Candidates, skip: Skip | None = None,
                 cache_size: int = 4096) -> None:
        if cache_size < 1:
            raise ValueError("cache_size must be at least 1")
        self._candidates = candidates
        self._skip = skip
        self._cache_size = cache_size
        self._cache: OrderedDict[tuple[str | tuple, str | None, int], RouteDecision] = OrderedDict()
        self._version = 0
        self._lock = threading.Lock()

    @classmethod
    def from_registry(cls, registry: Registry, skip: Skip | None = None,
                      cache_size: int = 4096) -> Router:
        """A router over a registry's static claims (no worker has probed anything yet)."""
        return cls(lambda: [(r, r.claims) for r in registry.backends()], skip, cache_size)

    @property
    def version(self) -> int:
        """Bumped by :meth:`invalidate`; part of every cache key."""
        return self._version

    def invalidate(self) -> None:
        """Forget every cached decision: capabilities were re-probed, a pool failed or
        recovered, or a backend was registered."""
        with self._lock:
            self._version += 1
            self._cache.clear()

    def route(self, program: Routable, backend: str | None = None) -> RouteDecision:
        """The backend to run ``program`` on: ``backend`` when given (it must be registered
        and capable), else the first capable candidate in routing order.

        Raises ``PluginLoadError`` for an unknown ``backend`` id and ``NoCapableBackendError``
        (with every backend's reasons) when nothing, or not the requested backend, can run it.
        """
        fingerprint = program.fingerprint()  # cached on the Program after the first call
        with self._lock:
            key = (_key(program), backend, self._version)
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
        if hit is not None and (self._skip is None
                                or self._skip(hit.backend, fingerprint, None) is None):
            return hit
        decision = self._decide(program, backend)
        if _log.isEnabledFor(logging.DEBUG):  # (a new decision only: cache hits are silent)
            _log.debug("program %s -> %s (%s)", fingerprint[:12], decision.backend,
                       decision.reason)
        with self._lock:
            if key[2] == self._version:  # not invalidated while deciding
                self._cache[key] = decision
                self._cache.move_to_end(key)
                if len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return decision

    def explain(self, program: Routable, backend: str | None = None) -> Explanations:
        """Every candidate in routing order, accepted or with its exact reasons, and which
        one ``route`` would choose (none when it would raise). Not cached."""
        found: list[Explanation] = []
        chosen_done = False
        for reg, caps, demoted, device in routing_order(self._candidates()):
            reasons = tuple(self._reasons(reg.id, caps, program, device))
            chosen = not reasons and not chosen_done and backend in (None, reg.id)
            chosen_done = chosen_done or chosen
            found.append(Explanation(reg.id, reg.precedence, not reasons, reasons, chosen,
                                     demoted, device))
        return Explanations(found)

    def capable_elsewhere(self, program: Routable, backend: str) -> list[str]:
        """The backends other than ``backend`` whose claims accept all of ``program``
        (every step of a sequence), in routing order: what a refusal's Fix names."""
        return list(dict.fromkeys(e.backend for e in self.explain(program)
                                  if e.accepted and e.backend != backend))

    def capable(self, program: Routable,
                variants: dict[int | None, tuple[Capabilities, ...]],
                devices: frozenset[int] | None = None) -> frozenset[Capabilities] | None:
        """Of a pool's probed capability ``variants`` (per device; on ``devices`` only when
        given), those that can run ``program``; None when all can (no limit needed)."""
        considered = [c for d, each in variants.items() if devices is None or d in devices
                      for c in each]
        accepted = [c for c in considered
                    if not claim_reasons(program, c)
                    and not (isinstance(program, Launch) and launch_reasons(program, c))]
        return None if len(accepted) == len(considered) else frozenset(accepted)

    # -- internals -----------------------------------------------------------------------

    def _reasons(self, backend: str, caps: Capabilities, work: Routable,
                 device: int | None = None) -> list[str]:
        skipped = None if self._skip is None else self._skip(backend, work.fingerprint(),
                                                               device)
        reasons = claim_reasons(work, caps)
        if isinstance(work, Launch):
            reasons += [f"the launch: {r}" for r in launch_reasons(work, caps)]
        return reasons if skipped is None else [skipped, *reasons]

    def _decide(self, program: Routable, backend: str | None) -> RouteDecision:
        order = routing_order(self._candidates())
        if backend is not None:
            named = [c for c in order if c[0].id == backend]
            if not named:
                ids = ", ".join(r.id for r in sorted((c[0] for c in order),
                                                     key=lambda r: r.sort_key))
                raise PluginLoadError(
                    f"no backend {backend!r} is registered (registered: {ids or 'none'})",
                    "Request one of the registered ids, or install the backend's distribution "
                    "with pip; `vyre doctor` lists plugins that failed to load.")
            judged = [(d, self._reasons(backend, caps, program, d))
                      for _, caps, _, d in named]
            accepted = tuple(d for d, reasons in judged if not reasons)
            if not accepted:
                reasons = list(dict.fromkeys(
                    f"{_on(d)}{r}" for d, found in judged for r in found))
                lines = "\n".join(f"  - {backend}: {r}" for r in reasons)
                others = self.capable_elsewhere(program, backend)
                can = f"{' and '.join(others)} can run all of it. " if others else ""
                raise NoCapableBackendError(
                    f"backend {backend!r} was requested but cannot run {_label(program)}:\n"
                    f"{lines}",
                    f"{can}Omit the backend to let routing pick a capable one, or change the "
                    "program to avoid the reasons above.",
                    rejections={backend: reasons})
            return RouteDecision(backend, "requested explicitly", _devices(accepted))
        rejections: dict[str, list[str]] = {}
        for i, (reg, caps, demoted, device) in enumerate(order):
            reasons = self._reasons(reg.id, caps, program, device)
            if not reasons:
                devices = (device, *(d for r, c, m, d in order[i + 1:]
                                     if r.id == reg.id and m == demoted and not
                                     self._reasons(r.id, c, program, d)))
                return RouteDecision(reg.id, _chosen_because(reg, demoted, order[i + 1:]),
                                     _devices(devices))
            rejections.setdefault(reg.id, []).extend(f"{_on(device)}{r}" for r in reasons)
        raise no_capable_backend(_label(program), [
            Rejection(b, tuple(dict.fromkeys(r))) for b, r in rejections.items()])


def _chosen_because(reg: BackendRegistration, demoted: bool, after: list[_Ranked]) -> str:
    """Why the first capable backend in routing order won: by precedence, unless a
    demotion moved it there (it was demoted itself, or backends ranked ahead of it by
    precedence were moved below it)."""
    passed = list(dict.fromkeys(f"{r.id}, rank {r.precedence}" for r, _, moved, _ in after
                                if moved and r.precedence < reg.precedence and r.id != reg.id))
    if not demoted and not passed:
        return f"first capable backend by precedence (rank {reg.precedence})"
    why = [f"rank {reg.precedence}"] + ([DEMOTED] if demoted else []) + [
        f"{p}, {DEMOTED}" for p in passed]
    return f"first capable backend in routing order ({'; '.join(why)})"


def _on(device: int | None) -> str:
    return "" if device is None else f"device {device}: "


def _devices(accepted: tuple[int | None, ...]) -> tuple[int, ...] | None:
    """The devices a decision names: None when its backend has no per-device candidates."""
    if any(d is None for d in accepted):
        return None
    return tuple(dict.fromkeys(d for d in accepted if d is not None))  # (once per variant)


def _key(work: Routable) -> str | tuple:
    """What a cached decision is keyed by: the fingerprint, and a launch's grid and size."""
    return work.route_key() if isinstance(work, Launch) else work.fingerprint()


def _requirements(target: Routable) -> list[tuple[str, Requirements]]:
    """What ``target`` needs: a program's requirements as a backend is given it (the
    math library's functions written out: ``mathlib.inline``); for a sequence, each
    distinct program's, each reason then saying which steps it holds for (one backend
    runs all)."""
    if isinstance(target, StepSequence):
        return [(f"step{'s' if len(steps) > 1 else ''} {_numbers(steps)}: ",
                 requirements(program)) for program, steps in target.programs()]
    return [("", requirements(target.program if isinstance(target, Launch) else target))]


def _numbers(steps: list[int]) -> str:
    shown = ", ".join(map(str, steps[:8]))
    return shown + (f" (+{len(steps) - 8} more)" if len(steps) > 8 else "")


def _label(program: Routable) -> str:
    kind = "sequence" if isinstance(program, StepSequence) else "program"
    return f"{kind} {program.fingerprint()[:12]}"


def format_explanation(expl: Iterable[Explanation]) -> str:
    """``explain``'s answer as text (deprecated: ``str()`` of what ``explain`` answers)."""
    deprecations.enforce(deprecations.of_kind("call")["format_explanation"],
                         "this program", InvalidInputError)
    return str(Explanations(expl))
