"""What a pool counts, for ``Driver.metrics()``, the Prometheus collector and ``vyre top``:
calls by operation and outcome, their latency as a histogram, bytes carried each way,
worker processes lost by reason, and the two caches a call can hit (the worker's copy of a
program, the backend's compiled pipelines). Pure bookkeeping, so it is tested without a
process: the pool's rules own one and feed it under the pool's lock (one clock read per
call, taken by the pool's shell), and snapshots are plain dicts that travel as JSON."""

from __future__ import annotations

import bisect
import math
from collections import deque
from typing import Any

#: Latency bucket upper bounds (seconds): powers of two from 2^-16 s (15 us) to 2^7 s
#: (128 s), one more bucket above. Percentiles read from them are within a factor of two,
#: interpolated inside the bucket as Prometheus's ``histogram_quantile`` does.
BOUNDS: tuple[float, ...] = tuple(2.0 ** k for k in range(-16, 8))

#: How many of the latest latencies a histogram keeps as they are: a percentile of at most
#: that many calls is read from them exactly (nearest rank), never made up from the edges of
#: a bucket (one call of 0.1 s is 0.1 s at p50, p90 and p99).
EXACT = 32

#: Why a worker process was lost (the ``reason`` of ``restarts``): a bounded vocabulary,
#: so it can label a Prometheus series.
RESTART_REASONS = (
    "crashed",        # exited on its own (a signal, an exit code)
    "start_failed",   # died or hung before it said hello
    "unresponsive",   # silent, stuck, or its lane unreachable: killed
    "deadline",       # a request ran past its deadline: stopped
    "cancelled",      # a cancelled call did not stop within Timeouts.cancel_grace
    "recycled",       # recycle_after / recycle_rss_bytes
    "device_lost",    # its device could not be recovered in place
    "protocol",       # an unreadable hello, a slot it could not take over
    "fork_server",    # its fork server went, and it with it
    "pool_failed",    # stopped because the pool failed (restarted after the cool-down)
)


def data_bytes(arrays: list[Any]) -> int:
    """The bytes of a reply's arrays (anything else in it counts nothing)."""
    return sum(getattr(a, "nbytes", 0) for a in arrays)


class Histogram:
    """Counts per bucket of ``BOUNDS`` (the last is everything above), with sum, count, the
    least and greatest value, and the latest EXACT values as they are."""

    __slots__ = ("count", "counts", "high", "latest", "low", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(BOUNDS) + 1)
        self.sum = 0.0
        self.count = 0
        self.low = self.high = 0.0
        self.latest: deque[float] = deque(maxlen=EXACT)

    def add(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(BOUNDS, seconds)] += 1
        self.sum += seconds
        self.low = seconds if not self.count else min(self.low, seconds)
        self.high = seconds if not self.count else max(self.high, seconds)
        self.count += 1
        self.latest.append(seconds)

    def to_dict(self) -> dict[str, Any]:
        return {"counts": list(self.counts), "sum": self.sum, "count": self.count,
                "min": self.low, "max": self.high, "latest": list(self.latest)}


def percentile(histogram: dict[str, Any], q: float,
               bounds: tuple[float, ...] | list[float] = BOUNDS) -> float | None:
    """The ``q``-quantile (0..1) of a histogram as ``to_dict`` gives it over ``bounds``
    (a snapshot's ``latency_bounds``), None when empty or not over those bounds. Exact
    (nearest rank) when the histogram holds every value it counted (``latest``: at most
    EXACT); otherwise linear inside its bucket, in the top bucket the highest bound, and
    never outside the least and greatest value counted (``min``, ``max``)."""
    counts, total = histogram["counts"], histogram["count"]
    if not total or len(counts) != len(bounds) + 1:
        return None
    latest = histogram.get("latest") or ()  # (none from a vyre before they were kept)
    if len(latest) == total:
        ordered = sorted(latest)
        return ordered[max(0, min(total - 1, math.ceil(round(q * total, 9)) - 1))]
    estimate = _interpolated(counts, total, q, bounds)
    if "min" in histogram and "max" in histogram:
        estimate = min(max(estimate, histogram["min"]), histogram["max"])
    return estimate


def _interpolated(counts: list[int], total: int, q: float,
                  bounds: tuple[float, ...] | list[float]) -> float:
    rank, seen = q * total, 0
    for i, n in enumerate(counts):
        if n and seen + n >= rank:
            if i == len(bounds):
                return bounds[-1]
            low = bounds[i - 1] if i else 0.0
            return low + (bounds[i] - low) * max(0.0, rank - seen) / n
        seen += n
    return bounds[-1]


def since(newer: dict[str, Any], older: dict[str, Any] | None) -> dict[str, Any]:
    """What ``newer`` counted after ``older`` (two snapshots of one histogram); ``newer``
    whole when there is no older one or it is not an earlier state of the same one. The
    window keeps the values it counted when ``newer`` still holds them all (its latest),
    and ``newer``'s least and greatest value as bounds (a window's own lie between them)."""
    if older is None or older["count"] > newer["count"] \
            or len(older["counts"]) != len(newer["counts"]):
        return newer
    counts = [a - b for a, b in zip(newer["counts"], older["counts"], strict=True)]
    if min(counts) < 0:
        return newer
    window = {"counts": counts, "sum": newer["sum"] - older["sum"],
              "count": newer["count"] - older["count"]}
    latest = newer.get("latest") or []
    if window["count"] and window["count"] <= len(latest):
        window["latest"] = latest[-window["count"]:]
    window.update({k: newer[k] for k in ("min", "max") if k in newer})
    return window


class PoolMetrics:
    """One pool's counters since the driver started it (they survive worker restarts)."""

    def __init__(self) -> None:
        self.calls: dict[tuple[str, str], int] = {}     # (op, outcome) -> calls
        self.latency: dict[str, Histogram] = {}         # op -> seconds, submit to answer
        self.input_bytes = 0                            # the arrays of the calls
        self.output_bytes = 0                           # the arrays of their replies
        self.restarts: dict[str, int] = {}              # reason -> worker processes lost
        self.program_cache = [0, 0]                     # hits, misses
        # the backend's pipeline cache as each slot's live process last reported it:
        # slot -> (hits, misses, entries); what gone processes counted stays in
        # _cache_gone, so the totals never go down
        self._cache_now: dict[int, tuple[int, int, int]] = {}
        self._cache_gone = [0, 0]

    def answered(self, op: str, value: Any, seconds: float, input_bytes: int) -> None:
        """A caller's request was answered with ``value`` (``(reply, arrays)`` or an error)
        ``seconds`` after it was submitted."""
        if isinstance(value, BaseException):
            outcome = type(value).__name__
        else:
            outcome = "ok"
            self.output_bytes += data_bytes(value[1])
        key = (op, outcome)
        self.calls[key] = self.calls.get(key, 0) + 1
        histogram = self.latency.get(op)
        if histogram is None:
            histogram = self.latency[op] = Histogram()
        histogram.add(seconds)
        self.input_bytes += input_bytes

    def cache_reported(self, slot: int, report: Any) -> None:
        """The process at ``slot`` reported its backend's pipeline-cache counters
        ``[hits, misses, entries]``: what it has counted since it started."""
        if not isinstance(report, list | tuple) or len(report) != 3 or not all(
                isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in report):
            return  # (a worker's malformed report: not worth failing the call)
        held = self._cache_now.get(slot)
        if held is not None and (report[0] < held[0] or report[1] < held[1]):
            self._cache_gone[0] += held[0]  # (its backend started counting again)
            self._cache_gone[1] += held[1]
        self._cache_now[slot] = (report[0], report[1], report[2])

    def process_gone(self, slot: int, reason: str | None) -> None:
        """The process at ``slot`` exited: lost for ``reason`` (one of RESTART_REASONS),
        or stopped as the driver closes (None)."""
        if reason is not None:
            self.restarts[reason] = self.restarts.get(reason, 0) + 1
        held = self._cache_now.pop(slot, None)
        if held is not None:  # (its cache went with it; what it counted stays counted)
            self._cache_gone[0] += held[0]
            self._cache_gone[1] += held[1]

    def program_answered(self, held: bool) -> None:
        """A worker answered a dispatch whose program it already held (``held``), or had
        to be sent."""
        self.program_cache[0 if held else 1] += 1

    def snapshot(self) -> dict[str, Any]:
        now = self._cache_now.values()
        calls: dict[str, dict[str, int]] = {}
        for (op, outcome), n in sorted(self.calls.items()):
            calls.setdefault(op, {})[outcome] = n
        return {
            "calls": calls,
            "latency": {op: h.to_dict() for op, h in sorted(self.latency.items())},
            "latency_bounds": list(BOUNDS),
            "input_bytes": self.input_bytes,
            "output_bytes": self.output_bytes,
            "restarts": dict(sorted(self.restarts.items())),
            "program_cache": {"hits": self.program_cache[0],
                              "misses": self.program_cache[1]},
            "pipeline_cache": None if not self._cache_now and not any(self._cache_gone) else {
                "hits": self._cache_gone[0] + sum(c[0] for c in now),
                "misses": self._cache_gone[1] + sum(c[1] for c in now),
                "entries": sum(c[2] for c in now)},
        }
