"""Shadow in production: 1 in N dispatches that ran on another backend run again on the
reference in the background; a divergence is logged, counted and saved as a replay
bundle (``.vyir`` program, ``.npz`` inputs, ``.json`` config) that ``vyre run`` replays
anywhere. The caller never waits for it: a reference that falls behind drops samples
(counted), and ``close`` waits a bounded time for what is queued.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vyre_core.compare import outputs_divergence
from vyre_core.config import DispatchConfig
from vyre_core.errors import InvalidConfigError
from vyre_core.ir import Program
from vyre_core.saved import save_inputs

log = logging.getLogger("vyre.shadow")

#: Samples waiting for the reference; past this the newest is dropped (and counted).
QUEUE = 4

RunReference = Callable[[Program, Sequence[np.ndarray], DispatchConfig], Sequence[np.ndarray]]


def default_dir() -> Path:
    """Where bundles go unless told: ``$XDG_STATE_HOME/vyre/shadow``."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                            "state")
    return Path(base) / "vyre" / "shadow"


@dataclass(frozen=True)
class Sample:
    program: Program
    inputs: list[np.ndarray]   # copies, in ABI input order
    config: DispatchConfig
    outputs: list[np.ndarray]
    backend: str


@dataclass(frozen=True)
class ShadowOptions:
    """``Driver(shadow=ShadowOptions(every=N))``: 1 in ``every`` dispatches that another
    backend served run again on the reference, in the background; each divergence is saved
    as a replay bundle in ``dir`` (None: ``default_dir()``). ``every=None``: no shadow."""

    every: int | None = None
    dir: str | os.PathLike | None = None

    def __post_init__(self) -> None:
        if self.every is not None:
            _check_every(self.every)
        if self.dir is not None and not isinstance(self.dir, str | os.PathLike):
            raise InvalidConfigError(f"ShadowOptions(dir={self.dir!r}) is not a path",
                                     "Pass ShadowOptions(dir=...) a directory path (a str "
                                     "or a pathlib.Path), or leave it None for the default.")


def _check_every(n: object) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidConfigError(f"ShadowOptions(every={n!r}) must be an int of at least 1",
                                 "Pass ShadowOptions(every=N) to shadow 1 in N dispatches "
                                 "(1: every one), or leave it None.")


class Every:
    """The sampling rule, apart from any I/O: the 1st, (N+1)th, (2N+1)th... call is due."""

    def __init__(self, n: int) -> None:
        _check_every(n)
        self.n = n
        self._seen = 0
        self._lock = threading.Lock()

    def due(self) -> bool:
        with self._lock:
            self._seen += 1
            return (self._seen - 1) % self.n == 0


class ShadowSampler:
    """One background thread comparing samples with ``run_reference``; see the module."""

    def __init__(self, rule: Every, directory: Path, run_reference: RunReference) -> None:
        self.rule = rule
        self.directory = Path(directory)
        self._run = run_reference
        self._queue: queue.Queue[Sample | None] = queue.Queue(QUEUE)
        self._lock = threading.Lock()
        self.counts = {"sampled": 0, "compared": 0, "diverged": 0, "dropped": 0, "failed": 0}
        self.bundles: list[str] = []
        self._saved = 0
        self._thread = threading.Thread(target=self._work, name="vyre-shadow", daemon=True)
        self._thread.start()

    def offer(self, sample: Sample) -> None:
        """Queue ``sample`` for the reference, or drop it (counted) when the queue is full."""
        try:
            self._queue.put_nowait(sample)
            self._count("sampled")
        except queue.Full:
            self._count("dropped")

    def report(self) -> dict[str, Any]:
        with self._lock:
            return {**self.counts, "bundles": list(self.bundles), "every": self.rule.n,
                    "directory": str(self.directory)}

    def close(self, timeout: float = 30.0) -> None:
        """Let queued samples finish within ``timeout`` seconds in all; those still waiting
        then are dropped (counted), and the thread stops after its current sample."""
        deadline = time.monotonic() + timeout
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:  # the reference is stuck: nothing more is started
            with contextlib.suppress(queue.Empty):
                while True:
                    self._queue.get_nowait()
                    self._count("dropped", "sampled")
            with contextlib.suppress(queue.Full):  # (a dispatch may have offered meanwhile)
                self._queue.put_nowait(None)
        self._thread.join(max(0.0, deadline - time.monotonic()))

    # -- the background thread -------------------------------------------------------------

    def _count(self, what: str, undo: str | None = None) -> None:
        with self._lock:
            self.counts[what] += 1
            if undo is not None:
                self.counts[undo] -= 1

    def _work(self) -> None:
        while (sample := self._queue.get()) is not None:
            try:
                self._compare(sample)
            except Exception as exc:  # nothing may end the thread: logged, counted
                self._count("failed")
                log.warning("shadow: program %s on %r could not be compared with the "
                            "reference: %s: %s", sample.program.fingerprint()[:16],
                            sample.backend, type(exc).__name__, exc)

    def _compare(self, sample: Sample) -> None:
        expected = self._run(sample.program, sample.inputs, sample.config)
        self._count("compared")
        divergence = outputs_divergence(sample.program, expected, sample.outputs,
                                        sample.config.ulp_budget)
        if divergence is not None:
            self._count("diverged")
            self._save(sample, divergence)

    def _save(self, sample: Sample, divergence: str) -> None:
        fingerprint = sample.program.fingerprint()[:16]
        backend = re.sub(r"[^A-Za-z0-9_-]", "_", sample.backend)
        with self._lock:
            self._saved += 1
            base = f"{fingerprint}-{backend}-{os.getpid()}-{int(time.time())}-{self._saved}"
        program = self.directory / f"{base}.vyir"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            program.write_bytes(sample.program.to_wire())
            save_inputs(self.directory / f"{base}.npz", sample.program, sample.inputs)
            (self.directory / f"{base}.json").write_text(json.dumps(
                {"config": sample.config.to_dict(), "backend": sample.backend,
                 "divergence": divergence}, indent=1))
        except OSError as exc:
            log.warning("shadow: program %s on %r diverges from the reference (%s); its "
                        "bundle could not be saved in %s: %s", fingerprint, sample.backend,
                        divergence, self.directory, exc)
            return
        with self._lock:
            self.bundles.append(str(program))
        log.warning("shadow: program %s on %r diverges from the reference: %s; replay it "
                    "with `vyre run %s --backend %s --shadow`", fingerprint, sample.backend,
                    divergence, program, sample.backend)
