"""Operational faults: nothing poisons a run, nothing ends in silence.

Each test is one case of issue 13: a bad per-record field, a server that refuses every
request, a server down at start, SIGTERM while the fleet is down, a server echoing our
key, and `regen status` on a dead run. Bad input files are in test_input_faults.py, a full
or read-only output dir in test_output_dir_faults.py, fuzzed lines in test_fuzz_lines.py.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest

from fault_helpers import cli, generate_cli, prompt, write_lines
from gen_helpers import (
    assert_exactly_once,
    read_lines,
    run,
    write_prompts,
)
from regen.run.status import read_status
from regen.testing.fake_server import Behaviour, FakeServer
from waiting import wait_until


# -- 1. per-record fields -------------------------------------------------------------------
@pytest.mark.parametrize(
    "sampling",
    [
        {"seed": "7"},
        {"temperature": "hot"},
        {"max_tokens": 0},
        {"top_p": 2},
        {"top_k": 1.5},
        {"seed": True},
        {"max_tokens": None},
    ],
)
def test_a_wrongly_typed_sampling_field_is_an_error_line_not_a_crash(
    tmp_path, fake_server, sampling
):
    server = fake_server()
    records = [prompt("a", sampling=sampling), prompt("b"), prompt("c", sampling={"seed": 7})]
    write_lines(tmp_path / "p.jsonl", records)
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    assert result.exit_code == 0
    errors = read_lines(tmp_path / "out", "errors")
    assert [(e["line"], e["error"]["type"]) for e in errors] == [(1, "bad_sampling")]
    assert next(iter(sampling)) in errors[0]["error"]["message"]
    assert {r["id"] for r in read_lines(tmp_path / "out", "completions")} == {"b", "c"}
    assert run(tmp_path / "p.jsonl", tmp_path / "out", [server.url]).already_done


def test_an_exception_on_one_record_is_recorded_and_the_run_goes_on(
    tmp_path, fake_server, monkeypatch
):
    from regen.run import worker as worker_mod

    server = fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 6)
    real = worker_mod.completion_record

    def breaks_on_one(item, *args):
        if item.prompt.id == ids[2]:
            raise KeyError("usage")  # a response shape no check foresaw
        return real(item, *args)

    monkeypatch.setattr(worker_mod, "completion_record", breaks_on_one)
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    assert result.exit_code == 0 and result.stats.completed == 5
    _, errors = assert_exactly_once(tmp_path / "out", ids)
    assert errors[0]["id"] == ids[2] and errors[0]["error"]["type"] == "internal_error"
    assert "KeyError" in errors[0]["error"]["message"]


# -- 3. a server that refuses every request ---------------------------------------------------
@pytest.mark.parametrize(
    ("fault", "answer", "fix"),
    [
        ("html", "text/html", "login page"),
        ("401", "HTTP 401", "--api-key-env"),
        ("status", "without 'choices'", "OpenAI-compatible"),
    ],
)
def test_a_server_refusing_every_request_stops_the_run_with_its_answer(
    tmp_path, fake_server, fault, answer, fix
):
    server = fake_server(faults=[fault])
    write_prompts(tmp_path / "p.jsonl", 20)
    result = generate_cli(tmp_path / "p.jsonl", tmp_path / "out", server.url)
    assert result.exit_code == 5, result.output
    assert answer in result.output and fix in result.output
    assert not read_lines(tmp_path / "out", "errors")  # no prompt is blamed
    assert not read_lines(tmp_path / "out", "completions")


def test_a_refusing_server_leaves_the_rotation_and_the_others_do_the_work(tmp_path, fake_server):
    bad, good = fake_server(faults=["html"]), fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 40)
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [bad.url, good.url])
    assert result.exit_code == 0
    completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors and {r["meta"]["server"] for r in completions} == {good.url}
    assert any("refuses every request" in e for e in result.stats.events)


# -- 4. a server down at start ----------------------------------------------------------------
def test_a_server_down_at_start_does_not_stop_the_run(tmp_path, fake_server):
    good = fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 10)
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [good.url, "http://127.0.0.1:9"])
    assert result.exit_code == 0
    assert_exactly_once(tmp_path / "out", ids)
    assert any("127.0.0.1:9 does not answer" in e for e in result.stats.events)


def test_no_server_answering_at_start_is_a_fleet_fault_not_a_usage_error(tmp_path):
    write_prompts(tmp_path / "p.jsonl", 1)
    result = generate_cli(tmp_path / "p.jsonl", tmp_path / "out", "http://127.0.0.1:9")
    assert result.exit_code == 5
    assert "no server answers" in result.output and "127.0.0.1:9" in result.output


# -- 5. SIGTERM while every server is down ----------------------------------------------------
def test_sigterm_is_honoured_while_every_server_is_down(tmp_path, fake_server):
    server = fake_server(Behaviour(seconds_per_token=0.05, slots=4))
    write_prompts(tmp_path / "p.jsonl", 200)
    out = tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "regen",
        "generate",
        "--prompts",
        str(tmp_path / "p.jsonl"),
        "--output-dir",
        str(out),
        "--servers",
        server.url,
        "--concurrency",
        "4",
        "--display",
        "none",
        "--drain-timeout",
        "5",
        "--health-interval",
        "0.5",
    ]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: len(server.requests) >= 4, 30, "four requests at the server")
        server.stop()  # every server is down now
        wait_until(lambda: _all_down(out), 30, "the run seeing the fleet down")
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
        stdout, stderr = proc.communicate(timeout=30)
    assert code == 143, stderr.decode()[-2000:]
    assert b"resume" in stdout


def _all_down(out: Path) -> bool:
    try:
        progress = orjson.loads((out / "progress.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    return progress.get("all_servers_down_for_s") is not None


# -- 6. secrets in server answers -------------------------------------------------------------
def test_a_key_echoed_by_a_server_is_redacted_everywhere(tmp_path, fake_server, monkeypatch):
    server = fake_server(faults=["echo"])
    write_prompts(tmp_path / "p.jsonl", 3)
    monkeypatch.setenv("MY_KEY", "sk-live-0123456789abcdef")
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], api_key_env="MY_KEY")
    errors = read_lines(tmp_path / "out", "errors")
    assert len(errors) == 3 and "[REDACTED]" in errors[0]["error"]["message"]
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert b"0123456789abcdef" not in data and b"Bearer sk" not in data, path
    assert "0123456789abcdef" not in result.message + "".join(result.stats.events)


def test_redact_masks_authorization_values_whatever_their_source():
    from regen.redact import scrub

    for text in (
        "Authorization: Bearer abc.def-123",
        '{"authorization": "Basic dXNlcjpwYXNz"}',
        "headers={'Proxy-Authorization': 'token xyz987'}",
        "x-api-key=k123456",
    ):
        cleaned = scrub(text)
        assert "[REDACTED]" in cleaned
        for secret in ("abc.def-123", "dXNlcjpwYXNz", "xyz987", "k123456"):
            assert secret not in cleaned
    assert scrub("the answer is 42") == "the answer is 42"


# -- 10. status of a dead run -----------------------------------------------------------------
def test_status_of_a_dead_run_shows_nothing_in_flight(tmp_path, fake_server):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 3)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    path = tmp_path / "out" / "progress.json"
    progress = orjson.loads(path.read_bytes())
    progress["state"] = "running"  # as a kill -9 leaves it
    progress["servers"][0]["in_flight"] = 128
    path.write_bytes(orjson.dumps(progress))
    info = read_status(tmp_path / "out")
    assert info["progress"]["servers"][0]["in_flight"] == 0
    shown = cli("status", str(tmp_path / "out")).output
    assert "NOT RUNNING" in shown and "128 in flight" not in shown
    assert "none in flight (128 were at its last update)" in shown


def test_a_server_down_at_start_joins_when_it_comes_up(tmp_path, fake_server):
    good = fake_server(seconds_per_token=0.02)
    with socket.socket() as probe:  # a free port, for a server that is not up yet
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    late = FakeServer(Behaviour(dialect="vllm"), port=port)
    timer = threading.Timer(0.5, late.start)
    timer.start()
    try:
        ids = write_prompts(tmp_path / "p.jsonl", 150)
        result = run(tmp_path / "p.jsonl", tmp_path / "out", [good.url, late.url])
    finally:
        timer.join()
        late.stop()
    completions, _ = assert_exactly_once(tmp_path / "out", ids)
    assert result.exit_code == 0
    assert late.url in {r["meta"]["server"] for r in completions}
    assert any("answers again" in e for e in result.stats.events)
    # asked which engine it is when it joined, not only at the start
    late_engines = {
        r["meta"]["engine"]["name"] for r in completions if r["meta"]["server"] == late.url
    }
    assert late_engines == {"vllm"}
