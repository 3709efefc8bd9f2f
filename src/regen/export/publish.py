"""After the data files: the draft vocabulary, the card and regen.json, and the Hub push."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regen.errors import ConfigError
from regen.export import draft_vocab
from regen.export.card import CardInputs, write_card
from regen.export.card_facts import template_sha256
from regen.export.hub_push import Push, push, refuse_unchecked
from regen.export.summary import ExportSummary
from regen.finished.encode import Encoder
from regen.jsonio import read_json


@dataclass
class Publish:
    runs: list[str]
    command: str = ""
    licenses: dict[str, str] = field(default_factory=dict)
    language: list[str] = field(default_factory=list)
    pretty_name: str | None = None
    tokenizer: str | None = None
    draft_vocab_size: int | None = None
    target_vocab_size: int | None = None
    check_report: Path | None = None  # a `regen check --json` file, when export did not check
    hub: Push | None = None


def finish(
    out_dir: Path, summary: ExportSummary, encoder: Encoder | None, opts: Publish
) -> dict[str, Any]:
    """Write the draft vocabulary and the card; push when asked. Returns the card's facts."""
    if summary.check is None and opts.check_report is not None:
        summary.check = _read_check(opts.check_report)
    if opts.hub is not None:  # before writing anything more: a refusal costs nothing
        refuse_unchecked(
            (summary.check or {}).get("verdict", "not checked"), opts.hub.allow_failed_check
        )
    vocab = None
    if opts.draft_vocab_size is not None:
        assert encoder is not None  # export_run refused count_tokens without one
        size = draft_vocab.target_vocab_size(encoder.tok, opts.tokenizer, opts.target_vocab_size)
        vocab = draft_vocab.write(out_dir, summary.masked_tokens, opts.draft_vocab_size, size)
        summary.warnings += _vocab_warnings(vocab)
    inputs = CardInputs(
        runs=opts.runs,
        command=opts.command,
        licenses=opts.licenses,
        language=opts.language,
        pretty_name=opts.pretty_name,
        tokenizer=opts.tokenizer,
        draft_vocab=vocab,
        chat_template_sha256=template_sha256(encoder.tok) if encoder else None,
    )
    data = write_card(out_dir, summary, inputs)
    if opts.hub is not None:
        message = f"regen export of {', '.join(opts.runs)} ({summary.format})"
        data["pushed"] = push(out_dir, opts.hub, data["check_verdict"], message)
    return data


def _read_check(path: Path) -> dict[str, Any]:
    report = read_json(path)
    if not isinstance(report, dict) or report.get("verdict") not in ("pass", "fail"):
        raise ConfigError(
            f"--check-report {path} is not a `regen check --json` report",
            hint="write one with `regen check RUN --tokenizer T --json FILE`",
        )
    return report


def _vocab_warnings(vocab: dict[str, Any]) -> list[str]:
    if not vocab["padded"]:
        return []
    return [
        f"--draft-vocab-size {vocab['size']} is more than the {vocab['distinct']} distinct "
        f"supervised tokens: padded with {vocab['padded']} unused ids, as the trainers pad it"
    ]
