"""Quality alarms while generating: catch the "87% empty answers" failure in minutes, not days.

Rolling rates over the last `window` finished samples: empty answers, `finish_reason: length`,
missing reasoning when thinking was asked for, and repeated answers (the "OK." failure): the
share of answers whose normalised prefix equals an earlier answer's in the window, so 0% when
every answer differs and (n - 1) / n when all n are the same. (Counting the most common answer
over n instead could never fall below 1 / n: four different answers would read 25%.)
"""

from __future__ import annotations

import re
from collections import Counter, deque
from dataclasses import dataclass

_SPACES = re.compile(r"\s+")
_LEADING = re.compile(r"\s*")


@dataclass(frozen=True)
class Thresholds:
    empty: float = 0.05
    length: float = 0.25
    missing_reasoning: float = 0.10
    repeated_answers: float = 0.20
    window: int = 500
    min_samples: int = 50


@dataclass(frozen=True)
class Alarm:
    name: str
    rate: float
    threshold: float
    detail: str

    def __str__(self) -> str:
        return (
            f"{self.name}: {self.rate:.0%} of the last samples "
            f"(threshold {self.threshold:.0%}){self.detail}"
        )


KEY_CHARS = 80
_HEAD_CHARS = 4 * KEY_CHARS  # enough for the key unless whitespace runs eat most of it


def answer_key(content: str) -> str:
    """Normalised answer prefix: answers equal under it are 'the same answer'. Read from the
    answer's head only: a 32K-token answer costs what a short one does."""
    head = content[: _HEAD_CHARS + _LEADING.match(content).end()]  # type: ignore[union-attr]
    if len(head) < len(content):
        key = _SPACES.sub(" ", head.lstrip().lower())
        if len(key) > KEY_CHARS:  # only the head's last character can differ from the whole's
            return key[:KEY_CHARS]
    return _SPACES.sub(" ", content.strip().lower())[:KEY_CHARS]


def _blank(text: str) -> bool:
    return not text or text.isspace()  # without copying a long answer to strip it


class QualityMonitor:
    def __init__(self, thresholds: Thresholds | None = None) -> None:
        self.t = thresholds or Thresholds()
        self._window: deque[tuple[bool, bool, bool | None, str]] = deque()
        self._prefixes: Counter[str] = Counter()
        self._sums = {"empty": 0, "length": 0, "missing_reasoning": 0, "thinking": 0}

    def observe(self, content: str, reasoning: str | None, finish: str | None, thinking: bool):
        empty = _blank(content)
        length = finish == "length"
        missing = _blank(reasoning or "") if thinking else None
        entry = (empty, length, missing, answer_key(content))
        self._window.append(entry)
        self._count(entry, +1)
        if len(self._window) > self.t.window:
            self._count(self._window.popleft(), -1)

    def _count(self, entry: tuple[bool, bool, bool | None, str], sign: int) -> None:
        empty, length, missing, key = entry
        self._sums["empty"] += sign * empty
        self._sums["length"] += sign * length
        if missing is not None:
            self._sums["thinking"] += sign
            self._sums["missing_reasoning"] += sign * missing
        if key:
            self._prefixes[key] += sign
            if self._prefixes[key] <= 0:
                del self._prefixes[key]

    def rates(self) -> dict[str, float]:
        n = len(self._window) or 1
        repeats = sum(count - 1 for count in self._prefixes.values())
        thinking = self._sums["thinking"] or 1
        return {
            "empty": self._sums["empty"] / n,
            "length": self._sums["length"] / n,
            "missing_reasoning": self._sums["missing_reasoning"] / thinking,
            "repeated_answers": repeats / n,
        }

    def alarms(self) -> list[Alarm]:
        if len(self._window) < self.t.min_samples:
            return []
        rates = self.rates()
        found = []
        for name in ("empty", "length", "missing_reasoning", "repeated_answers"):
            threshold = getattr(self.t, name)
            if rates[name] > threshold:
                detail = ""
                if name == "repeated_answers":
                    detail = f'; most common answer: "{self._prefixes.most_common(1)[0][0][:40]}"'
                found.append(Alarm(name, rates[name], threshold, detail))
        return found

    def snapshot(self) -> dict:
        return {
            "window": len(self._window),
            "rates": {k: round(v, 4) for k, v in self.rates().items()},
            "alarms": [str(a) for a in self.alarms()],
        }
