"""The Prometheus endpoint follows Prometheus conventions, and the shipped Grafana dashboard
queries only metrics that a real scrape of `regen generate` contains."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from gen_helpers import write_prompts
from regen.fleet.embedded import free_port
from regen.testing.fake_server import Behaviour, echo_answer
from waiting import wait_until

WANTED = ("regen_retries_total", "regen_server_completions_total", "regen_errors_total")
DASHBOARD = Path(__file__).parent.parent / "examples" / "grafana-dashboard.json"


def scrape_live_run(tmp_path: Path, url: str) -> str:
    """Start `regen generate --metrics-port` as a process and scrape it once it has finished
    some requests; the process is stopped by its pid."""
    write_prompts(tmp_path / "p.jsonl", 200)
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "regen",
        "generate",
        "--prompts",
        str(tmp_path / "p.jsonl"),
        "-o",
        str(tmp_path / "out"),
        "--servers",
        url,
        "--concurrency-per-server",
        "4",
        "--display",
        "none",
        "--metrics-port",
        str(port),
    ]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:

        def scrape() -> str | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    body = r.read().decode()
            except OSError:
                return None
            if all(re.search(rf"^{name}\{{.*\}} [1-9]", body, re.M) for name in WANTED):
                return body
            return None

        return wait_until(scrape, 30, "a scrape with completions, retries and errors", interval=0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def test_metrics_follow_prometheus_conventions(tmp_path, fake_server):
    server = fake_server(
        Behaviour(
            slots=4,
            seconds_per_token=0.01,
            faults=["ok", "ok", "500", "400"],
            answer=lambda b: {**echo_answer(b), "tokens": 8},
        )
    )
    body = scrape_live_run(tmp_path, server.url)
    families = {f.name: f for f in text_string_to_metric_families(body)}
    latency = families["regen_request_duration_seconds"]
    assert latency.type == "histogram"
    buckets = [s for s in latency.samples if s.name.endswith("_bucket")]
    assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value >= 1
    assert buckets[0].labels == {"model": "fake-model", "server": server.url, "le": "0.25"}
    assert families["regen_quality_ratio"].type == "gauge"
    assert "regen_quality_rate" not in families and "regen_server_latency_seconds" not in families
    names = ("regen_completions", "regen_retries", "regen_errors", "regen_server_completions")
    for name in (*names, "regen_endgame_copies", "regen_endgame_tokens_wasted"):
        assert families[name].type == "counter", name
    (total,) = families["regen_items"].samples
    assert total.value == 200 and total.labels == {"model": "fake-model"}
    (level,) = families["regen_server_concurrency"].samples  # live, under its cap of 4
    (cap,) = families["regen_server_concurrency_cap"].samples
    assert 1 <= level.value <= cap.value == 4


def test_every_metric_the_dashboard_queries_is_in_a_scrape(tmp_path, fake_server):
    server = fake_server(
        Behaviour(
            slots=4,
            seconds_per_token=0.01,
            faults=["ok", "500", "400"],
            answer=lambda b: {**echo_answer(b), "tokens": 8},
        )
    )
    scraped = {
        sample.name
        for family in text_string_to_metric_families(scrape_live_run(tmp_path, server.url))
        for sample in family.samples
    }
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queries.append(dashboard["templating"]["list"][0]["definition"])
    queried = {name for q in queries for name in re.findall(r"\bregen_[a-z_]+", q)}
    assert len(queried) >= 12
    assert queried <= scraped, f"not in a scrape: {sorted(queried - scraped)}"
