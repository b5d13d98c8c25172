"""When a thread that expects a message soon may spin for it (polling, yielding the CPU
between looks) instead of sleeping: the rule of every spin on the hot path (the worker's
after a reply, ``vyre_workers/server.py``), kept apart from the I/O so it is tested
without a process."""

from __future__ import annotations

#: A yield that took longer than this (seconds) gave the core to another process: the
#: machine is busy, and spinning stops for ``SPIN_BACKOFF`` seconds.
CONTENDED = 50e-6
SPIN_BACKOFF = 1.0


class Spinning:
    """Whether a thread may spin (yielding between looks) instead of sleeping, for
    ``seconds`` after each ``start`` (the worker: after each reply). On a quiet machine a
    message that comes within them is taken without a wake-up. On a busy one a yield hands the
    core to a competing process for its whole time slice (milliseconds under Linux's
    EEVDF scheduler), where a sleeping process is woken ahead of it: so the first yield
    that takes longer than ``CONTENDED`` stops the spinning for ``SPIN_BACKOFF`` seconds
    (a one-invocation cpu dispatch with a CPU-bound process on every core: 5.4 ms p50
    yielding, 0.22 ms sleeping; BENCHMARKS.md, issue 39). Pure: the times are given."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.until = 0.0       # spin until then
        self.calm_from = 0.0   # spin only after then (a backoff)

    def start(self, now: float) -> None:
        """Something went out at ``now`` whose answer may come soon."""
        self.until = now + self.seconds if now >= self.calm_from else 0.0

    def on(self, now: float) -> bool:
        return now < self.until

    def yielded(self, before: float, after: float) -> None:
        """A yield began at ``before`` and returned at ``after``."""
        if after - before > CONTENDED:
            self.until = 0.0
            self.calm_from = after + SPIN_BACKOFF
