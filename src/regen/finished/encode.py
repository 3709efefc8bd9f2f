"""Completions in, token ids and loss masks out: the one code path check and export share."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

from regen.errors import ConfigError, InputError
from regen.finished.mask import Encoded, build_mask, special_ids, tokenize_all
from regen.finished.record import Completion
from regen.finished.render import (
    TEMPLATE_TOKENS,
    Rendered,
    generation_prompt,
    render_turns,
)
from regen.finished.stored import Tail, covered, from_stored_ids, template_tail
from regen.finished.template import no_generation_prompt, template_flags
from regen.tokenizer import load_tokenizer

BATCH = 256
SUPERVISE = ("regenerated", "all")


@dataclass(frozen=True)
class Encoder:
    tok: Any
    specials: frozenset[int]
    template_tokens: str = "train"
    supervise: str = "regenerated"  # or "all": see finished/mask.py
    # build a sample from its stored token ids where they cover it (finished/stored.py)
    stored_ids: bool = False
    # the generation prompt and the turn's tail per thinking mode: facts of the template
    _prompts: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    _tails: dict[str, Tail | None] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def load(
        cls,
        tokenizer: str,
        *,
        chat_template: str | None = None,
        template_tokens: str = "train",
        supervise: str = "regenerated",
        stored_ids: bool = False,
    ) -> Encoder:
        if template_tokens not in TEMPLATE_TOKENS:
            raise ConfigError(f"--template-tokens must be one of {', '.join(TEMPLATE_TOKENS)}")
        if supervise not in SUPERVISE:
            raise ConfigError(f"--supervise must be one of {', '.join(SUPERVISE)}")
        tok = load_tokenizer(tokenizer, chat_template=chat_template)
        return cls(tok, special_ids(tok), template_tokens, supervise, stored_ids)

    @classmethod
    def of(
        cls,
        tok: Any,
        template_tokens: str = "train",
        supervise: str = "regenerated",
        stored_ids: bool = False,
    ) -> Encoder:
        return cls(tok, special_ids(tok), template_tokens, supervise, stored_ids)

    def with_stored_ids(self, stored_ids: bool) -> Encoder:
        return replace(self, stored_ids=stored_ids, _prompts={}, _tails={})

    def encode(self, completion: Completion) -> Encoded:
        """One completion; raises InputError when its mask cannot be built."""
        result = self.encode_batch([completion])[0]
        if isinstance(result, InputError):
            raise result
        return result

    def encode_batch(self, completions: list[Completion]) -> list[Encoded | InputError]:
        """Each completion's encoding: from its stored ids when `stored_ids` and they cover
        it, else rendered and tokenised (one tokeniser call for the batch)."""
        from_ids: dict[int, Encoded | InputError] = {}
        rendered: list[Rendered | InputError | None] = []
        for n, completion in enumerate(completions):
            try:
                enc = self.from_ids(completion) if self.stored_ids else None
                if enc is not None:
                    from_ids[n] = enc
                rendered.append(render_turns(self.tok, completion) if enc is None else None)
            except InputError as err:
                rendered.append(err)
        good = [r for r in rendered if isinstance(r, Rendered)]
        tokens = iter(tokenize_all(self.tok, [r.text for r in good]) if good else [])
        out: list[Encoded | InputError] = []
        for n, (completion, item) in enumerate(zip(completions, rendered, strict=True)):
            if item is None or isinstance(item, InputError):
                out.append(from_ids[n] if item is None else item)
                continue
            ids, offsets = next(tokens)
            try:
                enc = build_mask(
                    completion.label,
                    item,
                    ids=ids,
                    offsets=offsets,
                    specials=self.specials,
                    template_tokens=self.template_tokens,
                    written=completion.regenerated,
                    supervise=self.supervise,
                )
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

    def from_ids(self, completion: Completion) -> Encoded | None:
        """The encoding from the stored ids, or None when they do not cover the sample."""
        if not covered(completion, self.template_tokens, self.supervise):
            return None
        mode = completion.thinking
        if mode not in self._tails:
            self._tails[mode] = template_tail(self.tok, self.specials, completion)
        tail = self._tails[mode]
        if tail is None:
            return None
        flags = (
            ("no_generation_prompt",)
            if no_generation_prompt(self.generation_prompt(completion))
            else ()
        )
        return from_stored_ids(completion, tail, self.specials, flags)

    def stream(
        self, completions: Iterable[Completion]
    ) -> Iterator[tuple[Completion, Encoded | InputError]]:
        it = iter(completions)
        while batch := list(islice(it, BATCH)):
            yield from zip(batch, self.encode_batch(batch), strict=True)
