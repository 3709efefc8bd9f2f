"""Agent auxiliary calls: requests an agent makes beside the conversation, which are not
prompts worth regenerating. Each kind is recognised by several signals together, never by
one (a real request may well have a small max_tokens):

    token_count       a token-counting endpoint (`/count_tokens`, `/tokenize`)
    non_chat_call     any other endpoint that is not a chat endpoint
    quota_probe       a tiny max_tokens and a tiny or probe-word message ("quota", "ping")
    title_generation  a system prompt (or instruction) asking for a title, and at least two
                      of: a small max_tokens, temperature 0, one user message, no tools

Each kind is skipped with its own reason and counted apart in the prepare report. The
recipe's `auxiliary:` mapping tunes the thresholds or keeps a kind (`keep: [quota_probe]`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from regen.prepare.skip import Skip

KINDS = ("token_count", "non_chat_call", "quota_probe", "title_generation")
CHAT_PATHS = ("/messages", "/chat/completions")
COUNT_PATHS = ("/count_tokens", "/tokenize", "/tokenizer")


@dataclass(frozen=True)
class AuxRules:
    probe_max_tokens: int = 16
    probe_max_chars: int = 32
    probe_words: tuple[str, ...] = ("quota", "ping", "test", "hi", "hello", "count")
    title_max_tokens: int = 64
    title_pattern: str = r"\b(title|headline|topic)\b"
    keep: frozenset[str] = field(default_factory=frozenset)  # kinds not to skip

    def check(self, path: str, body: dict[str, Any]) -> None:
        """Raise Skip(kind=...) when the request is an auxiliary call of a kind not kept."""
        found = self.classify(path, body)
        if found is not None and found[0] not in self.keep:
            raise Skip(found[1], kind=found[0])

    def classify(self, path: str, body: dict[str, Any]) -> tuple[str, str] | None:
        if path.endswith(COUNT_PATHS):
            return "token_count", f"token counting call to {path}"
        if path and not path.endswith(CHAT_PATHS):
            return "non_chat_call", f"call to {path}, not a chat endpoint"
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
        small = isinstance(max_tokens, int)
        user = _last_user_text(body).strip()
        if small and max_tokens <= self.probe_max_tokens and self._probe_text(user):
            return "quota_probe", f"quota probe (max_tokens={max_tokens}, message {user[:20]!r})"
        if re.search(self.title_pattern, _instructions(body), re.IGNORECASE):
            signals = {
                f"max_tokens={max_tokens}": small and max_tokens <= self.title_max_tokens,
                "temperature 0": body.get("temperature") == 0,
                "one user message": _user_turns(body) == 1,
                "no tools": not body.get("tools"),
            }
            hits = [name for name, hit in signals.items() if hit]
            if len(hits) >= 2:
                return "title_generation", "title generation (" + ", ".join(hits) + ")"
        return None

    def _probe_text(self, text: str) -> bool:
        words = re.findall(r"[a-z]+", text.lower())
        return len(text) <= self.probe_max_chars or any(w in self.probe_words for w in words)


def parse_rules(raw: Any, probe_max_tokens: int, where: str = "recipe.auxiliary") -> AuxRules:
    """The recipe's `auxiliary:` mapping (all keys optional)."""
    from regen.errors import ConfigError

    if raw is None:
        return AuxRules(probe_max_tokens=probe_max_tokens)
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{where} must be a mapping", hint="e.g. auxiliary: {keep: [quota_probe]}"
        )
    known = [*AuxRules.__dataclass_fields__]
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)}", hint=f"known keys: {', '.join(known)}"
        )
    keep = raw.get("keep") or []
    bad = [k for k in keep if k not in KINDS] if isinstance(keep, list) else [keep]
    if bad:
        raise ConfigError(f"{where}.keep: unknown kind(s) {bad}", hint=f"a list of: {KINDS}")
    base = AuxRules(probe_max_tokens=raw.get("probe_max_tokens", probe_max_tokens))
    values = {
        k: raw[k] for k in ("probe_max_chars", "title_max_tokens", "title_pattern") if k in raw
    }
    if "probe_words" in raw:
        values["probe_words"] = tuple(raw["probe_words"])
    try:
        re.compile(values.get("title_pattern", base.title_pattern))
    except re.error as exc:
        raise ConfigError(f"{where}.title_pattern is not a regular expression: {exc}") from exc
    return AuxRules(**{**base.__dict__, **values, "keep": frozenset(keep)})


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def _last_user_text(body: dict) -> str:
    users = [
        m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"
    ]
    return _text(users[-1].get("content")) if users else ""


def _user_turns(body: dict) -> int:
    return sum(
        1 for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"
    )


def _instructions(body: dict) -> str:
    """The system prompt (Anthropic top-level or an OpenAI system message) and the last user
    message: agents put the title instruction in either."""
    system = _text(body.get("system"))
    for m in body.get("messages") or []:
        if isinstance(m, dict) and m.get("role") in ("system", "developer"):
            system += " " + _text(m.get("content"))
    return f"{system} {_last_user_text(body)}"
