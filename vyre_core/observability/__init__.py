"""Exports of what a driver observes, each behind an optional dependency: Prometheus
(``prometheus.py``, the ``prometheus`` extra) and OpenTelemetry spans (``tracing.py``,
the ``opentelemetry`` extra). The counters themselves are the pools'
(``supervisor/metrics.py``), read with ``Driver.metrics()``."""
