"""Hostile input and operational faults: nothing poisons a run, nothing ends in silence.

Each test is one case of issue 13: a bad per-record field, a truncated or mislabelled
compressed file, a server that refuses every request, a server down at start, SIGTERM
while the fleet is down, a server echoing our key, a full or read-only output dir, an
input of the wrong shape, and `regen status` on a dead run.
"""

from __future__ import annotations

import gzip
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson
import pytest
import zstandard
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gen_helpers import (
    assert_exactly_once,
    fill_disk_after,
    read_lines,
    run,
    run_with_read_only,
    write_prompts,
)
from regen.cli import main
from regen.errors import InputFileError, OutputError
from regen.jsonio import iter_lines
from regen.run.status import read_status
from regen.testing.fake_server import Behaviour, FakeServer


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


def generate_cli(prompts: Path, out: Path, *servers: str):
    return cli(
        "generate",
        "--prompts",
        str(prompts),
        "--output-dir",
        str(out),
        "--servers",
        *servers,
        "--display",
        "none",
        "--max-retries",
        "2",
    )


def write_lines(path: Path, records: list) -> None:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))


def prompt(pid: str, **fields) -> dict:
    return {"id": pid, "messages": [{"role": "user", "content": f"question {pid}"}], **fields}


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


# -- 2. compressed input ----------------------------------------------------------------------
def zst_prompts(path: Path, n: int) -> None:
    raw = b"".join(orjson.dumps(prompt(f"p{i:05d}")) + b"\n" for i in range(n))
    path.write_bytes(zstandard.ZstdCompressor(level=3).compress(raw))


def test_a_truncated_zst_is_an_error_naming_the_file_and_how_far_it_got(tmp_path, fake_server):
    server = fake_server()
    whole = tmp_path / "p.jsonl.zst"
    zst_prompts(whole, 3000)
    cut = tmp_path / "cut.jsonl.zst"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(InputFileError, match=r"cut\.jsonl\.zst is truncated.* after \d+ whole"):
        list(iter_lines(cut))
    result = generate_cli(cut, tmp_path / "out", server.url)
    assert result.exit_code == 3, result.output
    assert "truncated" in result.output and str(cut) in result.output
    assert "Traceback" not in result.output
    assert len(list(iter_lines(whole))) == 3000  # the whole file still reads in full


def test_prepare_refuses_a_truncated_source_naming_it(tmp_path):
    whole = tmp_path / "src.jsonl.zst"
    zst_prompts(whole, 3000)
    whole.write_bytes(whole.read_bytes()[:-100])
    result = cli("prepare", "--source", str(whole), "-o", str(tmp_path / "prompts.jsonl"))
    assert result.exit_code == 3, result.output
    assert f"{whole} is truncated" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "prompts.jsonl").exists()


def test_a_gzip_file_named_jsonl_is_recognised_and_said_so(tmp_path, fake_server):
    server = fake_server()
    raw = b"".join(orjson.dumps(prompt(f"p{i}")) + b"\n" for i in range(20))
    (tmp_path / "p.jsonl").write_bytes(gzip.compress(raw))
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    assert result.exit_code == 0 and result.stats.completed == 20
    assert any("gzip-compressed" in e for e in result.stats.events)


def test_a_compressed_inputs_line_count_is_of_its_text(tmp_path, fake_server):
    """The run's total (until the pass has counted exactly) and the manifest count the lines
    of the text, not the newline bytes a compressed file holds at random."""
    server = fake_server()
    zst_prompts(tmp_path / "p.jsonl.zst", 400)
    assert run(tmp_path / "p.jsonl.zst", tmp_path / "out", [server.url]).exit_code == 0
    manifest = orjson.loads((tmp_path / "out" / "manifest.json").read_bytes())
    assert manifest["input"]["lines"] == 400


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
        assert _wait_for(lambda: len(server.requests) >= 4, 30), "no request reached the server"
        server.stop()  # every server is down now
        assert _wait_for(lambda: _all_down(out), 30), "the run never saw the fleet down"
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


def _wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


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


# -- 7. a full or read-only output dir --------------------------------------------------------
def test_a_full_disk_ends_with_a_plain_message_and_resume_loses_nothing(tmp_path, fake_server):
    server = fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 300)
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
        "--display",
        "none",
    ]

    def small_files() -> None:  # no file may grow past 20 kB: the shard fills up
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    full = subprocess.run(
        command, capture_output=True, text=True, timeout=120, preexec_fn=small_files
    )
    assert full.returncode == 6, full.stderr
    assert f"cannot write to {out / 'completions'}" in full.stderr
    assert "free space" in full.stderr and "Traceback" not in full.stderr
    again = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    completions, errors = assert_exactly_once(out, ids)
    assert len(completions) == 300 and not errors


def test_a_failed_atomic_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    import errno

    from regen import jsonio

    def no_space(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(jsonio.os, "fsync", no_space)
    with pytest.raises(OSError, match="No space"):
        jsonio.atomic_write_bytes(tmp_path / "progress.json", b"{}")
    assert list(tmp_path.iterdir()) == []


def test_a_failing_seal_does_not_hide_the_full_disk_message(tmp_path, fake_server, monkeypatch):
    import errno

    from regen.format import writer as writer_mod

    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 30)

    def no_space(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    fill_disk_after(monkeypatch, 10)
    monkeypatch.setattr(writer_mod, "write_sidecar", no_space)
    with pytest.raises(OutputError, match="completions: No space left"):
        run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])


@pytest.mark.parametrize("existing", [True, False])
def test_a_read_only_output_dir_is_a_plain_message(tmp_path, fake_server, existing):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 2)
    read_only = tmp_path / "ro"
    read_only.mkdir()
    out = read_only if existing else read_only / "run"  # an existing dir, or one to create
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
        "--display",
        "none",
    ]
    result = run_with_read_only(read_only, command)
    assert result.returncode == 6, result.stderr
    assert f"cannot write to {out}" in result.stderr and "hint:" in result.stderr
    assert "Traceback" not in result.stderr


def test_prepare_into_a_read_only_dir_is_a_plain_message(tmp_path):
    write_prompts(tmp_path / "src.jsonl", 3)
    read_only = tmp_path / "ro"
    read_only.mkdir()
    command = [
        sys.executable,
        "-m",
        "regen",
        "prepare",
        "--source",
        str(tmp_path / "src.jsonl"),
        "-o",
        str(read_only / "prompts.jsonl"),
    ]
    result = run_with_read_only(read_only, command)
    assert result.returncode == 6, result.stderr
    assert f"cannot write to {read_only}" in result.stderr and "Traceback" not in result.stderr
    assert "prepare writes its files anew" in result.stderr and "resume" not in result.stderr


# -- 8. an input file of the wrong shape ------------------------------------------------------
def test_an_empty_prompt_file_is_an_error(tmp_path, fake_server):
    server = fake_server()
    (tmp_path / "p.jsonl").write_bytes(b"\n\n")
    result = generate_cli(tmp_path / "p.jsonl", tmp_path / "out", server.url)
    assert result.exit_code == 3
    assert "is empty" in result.output
    # not prepare on this empty file, which would fail too: prepare on a dataset
    assert "`regen prepare --source DATA.jsonl -o prompts.jsonl`" in result.output


@pytest.mark.parametrize(
    ("content", "shape", "command"),
    [
        (
            b"".join(
                orjson.dumps({"query": f"q{i}", "response": f"r{i}"}) + b"\n" for i in range(5)
            ),
            "query/response pairs",
            "regen prepare --source",
        ),
        (
            b"sources:\n  - path: data.jsonl\n    count: all\ntotal: 100\n",
            "YAML",
            "regen prepare ",
        ),
    ],
)
def test_a_file_of_the_wrong_shape_says_what_it_is_and_how_to_convert_it(
    tmp_path, fake_server, content, shape, command
):
    server = fake_server()
    (tmp_path / "p.jsonl").write_bytes(content)
    result = generate_cli(tmp_path / "p.jsonl", tmp_path / "out", server.url)
    assert result.exit_code == 3, result.output
    assert shape in result.output and "line 1:" in result.output
    assert f"{command}" in result.output and str(tmp_path / "p.jsonl") in result.output
    assert not server.requests  # refused before anything was sent


def test_a_mostly_unusable_file_fails_loudly_after_recording_every_line(tmp_path, fake_server):
    server = fake_server()
    good = [prompt(f"p{i}") for i in range(10)]
    bad = [{"query": f"q{i}", "response": "r"} for i in range(20)]
    # The first lines look fine; the rest of the file is not prompts.
    write_lines(tmp_path / "p.jsonl", good + bad)
    from regen.run import input_gate

    original = input_gate.HEAD_LINES
    input_gate.HEAD_LINES = 10
    try:
        result = run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    finally:
        input_gate.HEAD_LINES = original
    assert result.exit_code == 3 and "20 of 30 line(s) are unusable" in result.message
    assert len(read_lines(tmp_path / "out", "errors")) == 20
    assert len(read_lines(tmp_path / "out", "completions")) == 10


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


# -- fuzz: malformed lines and per-record fields ----------------------------------------------
JSON_LEAF = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=12)
JSON_LEAF = JSON_LEAF | st.floats(allow_nan=False, allow_infinity=False)
JSON = st.recursive(
    JSON_LEAF,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
TURN = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool", "bot", ""]) | JSON},
    optional={"content": st.text(max_size=20) | JSON, "tool_calls": JSON, "name": JSON},
)
SAMPLING = st.dictionaries(
    st.sampled_from(["seed", "temperature", "top_p", "top_k", "max_tokens", "thinking", "x"]),
    JSON_LEAF,
    max_size=3,
)
RECORD = st.fixed_dictionaries(
    {"messages": st.lists(TURN, max_size=3) | JSON},
    optional={
        "id": JSON,
        "sampling": SAMPLING | JSON,
        "tools": JSON,
        "meta": JSON,
        "source": JSON,
        "conversations": JSON,
    },
)
LINE = st.one_of(
    RECORD.map(orjson.dumps),
    JSON.map(orjson.dumps),
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")),
)
GOOD = orjson.dumps(prompt("first"))
# Bounded and repeatable: the same examples every run, nothing written into the repository.
FUZZ = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)  # files start with a usable line: the format is known


@pytest.fixture(scope="module")
def fuzz_server():
    server = FakeServer(Behaviour()).start()
    yield server
    server.stop()


@FUZZ
@given(lines=st.lists(LINE, max_size=12))
def test_fuzzed_lines_never_crash_generate_and_every_line_is_accounted_for(fuzz_server, lines):
    with tempfile.TemporaryDirectory() as tmp:
        prompts, out = Path(tmp) / "p.jsonl", Path(tmp) / "out"
        prompts.write_bytes(b"\n".join([GOOD, *lines]) + b"\n")
        try:
            result = run(prompts, out, [fuzz_server.url], concurrency=8)
        except InputFileError as err:  # mostly unusable: refused before anything is written
            assert "not a prompt file" in err.message
            assert not list(out.rglob("part-*"))
            return
        expected = [n for n, line in iter_lines(prompts) if line.strip()]
        done = [r["meta"]["line"] for r in read_lines(out, "completions")]
        failed = [e["line"] for e in read_lines(out, "errors")]
        assert sorted(done + failed) == expected  # each line once: no loss, no duplicate
        assert result.exit_code in (0, 3)
        assert result.stats.bad_lines + result.stats.failed == len(failed)


@FUZZ
@given(lines=st.lists(LINE, max_size=12))
def test_fuzzed_lines_never_crash_prepare_and_every_row_is_accounted_for(lines):
    from regen.prepare import Recipe
    from regen.prepare import prepare as run_prepare
    from regen.prepare.recipe import parse_source

    with tempfile.TemporaryDirectory() as tmp:
        source, output = Path(tmp) / "src.jsonl", Path(tmp) / "prompts.jsonl"
        source.write_bytes(b"\n".join([GOOD, *lines]) + b"\n")
        spec = parse_source({"path": str(source), "count": "all"}, "fuzz")
        report = run_prepare(Recipe(sources=(spec,)), output)
        stats = report.data["sources"][0]
        rows = sum(1 for _, line in iter_lines(source) if line.strip())
        left_out = sum(stats["rejected"].values()) + sum(stats["skipped"].values())
        assert stats["read"] == rows == stats["converted"] + left_out
        rejects = output.with_suffix(".rejects.jsonl")
        assert sum(1 for _ in iter_lines(rejects)) == left_out
        assert sum(1 for _ in iter_lines(output)) == stats["selected"]


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
