"""A seeded calibration sample of a prompt file, stratified by source, category and prompt
length, drawn in one streaming pass (the file is never held in memory).

Each stratum keeps a reservoir as large as the whole sample (it cannot know its share until
the file ends); at the end the sample is split over the strata in proportion to their sizes
(largest remainder), so a 2% source of very long prompts is in the sample at about 2%, and
each drawn prompt stands for `weight` prompts of the file.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from regen.inputs import read_prompts
from regen.records import BadLine, Prompt, source_name
from regen.run.repeats import IdsSeen

Stratum = tuple[str, str, int]


@dataclass
class CalibrationSample:
    prompts: int  # usable prompts in the file
    bad_lines: int  # lines generate will record as unusable (they cost no GPU time)
    strata: Counter[Stratum] = field(default_factory=Counter)
    lines: dict[int, float] = field(default_factory=dict)  # drawn line -> weight
    ids: dict[int, str] = field(default_factory=dict)  # drawn line -> prompt id
    stratum_of: dict[int, Stratum] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.lines)


def stratum(prompt: Prompt) -> Stratum:
    """(source, category, prompt-length bucket): what makes answers longer or shorter. The
    length bucket is log4 of the prompt's characters, so 100 and 130 share a bucket while
    a 400-character question and a 20,000-character document do not."""
    name = source_name(prompt.source)
    chars = sum(len(m["content"]) for m in prompt.messages if isinstance(m.get("content"), str))
    return name, prompt.category or "", int(math.log(chars + 1, 4))


def draw_sample(path: str | Path, size: int, seed: int = 0) -> CalibrationSample:
    rng = random.Random(seed)
    reservoirs: dict[Stratum, list[tuple[int, str]]] = {}
    sample = CalibrationSample(prompts=0, bad_lines=0)
    seen_ids = IdsSeen()
    for entry in read_prompts(path):
        # unusable as generate counts it: a bad line, or an id that appears again
        repeated = isinstance(entry, Prompt) and seen_ids.repeat(entry.line, entry.id)
        if isinstance(entry, BadLine) or repeated:
            sample.bad_lines += 1
            continue
        assert isinstance(entry, Prompt)  # no is_finished callback: never a Finished marker
        key = stratum(entry)
        sample.prompts += 1
        sample.strata[key] += 1
        seen = sample.strata[key]
        reservoir = reservoirs.setdefault(key, [])
        if len(reservoir) < size:
            reservoir.append((entry.line, entry.id))
        elif (slot := rng.randrange(seen)) < size:
            reservoir[slot] = (entry.line, entry.id)
    for key, count in _allocate(sample.strata, size).items():
        drawn = rng.sample(reservoirs[key], count)
        for line, prompt_id in drawn:
            sample.lines[line] = sample.strata[key] / count
            sample.ids[line] = prompt_id
            sample.stratum_of[line] = key
    return sample


def _allocate(strata: Counter[Stratum], size: int) -> dict[Stratum, int]:
    """Largest-remainder split of `size` in proportion to the strata's sizes."""
    total = sum(strata.values())
    size = min(size, total)
    if size <= 0:
        return {}
    exact = {key: size * count / total for key, count in strata.items()}
    shares = {key: int(value) for key, value in exact.items()}
    short = size - sum(shares.values())
    by_remainder = sorted(exact, key=lambda k: (exact[k] - shares[k], strata[k]), reverse=True)
    for key in by_remainder[:short]:
        shares[key] += 1
    return {key: n for key, n in shares.items() if n}
