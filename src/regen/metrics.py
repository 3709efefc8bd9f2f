"""A Prometheus endpoint for `regen generate --metrics-port`.

The collector reads the latest progress snapshot at scrape time, so the metrics are the
same numbers `regen status` shows, with no second set of counters to keep in step.
Names follow Prometheus conventions: counters end in `_total`, durations are a histogram
in seconds, fractions end in `_ratio`; every series carries the `model`, and per-server
series the `server`. `examples/grafana-dashboard.json` is built on exactly these.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector

from regen.errors import ConfigError
from regen.fleet.server import LATENCY_BUCKETS

SERVER_LABELS = ["model", "server"]


class SnapshotCollector(Collector):
    def __init__(self) -> None:
        self.snap: dict[str, Any] | None = None
        self.model = ""

    def collect(self) -> Iterator[Any]:
        snap = self.snap
        if snap is None or "servers" not in snap:
            return
        yield from self._run_metrics(snap)
        yield from self._server_metrics(snap["servers"])

    def _run_metrics(self, snap: dict[str, Any]) -> Iterator[Any]:
        m, session = [self.model], snap["session"]
        for name, doc, value in (
            ("regen_completions", "Completions written by this session", session["completed"]),
            ("regen_failures", "Items recorded in errors/ by this session", session["failed"]),
            ("regen_completion_tokens", "Completion tokens", session["completion_tokens"]),
            ("regen_prompt_tokens", "Prompt tokens", session["prompt_tokens"]),
        ):
            yield _one(CounterMetricFamily(name, doc, labels=["model"]), m, value)
        for name, doc, value in (
            ("regen_items", "(prompt, sample) items in the input", snap["total"]),
            ("regen_items_finished", "Items in completions/ or errors/", snap["finished"]),
            ("regen_items_remaining", "Items left to generate", snap["remaining"]),
            ("regen_eta_seconds", "Estimated seconds left (from tokens)", snap["eta_s"] or 0),
        ):
            yield _one(GaugeMetricFamily(name, doc, labels=["model"]), m, value)
        yield from self._end_game_metrics(snap.get("end_game"))
        errors = CounterMetricFamily("regen_errors", "Errors by type", labels=["model", "type"])
        for kind, count in snap["errors_by_type"].items():
            errors.add_metric([self.model, kind], count)
        yield errors
        quality = GaugeMetricFamily(
            "regen_quality_ratio", "Rolling quality rates (0-1)", labels=["model", "kind"]
        )
        for kind, rate in snap["quality"]["rates"].items():
            quality.add_metric([self.model, kind], rate)
        yield quality

    def _end_game_metrics(self, end_game: dict[str, Any] | None) -> Iterator[Any]:
        """Copies raced against slow requests at the end of the batch, and the drain."""
        if end_game is None:
            return
        m = [self.model]
        for name, doc, value in (
            ("regen_endgame_copies", "End-game copies started", end_game["copies_started"]),
            ("regen_endgame_copies_won", "Copies that answered first", end_game["copies_won"]),
            (
                "regen_endgame_tokens_wasted",
                "Tokens spent on cancelled losers of a race (estimated)",
                end_game["copy_tokens_wasted"],
            ),
        ):
            yield _one(CounterMetricFamily(name, doc, labels=["model"]), m, value)
        drain = end_game["drain"]
        if drain is not None:
            for name, doc, value in (
                ("regen_drain_seconds", "End-of-batch drain so far", drain["seconds"]),
                ("regen_drain_idle_ratio", "Idle share of the fleet in it", drain["idle_ratio"]),
            ):
                yield _one(GaugeMetricFamily(name, doc, labels=["model"]), m, value)

    def _server_metrics(self, servers: list[dict[str, Any]]) -> Iterator[Any]:
        def family(kind: type, name: str, doc: str) -> Any:
            return kind(name, doc, labels=SERVER_LABELS)

        done = family(CounterMetricFamily, "regen_server_completions", "Completions per server")
        failed = family(CounterMetricFamily, "regen_server_failures", "Failed attempts")
        retries = family(CounterMetricFamily, "regen_retries", "Failed attempts sent again")
        aborted = family(CounterMetricFamily, "regen_server_aborts", "Answers the engine aborted")
        tokens = family(CounterMetricFamily, "regen_server_completion_tokens", "Tokens")
        in_flight = family(GaugeMetricFamily, "regen_server_in_flight", "Requests in flight")
        healthy = family(GaugeMetricFamily, "regen_server_healthy", "1 if in rotation")
        level = family(
            GaugeMetricFamily,
            "regen_server_concurrency",
            "Requests in flight this server may hold now (the live level, or the fixed one)",
        )
        cap = family(GaugeMetricFamily, "regen_server_concurrency_cap", "Most it may hold")
        affine = family(
            CounterMetricFamily,
            "regen_server_affinity_sends",
            "Requests sent here because it holds their prefix, not for being least-loaded",
        )
        steps = family(
            CounterMetricFamily,
            "regen_server_spec_verify_steps",
            "The serving drafter's verify steps, as the engine reported per answer",
        )
        accepted = family(
            CounterMetricFamily,
            "regen_server_spec_accepted_tokens",
            "Draft tokens those verify steps accepted",
        )
        length = family(
            GaugeMetricFamily,
            "regen_server_spec_acceptance_length",
            "Tokens per verify step (bonus included), as vLLM's mean acceptance length",
        )
        latency = family(
            HistogramMetricFamily, "regen_request_duration_seconds", "Successful request time"
        )
        for s in servers:
            labels = [self.model, s["url"]]
            done.add_metric(labels, s["completed"])
            failed.add_metric(labels, s["failed"])
            retries.add_metric(labels, s.get("retried", 0))
            aborted.add_metric(labels, s.get("aborted", 0))
            tokens.add_metric(labels, s["completion_tokens"])
            in_flight.add_metric(labels, s["in_flight"])
            affine.add_metric(labels, s.get("affinity_sends", 0))
            if s.get("concurrency") is not None:
                level.add_metric(labels, s["concurrency"])
                cap.add_metric(labels, s["concurrency_cap"])
            healthy.add_metric(labels, 1.0 if s["state"] == "healthy" else 0.0)
            if s.get("spec_steps"):
                steps.add_metric(labels, s["spec_steps"])
                accepted.add_metric(labels, s["spec_accepted_tokens"])
                length.add_metric(labels, s["acceptance_length"])
            counts = s.get("latency_counts") or [0] * (len(LATENCY_BUCKETS) + 1)
            cumulative = list(itertools.accumulate(counts))
            bounds = [str(b) for b in LATENCY_BUCKETS] + ["+Inf"]
            latency.add_metric(
                labels, list(zip(bounds, cumulative, strict=True)), s.get("latency_sum_s", 0.0)
            )
        yield from (done, failed, retries, aborted, tokens, in_flight, healthy, latency)
        yield from (level, cap, affine)
        yield from (steps, accepted, length)


def _one(family: Any, labels: list[str], value: float) -> Any:
    family.add_metric(labels, value)
    return family


class MetricsEndpoint:
    def __init__(self, collector: SnapshotCollector | None) -> None:
        self.collector = collector

    def wrap(self, reporter: Callable[[dict], None]) -> Callable[[dict], None]:
        if self.collector is None:
            return reporter
        collector = self.collector

        def report(snap: dict) -> None:
            if "config" in snap:
                collector.model = snap["config"]["model"]
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
