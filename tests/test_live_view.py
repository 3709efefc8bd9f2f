"""What a person watching sees: generate's live panel, and the row bars of prepare, check
and export."""

from __future__ import annotations

import io
import re
import threading

from click.testing import CliRunner
from rich.console import Console

from gen_helpers import write_prompts
from regen.cli import main
from regen.cli.rowbar import row_progress
from regen.display import LiveReporter
from regen.finished.read import read_runs

CONFIG = {
    "model": "Qwen/Qwen3-8B-2504",
    "servers": ["http://10.0.0.1:30000"],
    "concurrency_per_server": 64,
    "api_key_from": "none",
    "prompts": "p.jsonl",
    "output_dir": "run",
    "samples_per_prompt": 1,
    "regenerate_turns": "last",
    "sampling": {"max_tokens": 4096, "temperature": 0.6, "seed": 1234, "extra": None},
}


def snapshot(**changes) -> dict:
    snap = {
        "state": "running",
        "total": 400,
        "finished": 120,
        "eta_s": 754.0,
        "rates": {"last_1m": {"completions_per_s": 3.25, "tokens_per_s": 1810.0}},
        "servers": [
            {
                "url": "http://10.0.0.1:30000",
                "state": "healthy",
                "in_flight": 64,
                "completed": 118,
                "failed": 3,
                "retried": 2,
                "completion_tokens": 65432,
                "latency_ewma_s": 19.7,
                "last_error": "ServerFault: HTTP 500: injected 1234",
            }
        ],
        "errors_by_type": {"PermanentError": 2},
        "quality": {"window": 12, "rates": {"empty": 0.0, "length": 0.0833}, "alarms": []},
        "events": ["12:00:01 server 10.0.0.1:30000 back in rotation"],
    }
    return {**snap, **changes}


def render(snap: dict, width: int = 140) -> tuple[str, str]:
    """(plain text, text with ANSI styles) of one redraw on a `width`-column terminal."""
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=width, color_system="standard")
    reporter = LiveReporter(console)
    reporter({"config": CONFIG})
    reporter.live.stop()  # type: ignore[union-attr]
    console.print(reporter.render(snap))
    styled = out.getvalue()
    return re.sub(r"\x1b\[[0-9;]*m", "", styled), styled


def test_live_panel_has_bar_rates_elapsed_eta_servers_quality_and_events():
    text, _ = render(snapshot())
    assert "120/400" in text and "30%" in text and "━" in text
    assert "3.25 compl/s" in text and "1,810 tok/s" in text
    assert re.search(r"elapsed 0:00:0\d", text)
    assert "ETA 12m34s" in text  # the run's token-based ETA, not rich's own
    assert re.search(r"10\.0\.0\.1:30000\s+healthy\s+64\s+118\s+3\s+2\s+65,432\s+19\.7s", text)
    assert "quality (last 12): empty 0.0%, length 8.3%" in text  # shown before 50 samples
    assert "back in rotation" in text
    assert "1 x 64 per server (fixed), at most 64 at once" in text  # a cap, not the load
    assert "extra" not in text  # no per-record request fields: nothing to say


def test_an_80_column_terminal_drops_columns_never_host_port_or_state():
    """Three servers on one host: cut to `127.0.0.1:180…` they would look the same."""
    servers = [
        {**snapshot()["servers"][0], "url": f"http://127.0.0.1:1800{i}", "state": state}
        for i, state in enumerate(["healthy", "down", "healthy"])
    ]
    rates = {"empty": 0.0, "length": 0.0833, "missing_reasoning": 0.1, "repeated_answers": 0.02}
    quality = {"window": 500, "rates": rates, "alarms": []}
    text, _ = render(snapshot(servers=servers, quality=quality), width=80)
    panel = text[text.index("running") :].splitlines()
    assert all(len(line) <= 80 for line in panel)
    assert "…" not in text  # no header, address or state cut mid-word
    for i, state in enumerate(["healthy", "down", "healthy"]):
        assert re.search(rf"^127\.0\.0\.1:1800{i}\s+{state}\s", text, re.M)
    header = next(line for line in panel if line.startswith("server"))
    assert header.split()[:5] == ["server", "state", "in", "flight", "done"]
    bar = panel[0]  # the rates and the ETA on the bar's one line
    assert "120/400" in bar and "3.25 compl/s" in bar and "1,810 tok/s" in bar and "ETA" in bar
    assert "repeated answers 2.0%" in text  # quality items are not broken inside


def test_no_auto_highlighting_of_numbers_and_words():
    _, styled = render(snapshot())
    config_line = next(line for line in styled.splitlines() if "Qwen/Qwen3-8B-2504" in line)
    assert "\x1b[" not in config_line  # rich would colour the numbers and the slash
    error_cell = re.search(r"ServerFault: HTTP 500: injected 1234", styled)
    assert error_cell is not None  # one unbroken run of text: no highlight codes inside


def test_generate_live_display_ends_with_the_full_bar(tmp_path, fake_server):
    write_prompts(tmp_path / "p.jsonl", 6)
    result = CliRunner().invoke(
        main,
        [
            "generate",
            "--prompts",
            str(tmp_path / "p.jsonl"),
            "-o",
            str(tmp_path / "run"),
            "--servers",
            fake_server().url,
            "--display",
            "live",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "6/6" in result.output and "100%" in result.output
    assert "done: 6 new completions" in result.output


def test_row_bar_counts_every_row_of_a_run(tmp_path, fake_server):
    write_prompts(tmp_path / "p.jsonl", 25)
    gen = CliRunner().invoke(
        main,
        [
            "generate",
            "--prompts",
            str(tmp_path / "p.jsonl"),
            "-o",
            str(tmp_path / "run"),
            "--servers",
            fake_server().url,
            "--display",
            "none",
        ],
    )
    assert gen.exit_code == 0, gen.output
    threads = threading.active_count()
    with row_progress("check", enabled=True) as on_row:
        assert on_row is not None
        # drawn as rows come, by no thread: check's workers can be copies of this process
        assert threading.active_count() == threads
        rows = list(read_runs([tmp_path / "run"], on_row))
        bar = on_row.bar  # type: ignore[attr-defined]
        (task,) = bar.tasks
    assert len(rows) == 25 and task.completed == 25 and task.total == 25
    assert task.description == f"check {tmp_path / 'run'}"


def test_row_bar_is_off_when_stderr_is_not_a_terminal():
    with row_progress("prepare") as on_row:  # pytest captures stderr: not a terminal
        assert on_row is None
