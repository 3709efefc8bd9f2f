"""`regen export` of an OpenAI batch output file: rows joined on custom_id, with the errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from export_helpers import cli, data_file, rows_of


def test_openai_batch_output_is_joined_on_custom_id_with_the_errors(tmp_path):
    rows = [checkfix.completion("req-1", "Paris."), checkfix.completion("req-2", "Rome.")]
    rows[1]["sample"] = 1  # --samples-per-prompt 2: the second sample of req-2
    run = checkfix.write_run(tmp_path / "run", rows)
    errors = run / "errors"
    errors.mkdir()
    failed = [
        {
            "id": "req-3",
            "sample": 0,
            "line": 3,
            "attempts": 4,
            "error": {"type": "server_error", "message": "503 from the server"},
        },
        {
            "id": "req-1",
            "sample": 0,
            "line": 1,
            "attempts": 1,
            "error": {"type": "timeout", "message": "retried, then answered"},
        },
    ]
    (errors / "00000.jsonl").write_text("".join(json.dumps(e) + "\n" for e in failed))
    out = tmp_path / "batch"
    cli("export", run, "--out", out, "--format", "openai-batch", "--val-fraction", "0.5")
    lines = {r["custom_id"]: r for r in rows_of(data_file(out))}
    assert set(lines) == {"req-1", "req-2#1", "req-3"}  # req-1's error was answered later
    ok = lines["req-1"]["response"]
    assert ok["status_code"] == 200 and lines["req-1"]["error"] is None
    body = ok["body"]
    assert body["object"] == "chat.completion" and body["choices"][0]["finish_reason"] == "stop"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Paris."}
    assert (lines["req-2#1"]["prompt_id"], lines["req-2#1"]["sample"]) == ("req-2", 1)
    assert lines["req-3"] == {
        "id": lines["req-3"]["id"],
        "custom_id": "req-3",
        "prompt_id": "req-3",
        "sample": 0,
        "response": None,
        "error": {"code": "server_error", "message": "503 from the server"},
    }
