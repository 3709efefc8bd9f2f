"""`regen status` reading a run's files: liveness from the lock, or from the heartbeat of a
run on another machine, and counts from the output files themselves."""

from __future__ import annotations

import io
import signal
import time

import orjson
import pytest
from click.testing import CliRunner

from gen_helpers import quick_config, run, write_prompts
from regen.cli import main
from regen.cli.status import render
from regen.display import PlainReporter
from regen.errors import ConfigError
from regen.run.generate import generate
from regen.run.status import read_status
from regen.run.stop import Stop, StopReason, on_signals
from regen.storage.lock import RunLock


def finished_run(tmp_path, fake_server):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 5)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    return tmp_path / "out"


def rewrite_progress(out, **changes) -> None:
    path = out / "progress.json"
    progress = orjson.loads(path.read_bytes())
    path.write_bytes(orjson.dumps({**progress, **changes}))


def test_a_run_on_another_machine_is_judged_by_its_heartbeat(tmp_path, fake_server):
    out = finished_run(tmp_path, fake_server)
    rewrite_progress(out, host="gpu-node-7", state="running", updated_unix=time.time() - 5)
    alive = read_status(out)["alive"]
    assert alive["alive"] is True and "heartbeat" in alive["how"]
    rewrite_progress(out, updated_unix=time.time() - 600)
    assert read_status(out)["alive"]["alive"] is False


def test_the_lock_decides_on_this_machine(tmp_path, fake_server):
    out = finished_run(tmp_path, fake_server)
    assert read_status(out)["alive"]["alive"] is False
    with RunLock(out / "run.lock"):
        assert read_status(out)["alive"]["alive"] is True


def test_counts_come_from_the_files_even_without_a_snapshot(tmp_path, fake_server):
    out = finished_run(tmp_path, fake_server)
    (out / "progress.json").unlink()
    info = read_status(out)
    assert info["files"] == {"completions": 5, "errors": 0}
    assert info["progress"] is None


def test_not_an_output_dir(tmp_path):
    with pytest.raises(ConfigError, match="not a regen output dir"):
        read_status(tmp_path)


def test_a_stopped_run_reads_one_count_no_eta_no_healthy_and_the_resume_command(
    tmp_path, fake_server, monkeypatch
):
    """The files are the one count; a stale snapshot's 3/8 and a session's per-server count
    must not stand next to it as rival totals, and a stopped run has no ETA or live state."""
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 5)
    monkeypatch.chdir(tmp_path)
    argv = [
        "generate",
        "--prompts",
        "p.jsonl",
        "-o",
        "out",
        "--servers",
        server.url,
        "--display",
        "none",
    ]
    assert CliRunner().invoke(main, argv).exit_code == 0
    out = tmp_path / "out"
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    manifest["input"]["lines"] = 8  # as if stopped with 3 items left
    (out / "manifest.json").write_bytes(orjson.dumps(manifest))
    rewrite_progress(out, state="stopped", finished=3, total=8)
    text = "\n".join(render(read_status(out)))
    assert "finished: 5 of 8 items (62.5%): 5 completions, 0 errors; 3 left" in text
    assert "3/8" not in text and "ETA" not in text and "healthy" not in text
    assert f"resume with: cd {tmp_path} && regen generate --prompts p.jsonl -o out" in text
    assert "servers in the last session:" in text


def test_a_resumed_run_says_how_much_was_already_done(tmp_path, fake_server):
    write_prompts(tmp_path / "p.jsonl", 6)
    run(tmp_path / "p.jsonl", tmp_path / "out", [fake_server(faults=["ok", "400"]).url])
    shown = io.StringIO()
    config = quick_config(
        tmp_path / "p.jsonl", tmp_path / "out", [fake_server().url], retry_errors=True
    )
    generate(config, report=PlainReporter(3600, shown))
    assert shown.getvalue().count("resuming: 3 of 6 already done") == 1


def test_a_signal_is_one_line_while_requests_finish():
    asked: list[tuple] = []
    handle = on_signals(Stop(), lambda *args: asked.append(args), lambda: None)
    handle(signal.SIGINT)
    assert asked == [(StopReason.SIGINT,)]  # no text of its own: the drain line says it
    line = StopReason.SIGINT.draining(2, 60)
    assert line.startswith("SIGINT received: no new requests; waiting up to 60s for 2")


def test_failed_attempts_that_were_retried_do_not_read_as_lost_prompts(tmp_path, fake_server):
    """A 500 on every other request: each prompt is answered on its retry, so the run has
    no errors, and the server line counts attempts, not prompts. One request at a time: with
    more, one prompt could meet the 500 three times while the others got the oks, which is
    how a prompt the engine cannot serve looks (fleet/prompt_faults.py)."""
    server = fake_server(faults=["500", "ok"])
    write_prompts(tmp_path / "p.jsonl", 4)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], concurrency=1)
    text = "\n".join(render(read_status(tmp_path / "out")))
    assert "4 completions, 0 errors" in text
    [line] = [line for line in text.splitlines() if line.startswith(f"  {server.url}")]
    assert "4 done, 4 failed attempts, 4 retried" in line, line


def test_requests_withdrawn_at_a_lowered_level_are_on_the_server_line(tmp_path, fake_server):
    """progress.json carries each server's count of requests withdrawn when live concurrency
    lowered its level (fleet/waiting_streams.py), and of those moved at the end to a server
    with room (rebalance.py); status says both beside the retries."""
    out = finished_run(tmp_path, fake_server)
    [server] = orjson.loads((out / "progress.json").read_bytes())["servers"]
    assert server["withdrawn"] == server["moved"] == 0
    rewrite_progress(out, servers=[{**server, "withdrawn": 437, "moved": 12}])
    text = "\n".join(render(read_status(out)))
    assert "437 withdrawn as its level fell, 12 moved to a server with room" in text, text


def test_a_finished_run_without_server_figures_says_none(tmp_path, fake_server):
    out = finished_run(tmp_path, fake_server)
    rewrite_progress(out, servers=[])
    lines = render(read_status(out))
    assert "servers in the last session: none recorded" in lines
    assert "servers in the last session:" not in lines  # never a heading with nothing under it
