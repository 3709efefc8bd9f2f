"""What a worker does with a batch of a run's lines for `check`: parse, encode, judge.

Everything here depends on the sample alone, so it runs in any worker (`regen.parallel`);
what depends on all samples (duplicates, the counts, the verdict) is folded in read order by
`Tally` in the calling process. With stored token ids the sample is also built from them
(finished/stored.py) and the two must agree: the token_mismatch rule is that guard.
"""

from __future__ import annotations

from dataclasses import dataclass

from regen.check.sample import SampleResult, failed, invalid, result_of
from regen.errors import InputError
from regen.finished.encode import Encoder
from regen.finished.mask import Encoded
from regen.finished.read import Unreadable, parse_line
from regen.finished.record import Completion
from regen.finished.stored import agrees


@dataclass(frozen=True)
class CheckJob:
    encoder: Encoder
    degenerate_at: int


def parse(line: bytes) -> Completion | SampleResult:
    """A readable completion, or the result that counts the line as unusable."""
    item = parse_line(line)
    return invalid(item.raw, item.error) if isinstance(item, Unreadable) else item


def check_lines(job: CheckJob, lines: list[bytes]) -> list[tuple[SampleResult, bool]]:
    """One result per line, in order, and whether the line was a completion at all."""
    parsed = [parse(line) for line in lines]
    completions = [p for p in parsed if isinstance(p, Completion)]
    encoded = iter(job.encoder.encode_batch(completions) if completions else [])
    out = []
    for item in parsed:
        if isinstance(item, SampleResult):
            out.append((item, False))
        else:
            out.append((judge_one(job, item, next(encoded)), True))
    return out


def judge_one(job: CheckJob, completion: Completion, enc: Encoded | InputError) -> SampleResult:
    encoder = job.encoder
    if isinstance(enc, InputError):
        return failed(completion, enc.kind, enc.message)
    matched = None
    if not encoder.stored_ids:  # the guard: built from the stored ids too, they must agree
        try:
            stored = encoder.from_ids(completion)
            matched = None if stored is None else agrees(stored, enc)
        except InputError:
            matched = False
    return result_of(
        completion,
        enc,
        specials=encoder.specials,
        degenerate_at=job.degenerate_at,
        template_flags=enc.flags,
        stored_agree=matched,
    )
