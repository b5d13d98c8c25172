"""A Prometheus collector over ``Driver.metrics()``: register it once and every scrape
reads the driver's pools as they are then (nothing is copied between scrapes, so there
is nothing to keep in step). Needs the ``prometheus`` extra (``prometheus_client``).

    from prometheus_client import start_http_server
    from vyre_core.observability import prometheus

    prometheus.register(driver)      # (each driver of the process; labelled by driver)
    start_http_server(9400)
"""

from __future__ import annotations

import threading
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

#: The collector of each registry (one per registry: metric names must not repeat in it).
_collectors: weakref.WeakKeyDictionary[CollectorRegistry, DriverCollector] = \
    weakref.WeakKeyDictionary()
_lock = threading.Lock()


class DriverCollector(Collector):
    """The metrics of the drivers registered with one registry, read at each scrape and
    labelled by ``driver`` (its run directory's name). Drivers are held weakly: one that
    is gone yields nothing, a closed one what it counted while open."""

    def __init__(self) -> None:
        self._drivers: weakref.WeakSet[Driver] = weakref.WeakSet()

    def add(self, driver: Driver) -> None:
        self._drivers.add(driver)

    def discard(self, driver: Driver) -> None:
        self._drivers.discard(driver)

    def collect(self) -> Iterator[Metric]:
        return iter(families([driver.metrics() for driver in list(self._drivers)]))


def families(drivers: list[dict[str, Any]]) -> list[Metric]:
    """The Prometheus families of some drivers' ``Driver.metrics()``."""
    labels = ["driver", "backend"]
    calls = CounterMetricFamily("vyre_calls", "Calls answered by a backend's pool.",
                                labels=[*labels, "op", "outcome"])
    latency = HistogramMetricFamily("vyre_call_latency_seconds",
                                    "Seconds from a call's submission to its answer.",
                                    labels=[*labels, "op"])
    sent = CounterMetricFamily("vyre_input_bytes", "Bytes of the calls' arrays.",
                               labels=labels)
    received = CounterMetricFamily("vyre_output_bytes", "Bytes of the arrays replies carried.",
                                   labels=labels)
    restarts = CounterMetricFamily("vyre_worker_restarts",
                                   "Worker processes lost, by reason (each is replaced).",
                                   labels=[*labels, "reason"])
    program = CounterMetricFamily("vyre_program_cache", "Dispatches answered by a worker "
                                  "that held their program (hit) or had to be sent it (miss).",
                                  labels=[*labels, "result"])
    pipeline = CounterMetricFamily("vyre_pipeline_cache", "The backend's pipeline-cache "
                                   "lookups, as its workers report them.",
                                   labels=[*labels, "result"])
    gauges = {name: GaugeMetricFamily(f"vyre_{name}", text, labels=labels)
              for name, text in (("queued", "Calls waiting for a worker."),
                                 ("in_flight", "Calls a worker is running."),
                                 ("workers", "Live worker processes."))}
    for driver in sorted(drivers, key=lambda d: d["driver"]):
        for backend, pool in sorted(driver["pools"].items()):
            at = [driver["driver"], backend]
            for op, outcomes in pool["calls"].items():
                for outcome, n in outcomes.items():
                    calls.add_metric([*at, op, outcome], n)
            bounds = [*(repr(b) for b in pool["latency_bounds"]), "+Inf"]
            for op, histogram in pool["latency"].items():
                cumulative, buckets = 0, []
                for bound, n in zip(bounds, histogram["counts"], strict=True):
                    cumulative += n
                    buckets.append((bound, cumulative))
                latency.add_metric([*at, op], buckets, histogram["sum"])
            sent.add_metric(at, pool["input_bytes"])
            received.add_metric(at, pool["output_bytes"])
            for reason, n in pool["restarts"].items():
                restarts.add_metric([*at, reason], n)
            for family, counts in ((program, pool["program_cache"]),
                                   (pipeline, pool["pipeline_cache"])):
                if counts is not None:
                    family.add_metric([*at, "hit"], counts["hits"])
                    family.add_metric([*at, "miss"], counts["misses"])
            for name, gauge in gauges.items():
                gauge.add_metric(at, pool[name])
    return [calls, latency, sent, received, restarts, program, pipeline, *gauges.values()]


def register(driver: Driver, registry: CollectorRegistry = REGISTRY) -> DriverCollector:
    """Export ``driver``'s metrics through ``registry`` (the default: prometheus_client's
    global one), next to any other driver registered there; ``unregister`` stops it."""
    with _lock:
        collector = _collectors.get(registry)
        if collector is None:
            collector = _collectors[registry] = DriverCollector()
            registry.register(collector)
        collector.add(driver)
    return collector


def unregister(driver: Driver, registry: CollectorRegistry = REGISTRY) -> None:
    """Stop exporting ``driver``'s metrics through ``registry``."""
    with _lock:
        collector = _collectors.get(registry)
        if collector is not None:
            collector.discard(driver)
