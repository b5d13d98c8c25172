"""Metrics, their Prometheus export, OpenTelemetry spans and ``vyre top``, on a real driver
with real worker processes: counts are compared exactly with what the test did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from waiting import wait_for

from vyre_core import ir
from vyre_core.config import DispatchConfig
from vyre_core.driver import Driver
from vyre_core.errors import DispatchTimeoutError
from vyre_core.observability import prometheus
from vyre_core.supervisor import published, rundir
from vyre_core.testing import Workers

pytestmark = [pytest.mark.processes, pytest.mark.timeout(180)]
TIMEOUT = 60
WORDS = 1 << 18  # 1 MiB of input per call


def copy_program() -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    src = k.read("src", ir.u32)
    out = k.output("out", ir.u32, count=WORDS)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < WORDS):
        out[i] = src[i] + 1
    return k.build()


def test_metrics_count_calls_bytes_and_restarts_exactly() -> None:
    program = copy_program()
    data = np.arange(WORDS, dtype=np.uint32)
    with Driver() as drv:
        for _ in range(4):
            assert np.array_equal(drv.dispatch(program, [data], backend="reference")[0],
                                  data + 1)
        Workers(drv, "reference").kill()
        assert np.array_equal(drv.dispatch(program, [data], backend="reference")[0], data + 1)
        with pytest.raises(DispatchTimeoutError):
            drv.dispatch(program, [data], backend="reference",
                         config=DispatchConfig(timeout=1e-9))
        pool = drv.metrics()["pools"]["reference"]
    assert pool["calls"]["dispatch"] == {"ok": 5, "DispatchTimeoutError": 1}
    assert pool["output_bytes"] == 5 * 4 * WORDS
    assert pool["input_bytes"] == 6 * 4 * WORDS
    assert pool["restarts"] == {"crashed": 1}
    assert pool["latency"]["dispatch"]["count"] == 6
    assert pool["program_cache"]["hits"] >= 3  # (a new process must be sent it again)
    assert pool["queued"] == 0 and pool["in_flight"] == 0


def test_the_cpu_backend_reports_its_pipeline_cache_with_each_compile() -> None:
    program = copy_program()
    with Driver() as drv:
        drv.compile(program, backend="cpu")
        first = drv.metrics()["pools"]["cpu"]["pipeline_cache"]
        assert first["hits"] + first["misses"] == 1 and first["entries"] == 1
        drv.compile(program, backend="cpu")
        assert drv.metrics()["pools"]["cpu"]["pipeline_cache"] == {
            "hits": first["hits"] + 1, "misses": first["misses"], "entries": 1}


def test_prometheus_scrapes_the_drivers_pools_as_they_are() -> None:
    registry = CollectorRegistry(auto_describe=True)  # (as the global one: names checked)
    with Driver() as drv, Driver() as second:
        prometheus.register(drv, registry)
        prometheus.register(second, registry)
        for _ in range(3):
            drv.dispatch(copy_program(), [np.zeros(WORDS, np.uint32)], backend="reference")
        second.dispatch(copy_program(), [np.zeros(WORDS, np.uint32)], backend="reference")
        text = generate_latest(registry).decode()
        name, other = drv.metrics()["driver"], second.metrics()["driver"]
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("vyre_calls_total", (("backend", "reference"), ("driver", other),
                                         ("op", "dispatch"), ("outcome", "ok")))] == 1
    ref = ("backend", "reference"), ("driver", name)
    assert samples[("vyre_calls_total", (*ref, ("op", "dispatch"), ("outcome", "ok")))] == 3
    assert samples[("vyre_call_latency_seconds_count", (*ref, ("op", "dispatch")))] == 3
    assert samples[("vyre_output_bytes_total", ref)] == 3 * 4 * WORDS
    assert samples[("vyre_workers", ref)] == 1


def sdk_provider() -> TracerProvider:
    """The process's SDK tracer provider (a process sets one once: made if none is)."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(TracerProvider())
    return trace.get_tracer_provider()


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    """The spans the process ends, exported into memory."""
    exporter = InMemorySpanExporter()
    sdk_provider().add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


class Broken(SpanProcessor):
    """An exporter that fails as each span ends (a collector that is down, say)."""

    def __init__(self) -> None:
        self.on = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.on:
            raise ConnectionError("the collector is down")


def test_each_call_is_a_span_under_the_callers_span_with_its_label_and_outcome(
        spans: InMemorySpanExporter) -> None:
    spans.clear()
    program = copy_program()
    data = np.zeros(WORDS, np.uint32)
    with Driver(tracing=True) as drv, \
            trace.get_tracer("test").start_as_current_span("job") as job:
        drv.dispatch(program, [data], backend="reference",
                     config=DispatchConfig(label="step 1"))
        with pytest.raises(DispatchTimeoutError):
            drv.dispatch(program, [data], backend="reference",
                         config=DispatchConfig(timeout=1e-9, label="step 2"))
    ours = [s for s in spans.get_finished_spans() if s.name == "vyre dispatch"]
    assert [s.attributes["vyre.label"] for s in ours] == ["step 1", "step 2"]
    ok, failed = ours
    job_id = job.get_span_context().span_id
    assert ok.parent.span_id == job_id and failed.parent.span_id == job_id
    assert ok.attributes["vyre.backend"] == "reference"
    assert ok.attributes["vyre.output_bytes"] == ok.attributes["vyre.input_bytes"] == 4 * WORDS
    assert ok.attributes["vyre.generation"] == 1 and ok.status.status_code is StatusCode.UNSET
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes["error.type"] == "DispatchTimeoutError"
    assert failed.attributes["vyre.error_code"] == DispatchTimeoutError.code
    assert ok.start_time < ok.end_time <= failed.start_time


def test_a_background_routed_call_is_still_a_child_of_the_callers_span(
        spans: InMemorySpanExporter) -> None:
    spans.clear()
    with Driver(tracing=True) as drv, \
            trace.get_tracer("test").start_as_current_span("job") as job:
        pending = drv.dispatch_async(copy_program(), [np.zeros(WORDS, np.uint32)],
                                     backend="reference")  # (its pool starts in background)
        assert pending.result(timeout=TIMEOUT)[0].tobytes() == np.ones(WORDS, np.uint32).tobytes()
    (span,) = [s for s in spans.get_finished_spans() if s.name == "vyre dispatch"]
    assert span.parent.span_id == job.get_span_context().span_id


def test_a_failing_span_exporter_costs_spans_not_answers(
        spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture) -> None:
    broken = Broken()
    sdk_provider().add_span_processor(broken)
    data = np.arange(WORDS, dtype=np.uint32)
    try:
        with Driver(tracing=True) as drv:
            broken.on = True
            for _ in range(3):
                assert drv.dispatch(copy_program(), [data], backend="reference")[0].tobytes() \
                    == (data + 1).tobytes()
    finally:
        broken.on = False
    warnings = [r for r in caplog.records if "could not record the span" in r.getMessage()]
    assert len(warnings) == 1 and "the collector is down" in warnings[0].getMessage()


def test_uploads_count_the_bytes_that_cross() -> None:
    with Driver() as drv:
        buffer = drv.allocate_resident(16, backend="reference")
        buffer.upload([1.0, 2.0])  # (two float64)
        buffer.upload(b"abcdefghijklmnop")
        assert drv.metrics()["pools"]["reference"]["input_bytes"] == 32
        assert buffer.download() == b"abcdefghijklmnop"


def test_without_tracing_no_span_is_made(spans: InMemorySpanExporter) -> None:
    spans.clear()
    with Driver() as drv:
        drv.dispatch(copy_program(), [np.zeros(WORDS, np.uint32)], backend="reference")
    assert not [s for s in spans.get_finished_spans() if s.name.startswith("vyre")]


def test_tracing_without_opentelemetry_is_refused_with_a_fix() -> None:
    script = ("import sys; sys.modules['opentelemetry'] = None\n"
              "from vyre_core.driver import Driver\n"
              "Driver(tracing=True)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert out.returncode == 1
    assert "tracing=True without OpenTelemetry installed" in out.stderr
    assert "pip install 'vyre[opentelemetry]'" in out.stderr


def vyre_top(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vyre_core.cli", "top", *args],
                          capture_output=True, text=True, timeout=TIMEOUT, env=os.environ)


def test_top_shows_a_running_drivers_workers_calls_and_latency(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(rundir.ENV, str(tmp_path))
    base = rundir.base_dir()
    with Driver(workers=2) as drv:
        for _ in range(20):
            drv.dispatch(copy_program(), [np.zeros(WORDS, np.uint32)], backend="reference")

        def calls() -> int:
            drivers = published.running_drivers(base)
            pool = drivers[0]["pools"].get("reference", {}) if drivers else {}
            return pool.get("metrics", {}).get("calls", {}).get("dispatch", {}).get("ok", 0)

        wait_for(lambda: calls() == 20, TIMEOUT, "the driver to publish its 20 calls")
        out = vyre_top("--json", "--iterations", "2", "--interval", "0.2")
        assert out.returncode == 0, out.stderr
        frames = [json.loads(line) for line in out.stdout.splitlines()]
        assert len(frames) == 2
        (driver,) = frames[-1]["drivers"]
        (pool,) = driver["pools"]
        assert driver["pid"] == os.getpid() and pool["backend"] == "reference"
        live = {w["pid"] for w in drv.status()["pools"]["reference"]["workers"]}
        assert {w["pid"] for w in pool["workers"]} == live
        assert [w["generation"] for w in pool["workers"]] == [1, 1]
        (dispatch,) = [op for op in pool["ops"] if op["op"] == "dispatch"]
        assert dispatch["calls"] == 20 and dispatch["errors"] == 0
        assert 0 < dispatch["p50"] <= dispatch["p90"] <= dispatch["p99"]
        table = vyre_top("--iterations", "1")
        assert table.returncode == 0, table.stderr
        assert f"driver pid {os.getpid()}: reference running" in table.stdout
        assert "dispatch" in table.stdout and "p99" in table.stdout
    out = vyre_top("--iterations", "1")
    assert out.returncode == 0 and "no running vyre driver" in out.stdout, out.stdout


@pytest.mark.parametrize("args, error", [
    (["--interval", "0"], "not between 0.1 and 60"),
    (["--interval", "nan"], "not between 0.1 and 60"),
    (["--iterations", "0"], "is not 1 or more")])
def test_top_refuses_bad_arguments(args: list[str], error: str) -> None:
    out = vyre_top(*args)
    assert out.returncode == 2 and error in out.stderr
