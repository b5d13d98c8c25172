"""``vyre conform --exhaustive --all-inputs``: every input of each unary transcendental
(2^32 for f32, 2^16 for f16) and every f16 pair of ``pow`` and ``atan2`` (2^32), run on
a backend in chunks and compared by digest with the correctly rounded results recorded
from the oracle (docs/design-42.md section 6). f32 ``pow`` and ``atan2`` (2^64 pairs)
get a structured sample instead: the 2^24 pairs of the sweep (``sweep.operands``).

The inputs are made in the kernel (``bits = base + global_id``, the float read from
them by ``bitcast``; an f16 pair takes its first operand from the low 16 bits and its
second from the high 16), so nothing is uploaded but ``base``; each dispatch covers
``DISPATCH`` lanes (the reference's memory: design 6.3). A chunk's results are hashed
(``digests``); only a chunk whose digest differs from the record is recomputed by the
oracle, to list its misrounded inputs. Every finished chunk is appended to a JSON-lines
log in the run directory: a run started again over the same directory skips them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, as_completed
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from vyre_core import __version__ as vyre_version
from vyre_core import ir
from vyre_core.config import DispatchConfig
from vyre_core.conformance import digests, sweep
from vyre_core.conformance.oracle import BINARY, FORMATS, UNARY
from vyre_core.errors import InvalidConfigError, VyreError
from vyre_core.mathlib.library import version as math_library_version

CHUNK_BITS = 24
DISPATCH = 1 << 22
FIRST = 20  # misrounded inputs listed per chunk
DTYPES = ("f32", "f16")
Oracle = Callable[..., np.ndarray]  # (op, dtype, *operands) -> correctly rounded values


@dataclass(frozen=True)
class Suite:
    """One (op, dtype): its inputs, chunk by chunk, and the kernel computing them."""

    op: str
    dtype: str

    @property
    def sampled(self) -> bool:
        return self.dtype == "f32" and self.op in BINARY

    @property
    def count(self) -> int:
        if self.sampled:
            return sweep.DEFAULT_INPUTS
        return 1 << (16 if self.dtype == "f16" and self.op in UNARY else 32)

    def chunk_size(self, chunk_bits: int) -> int:
        return min(self.count, 1 << chunk_bits)

    def chunks(self, chunk_bits: int) -> int:
        return self.count // self.chunk_size(chunk_bits)

    def operands(self, start: int, n: int) -> list[np.ndarray]:
        """The inputs ``start .. start + n`` as arrays of the dtype, in the op's order."""
        if self.sampled:
            return [a[start:start + n] for a in _sample(self.op)]
        bits = np.arange(start, start + n, dtype=np.uint64)
        if self.dtype == "f32":
            return [bits.astype(np.uint32).view(np.float32)]
        if self.op in UNARY:
            return [bits.astype(np.uint16).view(np.float16)]
        return [(bits & 0xFFFF).astype(np.uint16).view(np.float16),
                (bits >> 16).astype(np.uint16).view(np.float16)]

    def inputs(self, start: int, n: int) -> list[np.ndarray]:
        """What one dispatch of ``program(n)`` is given for inputs ``start ..``."""
        if self.sampled:
            return self.operands(start, n)
        return [np.array([start], np.uint32)]

    def program(self, n: int) -> ir.Program:
        return _program(self.op, self.dtype, n)

    def expected(self, start: int, n: int, oracle: Oracle) -> np.ndarray:
        """The oracle's result bits for inputs ``start ..``, ``DISPATCH`` at a time."""
        fmt = FORMATS[self.dtype]
        return np.concatenate([
            np.asarray(oracle(self.op, self.dtype, *self.operands(s, min(DISPATCH,
                                                                      start + n - s))),
                       fmt.kind).view(fmt.bits)
            for s in range(start, start + n, DISPATCH)])


@cache
def _sample(op: str) -> list[np.ndarray]:
    parts = list(sweep.operands(op, sweep.DEFAULT_INPUTS))
    return [np.concatenate(column) for column in zip(*parts, strict=True)]


@cache
def _program(op: str, dtype: str, n: int) -> ir.Program:
    bits_type = ir.u32 if dtype == "f32" else ir.u16
    k = ir.Kernel(workgroup=(256,))
    i = k.let("i", ir.global_id(0))
    if dtype == "f32" and op in BINARY:
        args = [k.read(name, ir.f32, n)[i] for name in ("x", "y")]
    else:
        base = k.read("base", ir.u32, 1)
        bits = k.let("bits", base[0] + i)
        if dtype == "f32":
            args = [ir.bitcast(bits, ir.f32)]
        elif op in UNARY:
            args = [ir.bitcast(bits.cast(ir.u16), ir.f16)]
        else:
            args = [ir.bitcast((bits & 0xFFFF).cast(ir.u16), ir.f16),
                    ir.bitcast((bits >> 16).cast(ir.u16), ir.f16)]
    out = k.output("out", bits_type, n)
    out[i] = ir.bitcast(getattr(ir, op)(*args), bits_type)  # (the IR's names are the ops')
    return k.build()


# -- selection ---------------------------------------------------------------------------

def suites(ops: Iterable[str] | None = None,
           dtypes: Iterable[str] | None = None) -> list[Suite]:
    """The (op, dtype) pairs selected, every one by default; a bad name raises before any
    work."""
    ops = list(ops or (*UNARY, *BINARY))
    dtypes = list(dtypes or DTYPES)
    for name, given, known in (("op", ops, (*UNARY, *BINARY)), ("dtype", dtypes, DTYPES)):
        unknown = [g for g in given if g not in known]
        if unknown:
            raise InvalidConfigError(f"no such {name} here: {', '.join(unknown)} (--{name})",
                                     f"Use one or more of {', '.join(known)}.")
    return [Suite(op, dtype) for dtype in dtypes for op in ops]


def parse_chunks(text: str) -> list[int]:
    """``"0:16"`` (a range, its end excluded), ``"3"``, or a comma list of either."""
    chosen: list[int] = []
    for part in text.split(","):
        try:
            if ":" in part:
                low, high = (int(p) for p in part.split(":"))
                chosen += range(low, high)
            else:
                chosen.append(int(part))
        except ValueError:
            raise InvalidConfigError(f"not a chunk number or a range: {part!r} (--chunks "
                                     f"{text!r})", "Write e.g. 0:16, 5 or 0:4,10,12.") from None
    if not chosen or min(chosen) < 0:
        raise InvalidConfigError(f"no chunk selected by --chunks {text!r}",
                                 "Give chunk numbers from 0, e.g. 0:16.")
    return sorted(set(chosen))


def plan(selected: list[Suite], chunks: list[int] | None,
         chunk_bits: int) -> list[tuple[Suite, int]]:
    """Every (suite, chunk) to run: ``chunks`` of each suite that has them (all of them
    by default)."""
    if not 8 <= chunk_bits <= 24:
        raise InvalidConfigError(f"chunk bits {chunk_bits}: out of range",
                                 "Use 8 to 24 (2^24 inputs a chunk is the record's).")
    most = max(s.chunks(chunk_bits) for s in selected)
    if chunks and max(chunks) >= most:
        raise InvalidConfigError(f"chunk {max(chunks)} (--chunks) is past the last one "
                                 f"({most - 1}) of every selected op",
                                 f"Select chunks below {most}.")
    return [(s, c) for s in selected for c in (chunks or range(s.chunks(chunk_bits)))
            if c < s.chunks(chunk_bits)]


# -- results and the run directory -------------------------------------------------------

@dataclass
class ChunkResult:
    backend: str          # "oracle" for a chunk recorded
    op: str
    dtype: str
    chunk: int
    chunk_bits: int
    inputs: int
    digest: str
    expected: str | None  # the recorded digest (None when recording)
    seconds: float        # the backend's dispatches and hashing (the oracle's when recording)
    misrounded: int = 0
    first: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    code: str = ""  # what computed it (``code_of``): a run resumes only the same code's

    @property
    def key(self) -> tuple:
        return (self.backend, self.op, self.dtype, self.chunk, self.chunk_bits)

    @property
    def ok(self) -> bool:
        return self.error is None and self.misrounded == 0


#: What computes a recorded chunk: the oracle of this version of vyre.
ORACLE_CODE = f"vyre {vyre_version} oracle"


def code_of(driver: Any, backend: str) -> str:
    """What computes a chunk on ``backend``: vyre's version, the math library's (its
    functions' digest) and the backend's. A run directory's results are taken again only
    for the same; after editing a backend without changing its version, use a new
    ``--run-dir``."""
    versions = {r.id: r.version for r in driver.backends()}
    return (f"vyre {vyre_version} library {math_library_version()} "
            f"{backend} {versions.get(backend, 'unknown')}")


class RunLog:
    """The JSON-lines log of finished chunks in ``directory``: what a run resumes from (a
    line that does not parse, cut short by a kill, is run again)."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.file = directory / "chunks.jsonl"
        self.done: dict[tuple, ChunkResult] = {}
        if self.file.exists():
            for line in self.file.read_text().splitlines():
                try:
                    result = ChunkResult(**json.loads(line))
                except (ValueError, TypeError):
                    continue
                self.done[result.key] = result

    def finished(self, key: tuple, expected: str | None, code: str) -> ChunkResult | None:
        """The logged result of ``key`` if the same ``code`` checked it against the same
        record (an errored chunk runs again)."""
        result = self.done.get(key)
        if result is None or result.error is not None or result.expected != expected or \
                result.code != code:
            return None
        return result

    def append(self, result: ChunkResult) -> None:
        self.done[result.key] = result
        with self.file.open("a") as f:
            f.write(json.dumps(asdict(result)) + "\n")


# -- recording ---------------------------------------------------------------------------

def record_chunk(suite: Suite, chunk: int, chunk_bits: int, oracle: Oracle) -> ChunkResult:
    """The digest of the oracle's results of one chunk."""
    started = time.perf_counter()
    size = suite.chunk_size(chunk_bits)
    h = digests.hasher()
    digests.update(h, suite.expected(chunk * size, size, oracle))
    return ChunkResult("oracle", suite.op, suite.dtype, chunk, chunk_bits, size,
                       digests.hexdigest(h), None, time.perf_counter() - started,
                       code=ORACLE_CODE)


def record(work: list[tuple[Suite, int]], chunk_bits: int, directory: Path, log: RunLog,
           pool: Executor, oracle: Oracle,
           advance: Callable[[str], None] = lambda _label: None) -> list[ChunkResult]:
    """Record the digests of ``work`` into ``directory``, the file rewritten as each chunk
    finishes (with the log, what an interrupted record resumes from)."""
    for suite in {s for s, _ in work}:
        bits, _ = digests.read(directory, suite.dtype, suite.op)
        if bits not in (None, chunk_bits):
            raise InvalidConfigError(
                f"{digests.path(directory, suite.dtype, suite.op)} holds chunks of 2^{bits}"
                f" inputs, not 2^{chunk_bits}", "Record into another directory (--digests).")
    results, pending = [], []
    for suite, chunk in work:
        done = log.finished(("oracle", suite.op, suite.dtype, chunk, chunk_bits), None,
                            ORACLE_CODE)
        if done is not None and done.digest == digests.read(
                directory, suite.dtype, suite.op)[1].get(chunk):
            results.append(done)
            advance(f"{suite.dtype} {suite.op} {chunk} (logged)")
        else:
            pending.append(pool.submit(record_chunk, suite, chunk, chunk_bits, oracle))
    for result in _finished(pending):
        _, chunks = digests.read(directory, result.dtype, result.op)
        chunks[result.chunk] = result.digest
        digests.write(directory, result.dtype, result.op, chunk_bits, chunks)
        log.append(result)
        results.append(result)
        advance(f"{result.dtype} {result.op} {result.chunk}")
    return results


def _finished(pending: list[Future]) -> Iterator[ChunkResult]:
    """The results as they finish; on an interrupt (or any error) the chunks not yet
    started are cancelled, so that the run stops after those in flight (the log has every
    finished one)."""
    try:
        for future in as_completed(pending):
            yield future.result()
    finally:
        for future in pending:
            future.cancel()


# -- checking ----------------------------------------------------------------------------

def recorded(work: list[tuple[Suite, int]], chunk_bits: int,
             directory: Path) -> dict[tuple[str, str, int], str]:
    """The recorded digest of every chunk of ``work``; raises before any work where one
    is missing."""
    found: dict[tuple[str, str, int], str] = {}
    for suite in {s for s, _ in work}:
        bits, chunks = digests.read(directory, suite.dtype, suite.op)
        missing = [c for s, c in work if s == suite and (bits != chunk_bits or c not in chunks)]
        if missing:
            raise InvalidConfigError(
                f"no recorded digest of {suite.dtype} {suite.op} for chunk"
                f"{'s' if len(missing) > 1 else ''} {_ranges(missing)} (chunks of "
                f"2^{chunk_bits}) in {directory}",
                "Record them first: vyre conform --exhaustive --all-inputs --record "
                f"--op {suite.op} --dtype {suite.dtype} (with the same --chunks).")
        found.update({(suite.op, suite.dtype, c): chunks[c] for c in chunks})
    return found


def check_chunk(driver: Any, backend: str, suite: Suite, chunk: int, chunk_bits: int,
                expected: str, oracle: Oracle, listed: int | None = FIRST) -> ChunkResult:
    """One chunk on ``backend`` through ``driver``; its misrounded inputs listed (by the
    oracle; the first ``listed``, every one for None) only where its digest differs from
    ``expected``."""
    size = suite.chunk_size(chunk_bits)
    start = chunk * size
    config = DispatchConfig(timeout=600.0)
    result = ChunkResult(backend, suite.op, suite.dtype, chunk, chunk_bits, size, "",
                         expected, 0.0, code=code_of(driver, backend))
    started = time.perf_counter()
    h = digests.hasher()
    parts = []
    try:
        for s in range(start, start + size, DISPATCH):
            n = min(DISPATCH, start + size - s)
            got = np.asarray(driver.dispatch(suite.program(n), suite.inputs(s, n), backend=backend,
                                             config=config)[0])
            digests.update(h, got)
            parts.append(got)
    except VyreError as exc:
        result.error = exc.cause.splitlines()[0]
        return result
    result.digest = digests.hexdigest(h)
    result.seconds = time.perf_counter() - started
    if result.digest != expected:
        actual = np.concatenate(parts)
        want = suite.expected(start, size, oracle)
        wrong = np.flatnonzero(want != actual)
        result.misrounded = len(wrong)
        result.first = [_listed(suite, start + int(j), int(want[j]), int(actual[j]))
                        for j in wrong[:listed]]
        if not len(wrong):
            result.error = ("the digest differs from the record but every result is the "
                            "oracle's: the record is stale")
    return result


def check(driver: Any, backends: list[str], work: list[tuple[Suite, int]], chunk_bits: int,
          expected: dict[tuple[str, str, int], str], log: RunLog, threads: Executor,
          oracle: Oracle, advance: Callable[[str], None] = lambda _label: None
          ) -> list[ChunkResult]:
    """Every chunk of ``work`` on each backend, as many at once as ``threads`` runs (the
    driver's pool as many workers), each logged as it finishes; chunks the log has
    (checked against the same record by the same code) are taken from it."""
    results, pending = [], []
    for backend in backends:
        code = code_of(driver, backend)
        for suite, chunk in work:
            want = expected[(suite.op, suite.dtype, chunk)]
            done = log.finished((backend, suite.op, suite.dtype, chunk, chunk_bits), want,
                                code)
            if done is not None:
                results.append(done)
                advance(f"{backend} {suite.dtype} {suite.op} {chunk} (logged)")
            else:
                pending.append(threads.submit(check_chunk, driver, backend, suite, chunk,
                                              chunk_bits, want, oracle))
    for result in _finished(pending):
        log.append(result)
        results.append(result)
        advance(f"{result.backend} {result.dtype} {result.op} {result.chunk}")
    return sorted(results, key=lambda r: (r.backend, r.dtype, r.op, r.chunk))


def _listed(suite: Suite, index: int, want: int, got: int) -> dict[str, Any]:
    fmt = FORMATS[suite.dtype]
    operands = suite.operands(index, 1)
    return {"input": [int(a.view(fmt.bits)[0]) for a in operands],
            "input_value": [float(a[0]) for a in operands],
            "expected": want, "actual": got,
            "expected_value": float(np.array(want, fmt.bits).view(fmt.kind)),
            "actual_value": float(np.array(got, fmt.bits).view(fmt.kind))}


def _ranges(chunks: list[int]) -> str:
    shown = ", ".join(map(str, chunks[:8]))
    return shown + (f" and {len(chunks) - 8} more" if len(chunks) > 8 else "")


def summary(results: list[ChunkResult]) -> list[dict[str, Any]]:
    """One row per (backend, op, dtype): chunks, inputs, misrounded, errors, seconds."""
    rows: dict[tuple, dict[str, Any]] = {}
    for r in results:
        row = rows.setdefault((r.backend, r.op, r.dtype), {
            "backend": r.backend, "op": r.op, "dtype": r.dtype, "chunks": 0, "inputs": 0,
            "misrounded": 0, "errors": 0, "seconds": 0.0})
        row["chunks"] += 1
        row["inputs"] += r.inputs if r.error is None else 0
        row["misrounded"] += r.misrounded
        row["errors"] += r.error is not None
        row["seconds"] += r.seconds
    return list(rows.values())
