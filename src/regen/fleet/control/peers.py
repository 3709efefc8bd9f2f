"""What a server learns from the other servers of its fleet: a level at which another
server's output is clearly higher than its own best is tried here, once.

The servers of a fleet are most often alike (one model, one engine, one GPU kind each), yet
each finds its level alone, in windows of its own, and one noisy window can hold one server
at half the level the others found: the family bench's draws ended with levels such as
[441, 256, 256, 256] and [1024, 1024, 208, 208]. So once a server holds a level (no climb or
trial under way), the best level of a peer past its first climb (a peer trying another
level meanwhile still knows its best), whose output there is PEER_GAIN over this server's,
is tried here as any probe is: up, as a climb's step judged by this server's own window;
down, as a probe below that is kept only if it pays as much. A peer that is faster for
another reason (another GPU kind, a server not shared with other work) costs this server
one window at each of its levels, never more: each level is tried from a peer once (`tried`).

A cliff is shared too, among alike servers (best output within ALIKE of each other): a
level at which a peer's output fell past a cliff is one where this server would lose as
much, so it climbs no higher while that peer keeps the ceiling (each server otherwise met
the same cliff on its own, a window at half its output each time; in the family bench's
draw 13, three times in one run). Only a cliff: a ceiling set by preemptions or refusals
may be over-cautious (a mild cliff pays past its first preemptions), and each server reads
those for itself. Its own windows still judge every level below the shared ceiling.
"""

from __future__ import annotations

from dataclasses import replace

from regen.fleet.control.level import Level

PEER_GAIN = 0.08  # twice a step's GAIN: a peer's output, read in windows of its own
ALIKE = 0.3  # peers whose best output is within this share of each other share a ceiling


def settled(level: Level) -> bool:
    """Holding a level found: no climb, no trial, no window waited for."""
    trial = level.down_from or level.queue_from or level.refused_from
    return not (level.climbing or level.first_climb or level.descending or level.ageing or trial)


def follow(level: Level, peers: list[Level], tried: set[int]) -> Level:
    """`level`, or a trial of the best level of a peer that pays clearly more (see above);
    the level tried is added to `tried`."""
    if not settled(level) or level.best_rate <= 0:
        return level
    better = [
        peer
        for peer in peers
        if not (peer.climbing or peer.first_climb)  # (a trial of its own: its best is known)
        and peer.best_limit > 0
        and min(peer.best_limit, level.cap) != level.limit  # (caps may differ)
        and peer.best_limit not in tried
        and peer.best_rate > level.best_rate * (1 + PEER_GAIN)
    ]
    if not better:
        return level
    limit = max(better, key=lambda peer: peer.best_rate).best_limit
    tried.add(limit)
    limit = min(limit, level.cap)
    if limit > level.limit:  # a step up, the peer's evidence above any ceiling of its own
        return replace(
            level,
            limit=limit,
            climbing=True,
            step=1.25,
            held=0,
            ceiling=None,
            reason="a peer",
        )
    return replace(level, limit=limit, down_from=level.limit, held=0, reason="a peer")


def shared_ceiling(level: Level, peers: list[Level]) -> Level:
    """`level` with the lowest cliff of an alike peer above it (see above), where it has no
    ceiling of its own as low; a cliff at or under its level is the level's own to find."""
    if level.best_rate <= 0:
        return level
    ceilings = [
        peer.ceiling
        for peer in peers
        if peer.cliff
        and peer.ceiling is not None
        and peer.ceiling > level.limit
        and abs(peer.best_rate - level.best_rate) <= ALIKE * max(peer.best_rate, level.best_rate)
    ]
    if not ceilings or (level.ceiling is not None and level.ceiling <= min(ceilings)):
        return level
    return replace(level, ceiling=min(ceilings), ceiling_age=0)
