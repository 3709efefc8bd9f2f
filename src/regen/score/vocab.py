"""A draft must share the target's vocabulary: the same token text at the same id. Names say
nothing (a fine-tune keeps the name, a sibling model can share the tokenizer), so tokens are
compared, not model names."""

from __future__ import annotations

from typing import Any

from regen.errors import ConfigError

SHOWN = 3  # mismatching ids quoted in the error


def check_vocab(draft_tokens: list[str], tok: Any, what: str) -> None:
    """Every id the target tokenizer can produce must mean the same token to the draft (a draft
    may have extra, padded ids past the target's vocabulary)."""
    target = tok.convert_ids_to_tokens(list(range(len(tok))))
    if len(draft_tokens) < len(target):
        raise _refuse(what, f"it has {len(draft_tokens)} tokens, the target {len(target)}")
    differ = [i for i, t in enumerate(target) if t is not None and draft_tokens[i] != t]
    if differ:
        shown = ", ".join(f"id {i}: {draft_tokens[i]!r} vs {target[i]!r}" for i in differ[:SHOWN])
        raise _refuse(what, f"{len(differ)} of {len(target)} token ids differ ({shown})")


def _refuse(what: str, why: str) -> ConfigError:
    return ConfigError(
        f"{what} does not share the target's vocabulary: {why}",
        hint="use a draft trained on the target's tokenizer (same family and vocabulary), "
        "or check that --tokenizer names the target model",
    )


def check_decoded(decoded: list[tuple[int, str | None]], tok: Any, what: str) -> None:
    """A served draft's own text for the answer's token ids against the target tokenizer's.
    Tokens that decode to part of a character (byte-level pieces) are not compared."""
    differ = []
    for token_id, text in decoded:
        ours = tok.decode([token_id])
        if text is None or "\ufffd" in ours or "\ufffd" in text:
            continue
        if text != ours:
            differ.append(f"id {token_id}: {text!r} vs {ours!r}")
    if differ:
        raise _refuse(
            what, f"{len(differ)} answer tokens decode differently ({', '.join(differ[:SHOWN])})"
        )
