"""Measuring candidates: each compiled in the backend's worker and timed there, best of
N (device time where the backend measures it, else the worker's wall time), its output
bytes held against those of the program's own configuration. A candidate that changes a
single byte is rejected, never chosen: tuning changes speed, not results.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from vyre_core import abi
from vyre_core.compare import outputs_divergence
from vyre_core.config import DispatchConfig
from vyre_core.deadline import Deadline
from vyre_core.errors import InvalidConfigError, VyreError
from vyre_core.ir import Program
from vyre_core.tuning import cache as tuning_cache
from vyre_core.tuning.cache import Tuned, TuneKey
from vyre_core.tuning.candidates import DEFAULT_LIMIT, Candidate, candidates

if TYPE_CHECKING:
    from vyre_core.contract.types import Capabilities
    from vyre_core.pipeline import CompiledPipeline
    from vyre_core.registry import Registry
    from vyre_core.routing import RouteDecision

#: Timed runs per candidate unless the caller says otherwise (after one warm-up run).
DEFAULT_REPEATS = 5


@dataclass(frozen=True)
class Measured:
    candidate: Candidate
    seconds: float | None   # best of the timed runs; None when rejected or failed
    verdict: str            # "best", "ok", "rejected" (other bytes) or "failed" (refused)
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**self.candidate.to_dict(), "seconds": self.seconds, "verdict": self.verdict,
                "reason": self.reason}


@dataclass(frozen=True)
class TuneResult:
    """What tuning found (``measured`` empty when it came from the cache)."""

    key: TuneKey
    tuned: Tuned
    measured: list[Measured]
    path: Path | None

    @property
    def best(self) -> Candidate:
        return self.tuned.best

    @property
    def cached(self) -> bool:
        return not self.measured

    @property
    def speedup(self) -> float:
        """The program's own time over the best candidate's."""
        return self.tuned.baseline_seconds / self.tuned.seconds if self.tuned.seconds else 1.0

    def config(self, base: DispatchConfig | None = None) -> DispatchConfig:
        """``base`` with the best workgroup and constants."""
        return self.best.config(base or DispatchConfig())

    def to_dict(self) -> dict[str, Any]:
        return {"key": {**self.key.__dict__, "sizes": list(self.key.sizes)},
                "best": self.best.to_dict(), "seconds": self.tuned.seconds,
                "baseline_seconds": self.tuned.baseline_seconds, "speedup": self.speedup,
                "cached": self.cached, "path": None if self.path is None else str(self.path),
                "candidates": [m.to_dict() for m in self.measured]}


class Measuring(Protocol):
    """What tuning needs of a driver: routing and probing as a call would, compiling in
    the backend's worker, and the backends' versions (a ``Driver`` is one)."""

    registry: Registry

    def route(self, work: Program, inputs: Any = None, *, backend: str | None = None,
              config: DispatchConfig | None = None) -> RouteDecision: ...

    def probe(self, backend: str, *, timeout: float | None = None) -> Capabilities: ...

    def compile(self, work: Program, *, backend: str | None = None,
                config: DispatchConfig | None = None) -> CompiledPipeline: ...


class Tuner:
    """A driver's tuning: candidates measured through it, the choices kept in the tuning
    cache and the ones read so far. It holds its driver weakly (a driver is closed when
    collected, and a cycle would leave that to the cyclic collector)."""

    def __init__(self, driver: Measuring) -> None:
        self._driver = weakref.ref(driver)
        self._tuned: dict[TuneKey, Tuned | None] = {}  # cache entries read, by key

    @property
    def driver(self) -> Measuring:
        driver = self._driver()
        if driver is None:
            raise ReferenceError("the driver of this tuner was collected")
        return driver

    def tune(self, program: Program, inputs: Sequence[Any], backend: str | None, *,
             config: DispatchConfig, workgroups: Sequence[Sequence[int]] | None = None,
             constants: Mapping[str, Sequence[Any]] | None = None,
             repeats: int = DEFAULT_REPEATS, limit: int = DEFAULT_LIMIT,
             refresh: bool = False,
             on_measured: Callable[[Measured], None] | None = None) -> TuneResult:
        """``Driver.tune`` (``config`` checked, untuned)."""
        check_repeats(repeats)
        driver, deadline = self.driver, Deadline.after(config.timeout)
        backend = backend or _routed(driver, program, config, deadline)
        key = self._key(program, inputs, backend, config, deadline)
        listed = candidates(program, driver.probe(backend, timeout=_left(deadline)), config,
                            workgroups, constants, limit)
        found = None if refresh else tuning_cache.load(key)
        if found is not None and found.best in listed:
            self._tuned[key] = found
            return TuneResult(key, found, [], tuning_cache.path_of(key))
        measured = measure_all(driver, program, inputs, backend, listed, config, repeats,
                               on_measured)
        best = next(m for m in measured if m.verdict == "best")
        entry = Tuned(best.candidate, best.seconds, measured[0].seconds)
        path = tuning_cache.store(key, entry)
        self._tuned[key] = entry
        return TuneResult(key, entry, measured, path)

    def tuned_config(self, program: Program, inputs: Sequence[Any], backend: str | None,
                     config: DispatchConfig) -> DispatchConfig:
        """``Driver.tuned_config`` (``config`` checked, untuned): routing, probing and
        reading the cache within ``config.timeout``."""
        driver, deadline = self.driver, Deadline.after(config.timeout)
        backend = backend or _routed(driver, program, config, deadline)
        key = self._key(program, inputs, backend, config, deadline)
        if key not in self._tuned:
            self._tuned[key] = tuning_cache.load(key)
        entry = self._tuned[key]
        return config if entry is None else entry.best.config(config)

    def _key(self, program: Program, inputs: Sequence[Any], backend: str,
             config: DispatchConfig, deadline: Deadline) -> TuneKey:
        driver = self.driver
        sizes = tuple(len(a) for a in abi.bind_inputs(program.check(), inputs))
        caps = driver.probe(backend, timeout=_left(deadline))
        return tuning_cache.key_for(program.fingerprint(), backend,
                                    driver.registry.get(backend).version, caps.identity,
                                    sizes, config)


def _routed(driver: Measuring, program: Program, config: DispatchConfig,
            deadline: Deadline) -> str:
    """The backend routing chooses for ``program``, within what is left of ``deadline``."""
    return driver.route(program, config=config.replace(timeout=_left(deadline))).backend


def _left(deadline: Deadline) -> float | None:
    """The time left of a tuning call's deadline, as the timeout of its next step (None:
    no deadline); its expiry where none is left."""
    left = deadline.left()
    if left == 0.0:
        raise deadline.expired_error("tuning routed and probed the backend",
                                     "Give the call a longer DispatchConfig.timeout.")
    return left


def measure_all(driver: Measuring, program: Program, inputs: Sequence[Any], backend: str,
                found: list[Candidate], base: DispatchConfig, repeats: int,
                on_measured: Callable[[Measured], None] | None = None) -> list[Measured]:
    """Every candidate measured; the first (the program's own) sets the bytes the others
    must give. The fastest that gives them is marked ``best``."""
    check_repeats(repeats)
    out: list[Measured] = []
    reference = None
    for candidate in found:
        try:
            seconds, outputs = _time(driver, program, inputs, backend, candidate, base, repeats)
        except VyreError as exc:
            if reference is None:  # the program's own configuration must run
                raise
            row = Measured(candidate, None, "failed", exc.cause.splitlines()[0])
        else:
            if reference is None:
                reference = outputs
                row = Measured(candidate, seconds, "ok")
            else:
                divergence = outputs_divergence(program, reference, outputs, 0)
                row = Measured(candidate, seconds, "ok") if divergence is None else \
                    Measured(candidate, None, "rejected", f"other bytes: {divergence}")
        out.append(row)
        if on_measured is not None:
            on_measured(row)
    best = min((i for i, m in enumerate(out) if m.verdict == "ok"),
               key=lambda i: out[i].seconds)
    out[best] = Measured(out[best].candidate, out[best].seconds, "best")
    return out


def check_repeats(repeats: Any) -> None:
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise InvalidConfigError(f"repeats={repeats!r} must be an int >= 1",
                                 "Pass how many timed runs each candidate gets, e.g. 5.")


def _time(driver: Measuring, program: Program, inputs: Sequence[Any], backend: str,
          candidate: Candidate, base: DispatchConfig, repeats: int
          ) -> tuple[float, list[np.ndarray]]:
    config = candidate.config(base).replace(profile=True)
    pipeline = driver.compile(program, backend=backend, config=config)
    first = pipeline.dispatch(inputs, config)  # (warm-up: caches, first touch of memory)
    outputs = [np.array(a, copy=True) for a in first]
    best = None
    for _ in range(repeats):
        timing = pipeline.dispatch(inputs, config).timing
        assert timing is not None  # (profile=True)
        ns = timing.device_ns if timing.device_ns is not None else timing.wall_ns
        best = ns if best is None else min(best, ns)
    return best / 1e9, outputs
