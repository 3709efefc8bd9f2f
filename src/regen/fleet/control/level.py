"""What live concurrency reads of one server over a window (`Window`), and what it knows
of that server's level (`Level`); the rule that moves the level is `concurrency.decide`."""

from __future__ import annotations

from dataclasses import dataclass

START = 16  # with no limit stated by the engine


@dataclass(frozen=True, slots=True)
class Window:
    """One server over one measurement window."""

    seconds: float
    tokens: float  # output tokens generated in it (the engine's counter, else answers')
    busy: float  # mean requests in flight / limit
    # 429/503 and timeouts before the answer's first token: the server refusing work
    # (ServerStats.load_failures), weighed by their share of `requests`
    errors: int = 0
    requests: int = 0  # requests sent in it (a refusal comes back at once, an answer late:
    # a share of the requests that ended would read a burst of refusals in a climb's window)
    preemptions: int | None = None  # the engine's count in the window (None: not reported)
    waiting: float | None = None  # the engine's queue at its shortest in the window
    running: float | None = None  # the engine's running batch, mean over the window
    kv_fit: int | None = None  # requests the engine's stated KV cache holds, at this mix
    # Whether the level's own requests had aged in it (tuning.py): a young window, right
    # after a step up, has not yet paid for their growth (a KV cache filling as they grow)
    aged: bool = True
    short: bool = False  # read in a climb's short window (a young one, or one with room)

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def young(level: Level) -> bool:
    """Whether the next window may be a young one: a first climb's doubling, read before
    its requests age (every window spent far below the knee is output lost)."""
    return level.climbing and level.first_climb and not level.ageing and level.step >= 2.0


@dataclass(frozen=True, slots=True)
class Level:
    """A server's level and what the controller has learnt about it."""

    limit: int
    cap: int
    best_rate: float = 0.0
    best_limit: int = 0
    best_unsure: bool = False  # best_rate was read in a young or a short window: read it
    # again in a full, aged one before a step above it is judged against it
    best_running: float | None = None  # the engine's running batch at the best level
    below_rate: float = 0.0  # the level the best one was stepped up from, and its rate: a
    below_limit: int = 0  # best level that later pays less than it was past a cliff
    ceiling: int | None = None  # stay below: this level was too many
    above_rate: float = 0.0  # backed off on preemptions: what the level above read
    ceiling_age: int = 0
    cliff_at: int = 0  # the level at which output last fell past a cliff here
    doubted: bool = False  # a cliff read on FEW_ENDED requests: this window reads it again
    climbing: bool = True
    climbed: bool = False  # a step up has paid (the start is below the top)
    descending: bool = False  # halving from a start that was past the top
    first_climb: bool = True  # no top found yet: the stated KV cache may be jumped to
    ageing: bool = False  # a first climb's step read too little in a young window: its
    # verdict waits for a window in which its requests have aged
    held: int = 0
    step: float = 2.0
    reason: str = "start"
    queue_from: int = 0  # trying what runs, down from this held level (its rate: best_rate)
    queue_paid: int = 0  # windows before a queue is tried again (it paid when last tried)
    down_from: int = 0  # a probe below this held level (its rate: best_rate)
    probe_down: bool = False  # the next probe from a held level goes below it
    refused: int = 0  # refusals before the first token, over `asked` requests, tallied
    asked: int = 0  # across windows until there are enough to judge (concurrency.decide)
    refused_from: int = 0  # trying half of this level, refused at (its rate: refused_rate)
    refused_rate: float = 0.0
    refusals_borne: int = 0  # windows refusals are borne: a level below paid less

    @property
    def cliff(self) -> bool:
        """Whether the ceiling is a cliff's (peers share it, `peers.shared_ceiling`): any
        other rule that sets a ceiling elsewhere, or its ageing out, ends that."""
        return self.ceiling is not None and self.ceiling == self.cliff_at


def start(cap: int, stated: int | None = None, last: int | None = None) -> Level:
    """The first level: where the last session of this run left this server (`last`: a
    resumed two-day run does not climb again from scratch; it is held, and probed from, as
    a level found), else what the engine says it runs at once (SGLang's
    max_running_requests), climbed from as from any start, else START; never above the cap."""
    first = next((n for n in (last, stated) if n and n > 0), START)
    limit = max(1, min(cap, first))
    if last and last > 0:
        return Level(
            limit=limit,
            cap=cap,
            reason="last session's level",
            climbing=False,
            climbed=True,
            first_climb=False,
        )
    return Level(limit=limit, cap=cap, reason="start")
