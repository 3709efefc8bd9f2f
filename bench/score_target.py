"""bench_score.py target: `score --target-model embedded` against generating the same rows.

The embedded model answers N prompts at temperature 0.7 without --logprobs (`regen generate`,
its wall time and the requests' own), then `score --draft embedded --target-model embedded
--all` scores them twice in this process: the target's pass one row at a time (`--rows 1`:
each answer token its own decode step, as before issue 54) and with the rows side by side
(llama_target_pass.ROWS a step). Both must give the same rows file: the logits are the same
to the bit. Wall and CPU seconds of each (the CPU seconds include every thread's spinning)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from regen.check import Encoder
from regen.embedded_model import default_model_path
from regen.score import ScoreSettings, score_run
from regen.score.llama_draft import LlamaDraft
from regen.score.rows import Selection
from regen.score.target_probs import with_target
from score_rows import PROMPTS

K = 3


def target_pass(n_prompts: int, max_new: int, threads: int) -> dict:
    from regen.score import llama_target_pass as rows

    with tempfile.TemporaryDirectory() as tmp:
        run, generated = _generate(Path(tmp), n_prompts, max_new)
        lines = [
            json.loads(x)
            for f in sorted((run / "completions").glob("*.jsonl"))
            for x in f.read_text().splitlines()
        ]
        out = {
            "rows": len(lines),
            "answer_tokens": sum(r["usage"]["completion_tokens"] for r in lines),
            "threads": threads,
            **generated,
        }
        files = {}
        for label, at_once in (("one_row_at_a_time", 1), ("rows_side_by_side", rows.ROWS)):
            rows.ROWS = at_once
            wall, cpu, files[label] = _score(run, Path(tmp) / label, threads)
            out[f"score_{label}_s"], out[f"score_{label}_cpu_s"] = wall, cpu
        out["rows_at_once"] = rows.ROWS
        out["same_rows_file"] = files["one_row_at_a_time"] == files["rows_side_by_side"]
    return out


def _generate(tmp: Path, n_prompts: int, max_new: int) -> tuple[Path, dict]:
    chosen = [p for ps in zip(*PROMPTS.values(), strict=True) for p in ps][:n_prompts]
    prompts = tmp / "prompts.jsonl"
    prompts.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "messages": [{"role": "user", "content": text}]}) + "\n"
            for i, text in enumerate(chosen)
        )
    )
    run = tmp / "run"
    command = [sys.executable, "-m", "regen", "generate", "--prompts", str(prompts)]
    command += ["--output-dir", str(run), "--max-output-tokens", str(max_new)]
    command += ["--temperature", "0.7", "--display", "none"]
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, timeout=3600, env=os.environ)
    wall = time.perf_counter() - started
    latency = sum(
        json.loads(x)["meta"]["latency_s"]
        for f in (run / "completions").glob("*.jsonl")
        for x in f.read_text().splitlines()
    )
    return run, {"generate_s": round(wall, 1), "generate_requests_s": round(latency, 1)}


def _score(run: Path, out: Path, threads: int) -> tuple[float, float, list]:
    """Wall and CPU seconds of the scoring itself (the models and tokenizer loaded first)."""
    encoder = Encoder.load("embedded")
    draft = LlamaDraft(default_model_path(), threads=threads)
    target = LlamaDraft(default_model_path(), threads=threads, flag="--target-model")
    settings = ScoreSettings(Selection("category", None, 0), [K], "embedded")
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        report = score_run(run, with_target([draft], target), encoder, settings, out)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        draft.close()
        target.close()
    rows_file = report.drafts[0].rows_file
    lines = sorted(rows_file.read_text().splitlines())
    return round(wall, 1), round(cpu, 1), lines
