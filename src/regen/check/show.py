"""`--show N`: print samples with the supervised tokens highlighted, to eyeball the mask."""

from __future__ import annotations

import click

from regen.finished.mask import Encoded
from regen.finished.record import Completion

OPEN, CLOSE = "⟦", "⟧"  # marks supervised runs when colour is off (pipes, files)


def render_sample(completion: Completion, enc: Encoded, *, color: bool, rule: str = "") -> str:
    mask = enc.loss_mask()
    why = f"  [{rule}]" if rule and not rule.startswith("(") else ""
    out = [f"--- {completion.label}  tokens {len(mask)}  supervised {enc.mask_sum}{why}"]
    parts: list[str] = []
    for i, (start, end) in enumerate(enc.offsets):
        piece = enc.text[start:end]
        if not mask[i]:
            parts.append(click.style(piece, dim=True) if color else piece)
            continue
        if color:
            parts.append(click.style(piece, fg="green", bold=True, underline=True))
        else:
            opens = i == 0 or not mask[i - 1]
            closes = i + 1 == len(mask) or not mask[i + 1]
            parts.append((OPEN if opens else "") + piece + (CLOSE if closes else ""))
    out.append("".join(parts))
    return "\n".join(out)
