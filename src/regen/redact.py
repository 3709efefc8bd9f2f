"""Keep secrets out of everything regen writes or prints.

The API key is registered once it is read; any text that came from outside (a server's
error body, which debug gateways fill with the request headers) goes through `scrub` before
it reaches errors/, progress.json, the log or the terminal. `Authorization`-style values
are masked whatever they hold, since a proxy may have added its own credentials.
"""

from __future__ import annotations

import re

MASK = "[REDACTED]"
_secrets: set[str] = set()

_HEADER = re.compile(
    r"(?i)((?:proxy-)?authorization|x-api-key|api[-_]?key)"  # the header or field name
    r"(\\?[\"']?\s*[:=]\s*\\?[\"']?)"  # its separator, quoted (JSON, repr) or not
    r"((?:bearer|basic|token)\s+)?"
    r"[^\s\"'\\,;}\]]+"
)
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{4,}")


def register(secret: str | None) -> None:
    """Remember a secret so that `scrub` removes it wherever it appears."""
    if secret and len(secret) >= 4:  # a shorter "key" would mask ordinary text
        _secrets.add(secret)


def scrub(text: str) -> str:
    """`text` with every registered secret and every credential-looking value masked. Used
    on error and event text (short), never on completions (training data may discuss
    headers)."""
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    text = _HEADER.sub(lambda m: f"{m[1]}{m[2]}{m[3] or ''}{MASK}", text)
    return _BEARER.sub(lambda m: f"{m[1]}{MASK}", text)
