"""A Prometheus endpoint for `regen generate --metrics-port`.

The collector reads the latest progress snapshot at scrape time, so the metrics are the
same numbers `regen status` shows, with no second set of counters to keep in step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from regen.errors import ConfigError


class SnapshotCollector(Collector):
    def __init__(self) -> None:
        self.snap: dict[str, Any] | None = None

    def collect(self) -> Iterator[Any]:
        snap = self.snap
        if snap is None or "servers" not in snap:
            return
        session = snap["session"]
        yield CounterMetricFamily(
            "regen_completions", "Completions written", value=session["completed"]
        )
        yield CounterMetricFamily(
            "regen_completion_tokens", "Completion tokens", value=session["completion_tokens"]
        )
        yield CounterMetricFamily(
            "regen_prompt_tokens", "Prompt tokens", value=session["prompt_tokens"]
        )
        errors = CounterMetricFamily("regen_errors", "Errors by type", labels=["type"])
        for kind, count in snap["errors_by_type"].items():
            errors.add_metric([kind], count)
        yield errors
        yield GaugeMetricFamily(
            "regen_remaining", "Items left to generate", value=snap["remaining"]
        )
        in_flight = GaugeMetricFamily(
            "regen_server_in_flight", "Requests in flight", labels=["server"]
        )
        latency = GaugeMetricFamily(
            "regen_server_latency_seconds", "EWMA request latency", labels=["server"]
        )
        healthy = GaugeMetricFamily("regen_server_healthy", "1 if in rotation", labels=["server"])
        for s in snap["servers"]:
            in_flight.add_metric([s["url"]], s["in_flight"])
            latency.add_metric([s["url"]], s["latency_ewma_s"])
            healthy.add_metric([s["url"]], 1.0 if s["state"] == "healthy" else 0.0)
        yield from (in_flight, latency, healthy)
        alarms = GaugeMetricFamily("regen_quality_rate", "Rolling quality rates", labels=["kind"])
        for kind, rate in snap["quality"]["rates"].items():
            alarms.add_metric([kind], rate)
        yield alarms


class MetricsEndpoint:
    def __init__(self, collector: SnapshotCollector | None) -> None:
        self.collector = collector

    def wrap(self, reporter: Callable[[dict], None]) -> Callable[[dict], None]:
        if self.collector is None:
            return reporter
        collector = self.collector

        def report(snap: dict) -> None:
            if "servers" in snap:
                collector.snap = snap
            reporter(snap)

        return report


@contextlib.contextmanager
def serve_metrics(host: str, port: int | None) -> Iterator[MetricsEndpoint]:
    if port is None:
        yield MetricsEndpoint(None)
        return
    collector = SnapshotCollector()
    registry = CollectorRegistry()
    registry.register(collector)
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise ConfigError(
            f"cannot serve metrics on {host}:{port}: {exc.strerror}",
            hint="pick another --metrics-port",
        ) from exc
    try:
        yield MetricsEndpoint(collector)
    finally:
        server.shutdown()
        thread.join(timeout=5)
