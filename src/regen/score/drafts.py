"""What a draft is to `score`, and how `--draft` names one.

--draft PATH.gguf   a GGUF model on the embedded llama.cpp (llama_draft.py)
--draft DIR         a Hugging Face draft model or a speculators EAGLE-3 or DFlash checkpoint,
                    detected from its config.json (checkpoint.py)
--draft embedded    the embedded demo model (SmolLM2-135M): the identity draft when the
                    target is the embedded model too, a test oracle
--draft ngram       vLLM's n-gram drafter (prompt lookup, ngram.py), with the settings
                    the run's fleet served with, else --ngram-lookup or vLLM's defaults
--draft-servers URL a draft served by a fleet returning prompt log-probs (fleet_draft.py)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from regen.errors import ConfigError
from regen.score.checkpoints.settings import DEFAULT, CheckpointSettings
from regen.score.checkpoints.target_pass import Targets
from regen.score.ngram import DEFAULTS, NgramSettings
from regen.score.tokens import Sink, TokenRow

__all__ = [
    "CheckpointSettings",
    "Draft",
    "open_draft",
    "open_drafts",
    "require_a_draft",
    "target_passes",
]


class Draft(Protocol):
    name: str

    @property
    def identity(self) -> str:
        """What makes two scores comparable: results are kept per identity."""
        ...

    def check(self, tok: Any) -> None:
        """Raise ConfigError when the draft cannot score this target's tokens."""
        ...

    def fits(self, row: TokenRow) -> bool:
        """Whether the row fits the draft's context."""
        ...

    def run(self, rows: Iterable[TokenRow], sink: Sink) -> None:
        """Score every row, handing each outcome to `sink` (in any order)."""
        ...

    def close(self) -> None: ...


def open_draft(
    spec: str,
    *,
    threads: int = 2,
    n_ctx: int | None = None,
    ngram: NgramSettings = DEFAULTS,
    checkpoint: CheckpointSettings = DEFAULT,
) -> Draft:
    if spec == "ngram":
        from regen.score.ngram import NgramDraft

        return NgramDraft(ngram)
    from regen.score.llama_draft import DEFAULT_CONTEXT, LlamaDraft

    if spec == "embedded":
        from regen.embedded_model import default_model_path

        path = default_model_path()
    else:
        path = Path(spec).expanduser()
        if path.is_dir():
            from regen.score.checkpoints.checkpoint import open_checkpoint

            return open_checkpoint(path, checkpoint, threads=threads)
        if path.suffix != ".gguf":
            raise ConfigError(
                f"--draft {spec}: not a .gguf file, a checkpoint folder, `ngram` or `embedded`",
                hint="pass a GGUF draft model, a Hugging Face or speculators draft folder, "
                "`ngram`, or serve the draft and use --draft-servers URL",
            )
    return LlamaDraft(path, n_ctx=n_ctx or DEFAULT_CONTEXT, threads=threads)


def require_a_draft(specs: list[str], servers: list[str]) -> None:
    """Refuse a score with nothing to score with (before the tokenizer takes its seconds)."""
    if not specs and not servers:
        raise ConfigError(
            "no draft to score with",
            hint="pass --draft PATH.gguf, --draft DIR, --draft ngram, or --draft-servers URL ... "
            "(or --from-engine / --replay-servers URL ...: the serving engine's own acceptance)",
        )


@contextlib.contextmanager
def open_drafts(
    specs: list[str],
    servers: list[str],
    api: str,
    threads: int,
    api_key: str | None = None,
    ngram: NgramSettings = DEFAULTS,
    checkpoint: CheckpointSettings = DEFAULT,
) -> Iterator[list[Draft]]:
    """Every draft named on the command line, closed on exit (a GGUF holds its memory).
    `api_key`: the draft servers'; `ngram`: the n-gram drafter's lookup; `checkpoint`: what
    a checkpoint folder needs. Checkpoints that read the same target share its pass."""
    require_a_draft(specs, servers)
    drafts: list[Draft] = []
    targets = Targets()
    checkpoint = replace(checkpoint, targets=targets)
    try:
        if servers:
            from regen.score.fleet_draft import FleetDraft

            drafts.append(FleetDraft(servers, api, api_key=api_key))
        for spec in specs:
            drafts.append(open_draft(spec, threads=threads, ngram=ngram, checkpoint=checkpoint))
        yield drafts
    finally:
        for draft in drafts:
            draft.close()
        targets.close()


def target_passes(drafts: list[Draft]) -> list[str]:
    """What each target's hidden-state pass cost (one line per target, however many drafts
    read it: checkpoints/target_pass.py)."""
    shared = {id(d.shared): d.shared for d in drafts if getattr(d, "shared", None) is not None}
    return [t.cost.line(t.placement, t.readers) for t in shared.values() if t.cost.forwards]
