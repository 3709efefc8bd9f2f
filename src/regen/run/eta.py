"""Time left in a run: the one estimator behind the live display's ETA, `regen status` and
`regen plan --from-run`.

From tokens, not request counts: long answers dominate the time left. The point estimate
uses the last 5 minutes' output rate (else the whole session's); the range spans the
fastest and slowest of the rolling windows, so a fleet that just slowed down shows it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Remaining:
    items: int
    seconds: float | None
    seconds_low: float | None
    seconds_high: float | None
    output_tokens: float | None
    tokens_per_second: float | None


def remaining(
    items: int, completed: int, completion_tokens: int, rates: dict[str, dict[str, float]]
) -> Remaining:
    """`rates`: RunStats.rates() (window name -> tokens_per_s, completions_per_s)."""
    if completed == 0:
        return Remaining(
            items,
            None,
            seconds_low=None,
            seconds_high=None,
            output_tokens=None,
            tokens_per_second=None,
        )
    tokens = items * completion_tokens / completed
    rate = rates["last_5m"]["tokens_per_s"] or rates["overall"]["tokens_per_s"]
    if rate <= 0:
        return Remaining(
            items,
            None,
            seconds_low=None,
            seconds_high=None,
            output_tokens=tokens,
            tokens_per_second=None,
        )
    window_rates = [r["tokens_per_s"] for r in rates.values() if r["tokens_per_s"] > 0]
    return Remaining(
        items=items,
        seconds=tokens / rate,
        seconds_low=tokens / max(window_rates),
        seconds_high=tokens / min(window_rates),
        output_tokens=tokens,
        tokens_per_second=rate,
    )


def from_status(info: dict) -> Remaining:
    """The estimate for a run as `regen status` reads it (`read_status`'s dict): items left
    from its one count (`regen.run.counts`), rates from the last snapshot."""
    left = info["count"]["left"]
    progress = info["progress"]
    if progress is None:
        return Remaining(
            left,
            None,
            seconds_low=None,
            seconds_high=None,
            output_tokens=None,
            tokens_per_second=None,
        )
    session = progress["session"]
    return remaining(left, session["completed"], session["completion_tokens"], progress["rates"])
