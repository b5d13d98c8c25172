"""What a pool counts (``supervisor/metrics.py``), fed by the supervision rules as the
shells feed them, and what reads it: percentiles, the Prometheus families, and ``vyre
top``'s frames. Pure: no process, socket or clock (the fast tier)."""

from __future__ import annotations

import math
import re
import signal
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from supervision_harness import Shell

from vyre_core.boundary.messages import PROGRAM_NOT_HELD, Message, Op, Ran
from vyre_core.cli import top
from vyre_core.errors import (
    DeviceLostError,
    DispatchTimeoutError,
    InvalidInputError,
    ProtocolError,
)
from vyre_core.observability import prometheus
from vyre_core.supervisor import rules
from vyre_core.supervisor.metrics import (
    BOUNDS,
    EXACT,
    RESTART_REASONS,
    Histogram,
    PoolMetrics,
    percentile,
    since,
)

pytestmark = pytest.mark.fast


def test_a_latency_lands_in_the_first_bucket_whose_bound_holds_it() -> None:
    h = Histogram()
    for seconds in (0.0, BOUNDS[0], BOUNDS[0] * 1.01, BOUNDS[5], 1e9):
        h.add(seconds)
    assert h.counts[0] == 2 and h.counts[1] == 1 and h.counts[5] == 1
    assert h.counts[-1] == 1 and h.count == 5 and sum(h.counts) == 5
    assert h.sum == pytest.approx(BOUNDS[0] * 2.01 + BOUNDS[5] + 1e9)


def test_percentiles_interpolate_inside_the_bucket_and_stay_within_a_factor_of_two() -> None:
    h = Histogram()
    rng = np.random.default_rng(7)
    samples = rng.lognormal(math.log(3e-4), 0.6, 10_000)
    for s in samples:
        h.add(float(s))
    for q in (0.5, 0.9, 0.99):
        exact = float(np.quantile(samples, q))
        got = percentile(h.to_dict(), q)
        assert exact / 2 <= got <= exact * 2, (q, exact, got)
    # all in one bucket (2^-12, 2^-11]: the median is halfway through it, as far as the
    # counts alone say (a histogram from a vyre that kept no values, min or max)
    one = Histogram()
    for _ in range(10 * EXACT):
        one.add(3e-4)
    counts_only = {k: one.to_dict()[k] for k in ("counts", "sum", "count")}
    assert percentile(counts_only, 0.5) == pytest.approx((2 ** -12 + 2 ** -11) / 2)
    assert percentile(one.to_dict(), 0.5) == 3e-4  # (never above the greatest value)
    assert percentile(Histogram().to_dict(), 0.5) is None
    top_only = Histogram()
    for _ in range(EXACT + 1):
        top_only.add(1e6)
    assert percentile({k: top_only.to_dict()[k] for k in ("counts", "sum", "count")},
                      0.99) == BOUNDS[-1]
    assert percentile(top_only.to_dict(), 0.99) == 1e6  # (never below the least)


def test_a_percentile_of_few_calls_is_one_of_their_latencies_not_a_bucket_edge() -> None:
    """Issue 37: one ping of about 0.1 s showed p50/p90/p99 of 750/950/995 ms (read off
    the edges of its bucket)."""
    one = Histogram()
    one.add(0.6)
    assert [percentile(one.to_dict(), q) for q in (0.5, 0.9, 0.99)] == [0.6, 0.6, 0.6]
    few = Histogram()
    values = [0.003, 0.1, 0.002, 0.6, 0.004]
    for v in values:
        few.add(v)
    # nearest rank: the smallest value with at least q of them at or below it
    assert [percentile(few.to_dict(), q) for q in (0.2, 0.5, 0.6, 0.9, 0.99, 1.0)] == \
        [0.002, 0.004, 0.004, 0.6, 0.6, 0.6]
    many = Histogram()
    for i in range(EXACT + 1):  # (past EXACT: the buckets, within the least and greatest)
        many.add(0.1 + i * 1e-4)
    assert 0.1 <= percentile(many.to_dict(), 0.5) <= 0.1 + EXACT * 1e-4
    assert percentile(many.to_dict(), 0.99) == pytest.approx(0.1 + EXACT * 1e-4)


def test_a_window_of_few_calls_reads_their_own_latencies() -> None:
    h = Histogram()
    for _ in range(100):
        h.add(1e-3)
    older = h.to_dict()
    h.add(0.1)  # one call since the last snapshot: its own latency, however many before
    window = since(h.to_dict(), older)
    assert window["latest"] == [0.1]
    assert [percentile(window, q) for q in (0.5, 0.99)] == [0.1, 0.1]
    for _ in range(EXACT):
        h.add(2e-3)
    window = since(h.to_dict(), older)  # (EXACT + 1 calls: more than it kept)
    assert "latest" not in window and window["count"] == EXACT + 1
    assert 1e-3 <= percentile(window, 0.5) <= 0.1


def test_since_subtracts_an_earlier_state_and_keeps_the_newer_one_after_a_reset() -> None:
    h = Histogram()
    h.add(1e-3)
    older = h.to_dict()
    h.add(1.0)
    h.add(1.0)
    window = since(h.to_dict(), older)
    assert window["count"] == 2 and window["sum"] == pytest.approx(2.0)
    assert percentile(window, 0.5) > 0.5
    assert since(older, h.to_dict()) == older  # (a newer driver, counting from zero)
    assert since(h.to_dict(), None) == h.to_dict()


def test_answers_are_counted_by_op_and_outcome_with_bytes_and_latency() -> None:
    m = PoolMetrics()
    out = np.zeros(10, np.float32)
    m.answered("dispatch", ({}, [out, out, "not an array"]), 0.002, 100)
    m.answered("dispatch", InvalidInputError("x", "y"), 0.001, 30)
    m.answered("compile", ({}, []), 0.5, 7)
    snap = m.snapshot()
    assert snap["calls"] == {"compile": {"ok": 1},
                             "dispatch": {"InvalidInputError": 1, "ok": 1}}
    assert snap["input_bytes"] == 137 and snap["output_bytes"] == 80
    assert snap["latency"]["dispatch"]["count"] == 2
    assert snap["latency"]["compile"]["sum"] == 0.5
    assert snap["pipeline_cache"] is None  # (no worker reported one)


def test_pipeline_cache_reports_add_up_over_slots_and_never_go_down() -> None:
    m = PoolMetrics()
    m.cache_reported(0, [5, 2, 2])
    m.cache_reported(1, [3, 1, 1])
    assert m.snapshot()["pipeline_cache"] == {"hits": 8, "misses": 3, "entries": 3}
    m.cache_reported(0, [6, 2, 2])     # the same process, counting on
    assert m.snapshot()["pipeline_cache"] == {"hits": 9, "misses": 3, "entries": 3}
    m.process_gone(0, "crashed")       # its counts stay; its entries went with it
    assert m.snapshot()["pipeline_cache"] == {"hits": 9, "misses": 3, "entries": 1}
    m.cache_reported(0, [1, 1, 1])     # the new process counts from zero
    m.cache_reported(1, [0, 1, 1])     # a backend that started counting again
    assert m.snapshot()["pipeline_cache"] == {"hits": 10, "misses": 5, "entries": 2}
    for garbage in ("garbage", [1, 2], [1.0, 2, 3], [-1, 2, 3], [True, 2, 3], None):
        m.cache_reported(0, garbage)
    assert m.snapshot()["pipeline_cache"] == {"hits": 10, "misses": 5, "entries": 2}
    assert m.snapshot()["restarts"] == {"crashed": 1}


def _reply_with_cache(shell: Shell, report: tuple[int, int, int]) -> None:
    w = shell.worker(0)
    shell.machine.progress(0, w.current.tracking.id, w.current.tracking.id, shell.now)
    shell.machine.message(w.identity, Message(Ran(), w.current.tracking.id, w.generation,
                                              cache=report), shell.now)
    shell.run()


def test_a_device_recovered_in_place_keeps_counting_its_process_cache_once() -> None:
    shell = Shell()
    shell.submit()
    _reply_with_cache(shell, (4, 1, 1))
    req = shell.submit()
    shell.reply(0, req, error=DeviceLostError("gone", generation=1))
    shell.reply(0)  # Recovered(CAPS): generation 2, same process
    assert shell.worker(0).generation == 2
    shell.submit()
    _reply_with_cache(shell, (6, 1, 1))
    assert shell.machine.metrics_snapshot()["pipeline_cache"] == {
        "hits": 6, "misses": 1, "entries": 1}


def test_a_dispatch_sent_again_with_its_program_counts_one_miss() -> None:
    shell = Shell()
    shell.submit(fp="p1")
    shell.reply(0, value=1)
    req = shell.submit(fp="p1")               # the rules think the worker holds p1 ...
    shell.reply(0, req, error=ProtocolError("not held", "again", **{PROGRAM_NOT_HELD: True}))
    shell.reply(0, req, value=1)              # ... it did not: sent again with it
    assert shell.machine.metrics_snapshot()["program_cache"] == {"hits": 0, "misses": 2}
    assert shell.machine.metrics_snapshot()["calls"] == {"dispatch": {"ok": 2}}


def test_every_restart_cause_the_rules_name_is_in_the_vocabulary() -> None:
    source = "".join(path.read_text()  # (every file of the rules: they name the causes)
                     for path in sorted(Path(rules.__file__).parent.glob("*.py")))
    named = set(re.findall(r'cause="(\w+)"', source))
    assert named and named <= set(RESTART_REASONS), named - set(RESTART_REASONS)


def test_the_rules_count_answers_with_their_latency_from_submission() -> None:
    shell = Shell()
    req = shell.submit(label="a")
    shell.now += 0.25
    shell.reply(0, req, value=1)
    late = shell.submit(timeout=1.0)
    shell.receive(0, late)
    shell.advance(1.5)
    snap = shell.machine.metrics_snapshot()
    assert snap["calls"] == {"dispatch": {"DispatchTimeoutError": 1, "ok": 1}}
    assert isinstance(shell.result(late), DispatchTimeoutError)
    histogram = snap["latency"]["dispatch"]
    assert histogram["count"] == 2 and histogram["sum"] == pytest.approx(1.25, abs=0.06)
    assert snap["queued"] == 0 and snap["in_flight"] == 0


def _crash(shell: Shell) -> None:
    shell.submit()
    shell.receive(0)
    shell.die(0, -signal.SIGSEGV)


def _recycle(shell: Shell) -> None:
    shell.submit()
    shell.reply(0, value=1)
    shell.die(0, 0)  # (it leaves on the SHUTDOWN it was sent)


def _freeze(shell: Shell) -> None:
    shell.submit()
    shell.receive(0)
    shell.advance(31.0)  # silent past Timeouts.heartbeat while running: killed


def _never_start(shell: Shell) -> None:
    shell.auto_hello = False
    shell.submit()
    shell.advance(4.0)  # no hello within Timeouts.startup: killed


def _die_starting(shell: Shell) -> None:
    shell.auto_hello = False
    shell.submit()
    shell.die(0, 1)


def _overrun(shell: Shell) -> None:
    shell.submit(timeout=1.0)
    shell.receive(0)
    shell.advance(1.5)


def _lose_fork_server(shell: Shell) -> None:
    shell.submit()
    shell.die(0, -9, collateral=True)


@pytest.mark.parametrize("cause, reason", [
    (_crash, "crashed"), (_recycle, "recycled"), (_freeze, "unresponsive"),
    (_never_start, "start_failed"), (_die_starting, "start_failed"), (_overrun, "deadline"),
    (_lose_fork_server, "fork_server")])
def test_the_rules_count_each_lost_process_by_its_reason(cause, reason: str) -> None:
    shell = Shell(restart={"max_restarts": 20, "recycle_after": 1}, timeouts={"startup": 3.0})
    cause(shell)
    shell.obey_signals()
    assert shell.machine.metrics_snapshot()["restarts"] == {reason: 1}


def test_closing_the_pool_is_not_counted_as_a_restart() -> None:
    shell = Shell()
    shell.submit()
    shell.machine.close(shell.now)
    shell.run()
    shell.obey_signals()
    assert shell.machine.metrics_snapshot()["restarts"] == {}


def test_the_program_cache_counts_sends_to_workers_that_held_the_program() -> None:
    shell = Shell()
    for fp in ("p1", "p1", "p2", "p1"):
        shell.submit(fp=fp)
        shell.reply(0, value=1)
    assert shell.machine.metrics_snapshot()["program_cache"] == {"hits": 2, "misses": 2}


SNAPSHOT = {
    "backend": "cpu", "state": "running", "queued": 2, "in_flight": 1, "workers": 2,
    "calls": {"dispatch": {"ok": 3, "DispatchTimeoutError": 1}},
    "latency": {"dispatch": {"counts": [0] * 10 + [3] + [0] * 13 + [1], "sum": 300.004,
                             "count": 4}},
    "latency_bounds": list(BOUNDS), "input_bytes": 400, "output_bytes": 96,
    "restarts": {"crashed": 2}, "program_cache": {"hits": 3, "misses": 1},
    "pipeline_cache": {"hits": 1, "misses": 1, "entries": 1},
}


def test_the_prometheus_families_carry_every_counter_and_gauge() -> None:
    registry = CollectorRegistry()

    class Fixed:  # (what register reads: a driver's metrics())
        def __init__(self, name: str) -> None:
            self.name = name

        def metrics(self) -> dict:
            return {"driver": self.name, "pools": {"cpu": SNAPSHOT}}

    fixed, other = Fixed("d1"), Fixed("d2")
    prometheus.register(fixed, registry)
    prometheus.register(other, registry)  # (a second driver: its own series)
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(generate_latest(registry).decode())
               for s in family.samples}
    assert samples[("vyre_workers", (("backend", "cpu"), ("driver", "d2")))] == 2
    samples = {(name, tuple(x for x in labels if x != ("driver", "d1"))): value
               for (name, labels), value in samples.items() if ("driver", "d1") in labels}
    cpu = ("backend", "cpu")
    assert samples[("vyre_calls_total", (cpu, ("op", "dispatch"), ("outcome", "ok")))] == 3
    assert samples[("vyre_calls_total", (cpu, ("op", "dispatch"),
                                         ("outcome", "DispatchTimeoutError")))] == 1
    le = repr(BOUNDS[10])
    assert samples[("vyre_call_latency_seconds_bucket", (cpu, ("le", le),
                                                          ("op", "dispatch")))] == 3
    assert samples[("vyre_call_latency_seconds_bucket", (cpu, ("le", "+Inf"),
                                                          ("op", "dispatch")))] == 4
    assert samples[("vyre_call_latency_seconds_sum", (cpu, ("op", "dispatch")))] == 300.004
    assert samples[("vyre_input_bytes_total", (cpu,))] == 400
    assert samples[("vyre_output_bytes_total", (cpu,))] == 96
    assert samples[("vyre_worker_restarts_total", (cpu, ("reason", "crashed")))] == 2
    assert samples[("vyre_program_cache_total", (cpu, ("result", "hit")))] == 3
    assert samples[("vyre_pipeline_cache_total", (cpu, ("result", "miss")))] == 1
    assert samples[("vyre_queued", (cpu,))] == 2
    assert samples[("vyre_in_flight", (cpu,))] == 1
    assert samples[("vyre_workers", (cpu,))] == 2
    prometheus.unregister(other, registry)
    del fixed  # (the collector holds the driver weakly: gone, it yields nothing)
    assert "vyre_calls_total{" not in generate_latest(registry).decode()


def _published(at: float, counts: list[int], calls: int) -> dict:
    return {"backend": "cpu", "state": "running", "queued": 0, "published": at,
            "workers": [{"index": 0, "pid": 9, "generation": 2, "state": "busy",
                         "in_flight": 1, "served": calls, "restarts": 1, "silent_for": 0.0,
                         "spare": False}],
            "metrics": {"calls": {"dispatch": {"ok": calls}}, "latency_bounds": list(BOUNDS),
                        "latency": {"dispatch": {"counts": counts, "sum": 1.0,
                                                 "count": sum(counts)}},
                        "restarts": {"crashed": 1}}}


def _one(pool: dict) -> list[dict]:
    """``running_drivers()`` with one driver publishing ``pool``."""
    return [{"pid": 9, "run_dir": "/r/9-a", "pools": {"cpu": pool}}]


def test_top_rates_and_percentiles_are_over_the_time_between_snapshots() -> None:
    watch = top.Watch()
    slow = [0] * 25
    slow[20] = 10                      # 10 calls of about 16 s
    first = watch.frame(_one(_published(100.0, slow, 10)))
    op = first["drivers"][0]["pools"][0]["ops"][0]
    assert op["calls"] == 10 and op["per_s"] is None and op["p50"] > 8
    fast = list(slow)
    fast[2] = 200                      # then 200 calls of under 61 us, in 2 s
    same = watch.frame(_one(_published(100.0, slow, 10)))
    assert same["drivers"][0]["pools"][0]["ops"][0]["per_s"] is None  # (not republished)
    later = watch.frame(_one(_published(102.0, fast, 210)))
    pool = later["drivers"][0]["pools"][0]
    assert pool["ops"][0]["per_s"] == 100.0 and pool["ops"][0]["p99"] < 1e-4
    assert pool["restarts"] == {"crashed": 1} and pool["workers"][0]["generation"] == 2
    idle = watch.frame(_one(_published(103.0, fast, 210)))
    op = idle["drivers"][0]["pools"][0]["ops"][0]
    assert op["per_s"] == 0.0 and op["p99"] > 8  # (no calls lately: the whole history)
    assert watch.frame([])["drivers"] == []


def test_top_keeps_two_drivers_of_one_process_apart_and_reads_each_ones_bounds() -> None:
    watch = top.Watch()
    mine, theirs = [0] * 25, [0] * 25
    mine[2], theirs[20] = 10, 10
    watch.frame([{"pid": 9, "run_dir": "/r/a", "pools": {"cpu": _published(1.0, [*mine], 10)}},
                 {"pid": 9, "run_dir": "/r/b", "pools": {"cpu": _published(1.0, theirs, 10)}}])
    mine[2] = 30
    frame = watch.frame([
        {"pid": 9, "run_dir": "/r/a", "pools": {"cpu": _published(2.0, mine, 30)}},
        {"pid": 9, "run_dir": "/r/b", "pools": {"cpu": _published(2.0, theirs, 10)}}])
    a, b = (d["pools"][0]["ops"][0] for d in frame["drivers"])
    assert a["per_s"] == 20.0 and a["p99"] < 1e-4
    assert b["per_s"] == 0.0 and b["p50"] > 8
    other = _published(3.0, [1] * 40, 40)  # (a vyre with other bounds: no percentiles)
    other["metrics"]["latency_bounds"] = [1.0] * 10  # (not its 40 buckets)
    del other["metrics"]["restarts"]
    (op,) = watch.frame([{"pid": 9, "run_dir": "/r/a", "pools": {"cpu": other}}])[
        "drivers"][0]["pools"][0]["ops"]
    assert op["per_s"] == 40.0 and op["p50"] is None  # (unlike snapshots: all of it)
    old = {k: v for k, v in _published(4.0, mine, 1).items() if k != "metrics"}
    assert watch.frame([{"pid": 9, "run_dir": "/r/a", "pools": {"cpu": old}}])[
        "drivers"][0]["pools"][0]["ops"] == []  # (a vyre without metrics)


def test_top_renders_what_another_process_wrote_as_plain_text() -> None:
    watch = top.Watch()
    pool = _published(1.0, [1] + [0] * 24, 1)
    pool["backend"], pool["state"], pool["failure"] = "[red]x", "failed", "it [bold]broke"
    frame = watch.frame([{"pid": 9, "run_dir": "/r/9-a", "pools": {"[red]x": pool}}])
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(top.render(frame, "/base"))
    text = console.export_text()
    assert "[red]x" in text and "pool failed: it [bold]broke" in text and "8 us" in text


@pytest.mark.parametrize("value, shown", [(None, "-"), (math.nan, "-"), (2e-5, "20 us"),
                                          (0.0123, "12.3 ms"), (4.567, "4.57 s")])
def test_top_shows_seconds_in_a_readable_unit(value: float | None, shown: str) -> None:
    assert top._seconds(value) == shown


def test_op_names_in_metrics_are_the_protocol_ops() -> None:
    shell = Shell()
    shell.submit(op=Op.COMPILE)
    shell.reply(0, value=1)
    assert list(shell.machine.metrics_snapshot()["calls"]) == ["compile"]
