"""The end of a run: requests queued behind a deep queue move to a server with room.

Once every item is sent and none waits for a slot, a server that frees a slot gets nothing
new, while another may still hold a queue of streams without a first token: its level is
above what its engine runs at once (a vLLM past its max_num_seqs, a level live concurrency
left high), and those requests start only as the running ones end, the last of the run to
finish. They have cost their engine nothing it keeps (waiting_streams.py), so the idle
server takes them: withdrawn there, they are sent again and go where the fewest streams
wait for a first token (`Fleet._pick` in the end game). Moved only where the queues differ
clearly (SHARE of the deeper one, and MIN_MOVE), half the difference at a time: servers
whose queues are alike (a prefill or two each, or one queue each of about the same depth)
keep their requests, and no request moves back and forth.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from regen.fleet.server import Server

log = logging.getLogger("regen.fleet")

MIN_MOVE = 4  # queues that differ by fewer: nothing moves
SHARE = 0.25  # ... or by less than this share of the deeper one


def pick_order(at_end: bool) -> Callable[[Server], tuple[int, float]]:
    """How a request picks among servers with a free slot: the least loaded; once every
    item has its request (some may still wait in line for a slot, and withdrawn or failed
    ones come back), where the fewest streams wait for a first token, so a moved request
    goes where it starts soonest."""
    return _fewest_waiting if at_end else _least_loaded


def _fewest_waiting(server: Server) -> tuple[int, float]:
    return len(server.waiting), server.load


def _least_loaded(server: Server) -> tuple[int, float]:
    return 0, server.load


def to_move(idle: Server, servers: Sequence[Server], now: float) -> tuple[Server, int] | None:
    """The server to take waiting streams from for `idle`'s free slots, and how many."""
    room = idle.limit - idle.in_flight
    if room <= 0 or not idle.can_take(now):
        return None
    deepest = max(servers, key=lambda s: len(s.waiting))
    theirs, mine = len(deepest.waiting), len(idle.waiting)
    if deepest is idle or theirs - mine < max(MIN_MOVE, SHARE * theirs):
        return None
    return deepest, min(room, (theirs - mine) // 2)


def move_waiting(idle: Server, servers: Sequence[Server], now: float) -> int:
    """Withdraw from the deepest queue what `idle` should take (the withdrawn are sent again
    by their own tasks); how many."""
    move = to_move(idle, servers, now)
    if move is None:
        return 0
    deepest, count = move
    moved = deepest.waiting.withdraw(count)
    deepest.stats.moved += moved
    if moved:
        log.info(
            "server %s: %d requests without a first token moved to %s (its queue was %d deep)",
            deepest.name,
            moved,
            idle.name,
            len(deepest.waiting) + moved,
        )
    return moved
