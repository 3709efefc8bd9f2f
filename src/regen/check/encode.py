"""Completions in, token ids and loss masks out: the one code path check and export share."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

from regen.check.mask import Encoded, build_mask, special_ids, tokenize_all
from regen.check.record import Completion
from regen.check.render import (
    TEMPLATE_TOKENS,
    Rendered,
    generation_prompt,
    render_turns,
)
from regen.check.template import template_flags
from regen.errors import ConfigError, InputError
from regen.tokenizer import load_tokenizer

BATCH = 256
SUPERVISE = ("regenerated", "all")


@dataclass(frozen=True)
class Encoder:
    tok: Any
    specials: frozenset[int]
    template_tokens: str = "train"
    supervise: str = "regenerated"  # or "all": see check/mask.py
    # the generation prompt per thinking mode: a property of the template, rendered once
    _prompts: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def load(
        cls,
        tokenizer: str,
        *,
        chat_template: str | None = None,
        template_tokens: str = "train",
        supervise: str = "regenerated",
    ) -> Encoder:
        if template_tokens not in TEMPLATE_TOKENS:
            raise ConfigError(f"--template-tokens must be one of {', '.join(TEMPLATE_TOKENS)}")
        if supervise not in SUPERVISE:
            raise ConfigError(f"--supervise must be one of {', '.join(SUPERVISE)}")
        tok = load_tokenizer(tokenizer, chat_template=chat_template)
        return cls(tok, special_ids(tok), template_tokens, supervise)

    @classmethod
    def of(
        cls, tok: Any, template_tokens: str = "train", supervise: str = "regenerated"
    ) -> Encoder:
        return cls(tok, special_ids(tok), template_tokens, supervise)

    def encode(self, completion: Completion) -> Encoded:
        """One completion; raises InputError when its mask cannot be built."""
        result = self.encode_batch([completion])[0]
        if isinstance(result, InputError):
            raise result
        return result

    def encode_batch(self, completions: list[Completion]) -> list[Encoded | InputError]:
        rendered: list[Rendered | InputError] = []
        for completion in completions:
            try:
                rendered.append(render_turns(self.tok, completion))
            except InputError as err:
                rendered.append(err)
        good = [r for r in rendered if isinstance(r, Rendered)]
        tokens = iter(tokenize_all(self.tok, [r.text for r in good]) if good else [])
        out: list[Encoded | InputError] = []
        for completion, item in zip(completions, rendered, strict=True):
            if isinstance(item, InputError):
                out.append(item)
                continue
            ids, offsets = next(tokens)
            try:
                enc = build_mask(
                    completion.label, item, ids, offsets, self.specials, self.template_tokens,
                    completion.regenerated, self.supervise,
                )  # fmt: skip
                prompt = self.generation_prompt(completion)
            except InputError as err:
                out.append(err)
                continue
            flags = template_flags(completion, item, enc, prompt)
            if enc.source_supervised:
                flags += ("source_turns_supervised",)
            out.append(replace(enc, flags=flags))
        return out

    def generation_prompt(self, completion: Completion) -> str:
        """Rendered once per thinking mode with a probe conversation; a template that cannot
        render the probe (it wants a system turn, say) is asked with this sample's turns."""
        mode = completion.thinking
        if mode not in self._prompts:
            try:
                self._prompts[mode] = generation_prompt(self.tok, completion)
            except InputError:
                return generation_prompt(self.tok, completion, probe=False)
        return self._prompts[mode]

    def stream(
        self, completions: Iterable[Completion]
    ) -> Iterator[tuple[Completion, Encoded | InputError]]:
        it = iter(completions)
        while batch := list(islice(it, BATCH)):
            yield from zip(batch, self.encode_batch(batch), strict=True)
