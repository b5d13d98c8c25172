"""A Prometheus collector over ``Driver.metrics()``: register it once and every scrape
reads the driver's pools as they are then (nothing is copied between scrapes, so there
is nothing to keep in step). Needs the ``prometheus`` extra (``prometheus_client``).

    from prometheus_client import start_http_server
    from vyre_core.observability import prometheus

    prometheus.register(driver)
    start_http_server(9400)
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from vyre_core.errors import InvalidConfigError

try:
    from prometheus_client import REGISTRY, CollectorRegistry
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        Metric,
    )
    from prometheus_client.registry import Collector
except ImportError as exc:  # (an optional extra: say how to get it)
    raise InvalidConfigError(
        f"vyre's Prometheus export needs prometheus_client, which is not installed ({exc})",
        "Install the export's dependency in this environment: "
        "pip install 'vyre[prometheus]'.") from None

if TYPE_CHECKING:
    from vyre_core.driver import Driver


class DriverCollector(Collector):
    """The metrics of one driver, read at each scrape; a driver that is gone (garbage
    collected) yields nothing, and a closed one only what it counted while open."""

    def __init__(self, driver: Driver) -> None:
        self._driver = weakref.ref(driver)

    def collect(self) -> Iterator[Metric]:
        driver = self._driver()
        pools = driver.metrics()["pools"] if driver is not None else {}
        return iter(families(pools))


def families(pools: dict[str, dict[str, Any]]) -> list[Metric]:
    """The Prometheus families of ``Driver.metrics()["pools"]``."""
    calls = CounterMetricFamily("vyre_calls", "Calls answered by a backend's pool.",
                                labels=["backend", "op", "outcome"])
    latency = HistogramMetricFamily("vyre_call_latency_seconds",
                                    "Seconds from a call's submission to its answer.",
                                    labels=["backend", "op"])
    sent = CounterMetricFamily("vyre_input_bytes", "Bytes of requests sent to workers.",
                               labels=["backend"])
    received = CounterMetricFamily("vyre_output_bytes", "Bytes of arrays workers returned.",
                                   labels=["backend"])
    restarts = CounterMetricFamily("vyre_worker_restarts",
                                   "Worker processes lost, by reason (each is replaced).",
                                   labels=["backend", "reason"])
    program = CounterMetricFamily("vyre_program_cache", "Dispatches sent to a worker that "
                                  "held their program (hit) or had to be sent it (miss).",
                                  labels=["backend", "result"])
    pipeline = CounterMetricFamily("vyre_pipeline_cache", "The backend's pipeline-cache "
                                   "lookups, as its workers report them.",
                                   labels=["backend", "result"])
    gauges = {name: GaugeMetricFamily(f"vyre_{name}", text, labels=["backend"])
              for name, text in (("queued", "Calls waiting for a worker."),
                                 ("in_flight", "Calls a worker is running."),
                                 ("workers", "Live worker processes."))}
    for backend, pool in sorted(pools.items()):
        for op, outcomes in pool["calls"].items():
            for outcome, n in outcomes.items():
                calls.add_metric([backend, op, outcome], n)
        bounds = pool["latency_bounds"]
        for op, histogram in pool["latency"].items():
            cumulative, buckets = 0, []
            for bound, n in zip([*(repr(b) for b in bounds), "+Inf"], histogram["counts"],
                                strict=True):
                cumulative += n
                buckets.append((bound, cumulative))
            latency.add_metric([backend, op], buckets, histogram["sum"])
        sent.add_metric([backend], pool["input_bytes"])
        received.add_metric([backend], pool["output_bytes"])
        for reason, n in pool["restarts"].items():
            restarts.add_metric([backend, reason], n)
        for family, counts in ((program, pool["program_cache"]),
                               (pipeline, pool["pipeline_cache"])):
            if counts is not None:
                family.add_metric([backend, "hit"], counts["hits"])
                family.add_metric([backend, "miss"], counts["misses"])
        for name, gauge in gauges.items():
            gauge.add_metric([backend], pool[name])
    return [calls, latency, sent, received, restarts, program, pipeline, *gauges.values()]


def register(driver: Driver, registry: CollectorRegistry = REGISTRY) -> DriverCollector:
    """Export ``driver``'s metrics through ``registry`` (the default: prometheus_client's
    global one); ``registry.unregister(collector)`` stops it."""
    collector = DriverCollector(driver)
    registry.register(collector)
    return collector
