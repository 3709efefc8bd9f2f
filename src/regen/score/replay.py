"""`regen score RUN --replay-servers URL...`: the acceptance of the drafter a spec-decoding
fleet serves with, per group, on this run's prompts.

Teacher forcing needs a standalone draft; MTP heads, EAGLE-3 and DFlash drafters live inside
the engine. So each chosen row's prompt (its conversation before the answer) is sent again, at
temperature 0 and with the answer's own length as max_tokens, to a fleet that speculates and
reports its per-request metrics (vLLM `--per-request-spec-decode-metrics`); the answers land in
an ordinary run under RUN/score/replay/ (resumable like any run), and `--from-engine`'s table
is built from them. Before that, each server answers one short request (kept under probe/),
so that a server which does not speculate (or does not report it) is named at once, not after
the whole replay.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from regen.errors import ConfigError, InputError
from regen.finished.read import open_run, records
from regen.finished.record import Completion
from regen.jsonio import atomic_write_bytes
from regen.run.config import build_config
from regen.run.generate import generate
from regen.score.engine import engine_report, spec_of
from regen.score.report import ScoreReport
from regen.score.rows import Selection, answer_length, completions, pick
from regen.storage import open_store

FOLDER = "replay"
PROBES = "probe"  # under FOLDER: one short answer per server, asked before the replay
PROBE_TOKENS = 16  # enough verify steps for any drafter to report, cheap on any server


@dataclass(frozen=True)
class ReplayFleet:
    servers: tuple[str, ...]
    model: str | None = None  # None: the servers' own (asked of /v1/models)
    api_key_env: str | None = None


def replay_report(
    run: str | Path, fleet: ReplayFleet, selection: Selection, score_dir: Path
) -> ScoreReport:
    folder = score_dir / FOLDER
    selection = pick(open_store(run), selection)  # the replayed prompts: this split's rows
    prompts = _write_prompts(run, selection, folder / "prompts.jsonl")
    if not _has_spec_answers(folder / "run"):  # a replay going on has shown it speculates
        _probe(fleet, prompts, folder / PROBES)
    result = generate(_config(fleet, fleet.servers, prompts, folder / "run"))
    if result.exit_code != 0:
        raise ConfigError(
            f"replaying the prompts did not finish: {result.message}",
            hint=f"see {folder / 'run'}; the same command goes on from the answers it has",
        )
    report = engine_report(folder / "run", Selection(selection.by, None, selection.seed), folder)
    report.split = selection.split_json()  # the replay run holds only the chosen rows
    return report


def _config(fleet: ReplayFleet, servers: tuple[str, ...], prompts: Path, out: Path):
    return build_config(
        {
            "input.prompts": prompts,
            "output.dir": out,
            "fleet.servers": servers,
            "fleet.model": fleet.model,
            "fleet.api_key_env": fleet.api_key_env,
            "sampling.temperature": 0.0,
            "display.mode": "none",
        }
    )


def _probe(fleet: ReplayFleet, prompts: Path, folder: Path) -> None:
    """One short answer from each server, alone (kept under probe/N): refuse the replay if one
    carries no speculative-decoding metrics. Always fresh: a server may have been restarted."""
    first = orjson.loads(prompts.read_bytes().split(b"\n", 1)[0])
    first["sampling"] = {"max_tokens": PROBE_TOKENS}
    if folder.exists():
        shutil.rmtree(folder)
    for n, server in enumerate(fleet.servers):
        probe = folder / str(n)
        probe.mkdir(parents=True)
        atomic_write_bytes(probe / "prompt.jsonl", orjson.dumps(first) + b"\n")
        result = generate(_config(fleet, (server,), probe / "prompt.jsonl", probe / "run"))
        if result.exit_code != 0:
            raise ConfigError(
                f"{server} did not answer a probe request: {result.message}",
                hint="check the server (regen serve --status), then retry",
            )
        if not _has_spec_answers(probe / "run"):
            raise ConfigError(
                f"{server} answered without speculative-decoding metrics: it does not "
                "speculate, or does not report it per request",
                hint="serve with a drafter: vLLM with --speculative-config and "
                "--per-request-spec-decode-metrics detailed (regen serve --engine vllm "
                "passes it), or SGLang with --speculative-algorithm",
            )


def _has_spec_answers(run: Path) -> bool:
    if not (run / "completions").is_dir():
        return False
    store = open_store(run)
    lines = store.iter_lines("completions")
    return any(isinstance(raw, dict) and spec_of(raw) is not None for raw in records(lines))


def _write_prompts(run: str | Path, selection: Selection, path: Path) -> Path:
    store = open_run(run)
    lines = [
        orjson.dumps(_prompt(c)) + b"\n"
        for c in completions(store.iter_lines("completions"), _ignore)
        if selection.wants(c.key)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, b"".join(lines))
    return path


def _prompt(completion: Completion) -> dict[str, Any]:
    """The row's conversation up to its (last) answer, with that answer's length."""
    messages = completion.messages
    last = max(i for i, m in enumerate(messages) if m.get("role") == "assistant")
    line: dict[str, Any] = {
        "id": completion.id if completion.sample == 0 else f"{completion.id}#{completion.sample}",
        "messages": messages[:last],
        "source": completion.raw.get("source"),
        "meta": {"category": completion.raw.get("category")},
    }
    if completion.tools:
        line["tools"] = completion.tools
    tokens = answer_length(completion)
    if tokens:
        line["sampling"] = {"max_tokens": tokens}
    return line


def _ignore(raw: dict, err: InputError) -> None:
    """Unreadable records are the original score's to count."""
