"""Sampling: what each request asks of the model, one fixed setting or (given as lists) a
seeded pick per (prompt, sample), and how records and the manifest name it."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from regen.records import WorkItem

Thinking = Literal["on", "off", "auto"]
LISTABLE = ("max_tokens", "temperature", "top_p", "top_k", "thinking")  # may be given as lists


@dataclass(frozen=True)
class Sampling:
    """None means "the server's default" (its generation config), recorded as such. A field
    given as a tuple (`--temperature 0.6,0.8,1.0`) is a list of choices: each sample uses one
    (`for_item`), and the record says which."""

    max_tokens: int | tuple[int, ...] = 4096
    temperature: float | tuple[float, ...] | None = None
    top_p: float | tuple[float, ...] | None = None
    top_k: int | tuple[int, ...] | None = None
    seed: int | None = None
    thinking: Thinking | tuple[Thinking, ...] = "auto"
    extra: dict[str, Any] | None = None  # other request fields, as a batch file's body gave them

    def as_dict(self) -> dict[str, Any]:
        """As a record's `meta.sampling` says it (shallow: `dataclasses.asdict` copies deeply
        and costs more than encoding the whole record)."""
        return {name: getattr(self, name) for name in SAMPLING_FIELDS}

    def with_overrides(self, overrides: dict[str, Any] | None) -> Sampling:
        if not overrides:
            return self
        return replace(self, **overrides)

    def mixed(self) -> list[str]:
        """The fields given as lists of choices."""
        return [name for name in LISTABLE if isinstance(getattr(self, name), tuple)]

    def for_item(self, item: WorkItem) -> Sampling:
        """The setting of one (prompt, sample): one choice of each list, picked by a hash of
        the seed, the prompt's id, the sample and the field, so a resume, another machine or
        another --shard split picks the same."""
        chosen = {
            name: _pick(
                getattr(self, name), f"{self.seed}\0{item.prompt.id}\0{item.sample}\0{name}"
            )
            for name in self.mixed()
        }
        return replace(self, **chosen) if chosen else self

    def for_manifest(self) -> dict[str, Any]:
        """As the manifest keeps it: a list of choices as a list, as JSON reads it back (so a
        resume with the same lists compares equal)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.as_dict().items()}

    def request_fields(self, sample: int) -> dict[str, Any]:
        """The sampling part of a chat completion request body."""
        body: dict[str, Any] = dict(self.extra or {})
        body["max_tokens"] = self.max_tokens
        for name in ("temperature", "top_p", "top_k"):
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        if self.seed is not None:
            body["seed"] = self.seed + sample  # K samples of one prompt must differ
        if self.thinking != "auto":
            # SGLang and vLLM pass these to the chat template (Qwen3-style enable_thinking).
            kwargs = {
                **body.get("chat_template_kwargs", {}),
                "enable_thinking": self.thinking == "on",
            }
            body["chat_template_kwargs"] = kwargs
        return body


SAMPLING_FIELDS = tuple(Sampling.__dataclass_fields__)


def choices(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else (value,)


def _pick(choices: tuple[Any, ...], key: str) -> Any:
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return choices[int.from_bytes(digest, "big") % len(choices)]


def setting_label(sampling: Mapping[str, Any], mixed: list[str]) -> str:
    """How status names one setting of a mix: `temperature=0.6 thinking=on`."""
    return " ".join(f"{name}={sampling.get(name)}" for name in mixed)
