"""Cache-affine dispatch: a request whose prompt starts like an earlier one's goes where that
prefix is already cached, while that server is not much busier than the least-busy one.

The samples of one prompt, the later turns of one conversation (each turn's prompt starts with
the first's) and prompts sharing a long system prompt and tool list each cost less prefill on
the server that holds their prefix (vLLM's prefix caching, SGLang's radix cache). The key is a
hash of the tools and the messages up to the first user message, cut at PREFIX_CHARS: equal
for all of those, different for unrelated prompts. Each key ranks the servers by rendezvous
hashing (the same order on every client, stable when a server leaves); a request takes the
first in that order whose load (in flight / level) is within BOUND of the least-loaded
server's. So one hot prefix fills its server up to the bound and then spills to the next,
and no slot waits while another server has room: utilisation is that of least-loaded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, TypeVar

import orjson

PREFIX_CHARS = 4096  # about a thousand tokens: longer prefixes still share this much
BOUND = 0.25  # of a server's level: how much busier than the least-loaded it may be

S = TypeVar("S")


def prefix_key(body: dict[str, Any]) -> bytes | None:
    """The key of a chat request's cacheable prefix (None: nothing to be affine to)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    head = []
    for message in messages:
        head.append(message)
        if isinstance(message, dict) and message.get("role") == "user":
            break
    text = orjson.dumps([body.get("tools"), head])[:PREFIX_CHARS]
    return hashlib.blake2b(text, digest_size=8).digest()


def ranked(key: bytes, servers: Sequence[S], name: Any) -> list[S]:
    """`servers` in the key's order of preference (highest rendezvous weight first)."""

    def weight(server: S) -> bytes:
        return hashlib.blake2b(key + name(server).encode(), digest_size=8).digest()

    return sorted(servers, key=weight, reverse=True)


def choose(order: Sequence[S], candidates: Sequence[S], load: Any) -> S:
    """The server for a request among `candidates` (those that can take it now): the first
    of its key's `order` within BOUND of the least-loaded candidate."""
    least = min(load(s) for s in candidates)
    allowed = set(candidates)
    for server in order:
        if server in allowed and load(server) <= least + BOUND:
            return server
    return min(candidates, key=load)  # not reached: the least-loaded is always allowed
