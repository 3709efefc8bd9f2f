"""What a server has done so far: counts, tokens and a latency histogram, for status and
/metrics."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

# Upper bounds (seconds) of the request-latency histogram: from a short answer on a fast
# GPU to a 32K-token one queued behind others.
LATENCY_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)


@dataclass(slots=True)
class ServerStats:
    completed: int = 0
    failed: int = 0
    completion_tokens: int = 0
    prompt_tokens: int = 0
    latency_ewma: float = 0.0
    last_error: str | None = None
    retried: int = 0  # failed attempts that were sent again
    affinity_sends: int = 0  # requests sent here for their prefix, not for being least-loaded
    aborted: int = 0  # answers the engine cut short (finish_reason abort or error)
    withdrawn: int = 0  # requests past a lowered level, before their first token: sent again
    moved: int = 0  # at the end, queued here without a first token: sent to a server with room
    # 429/503 and timeouts before the answer's first token: the server saying it is full or
    # too slow, what live concurrency weighs (by their share of the requests). An engine's
    # abort, a 5xx, a broken stream, or any error after the first tokens (a 503 event in a
    # stream that had begun) fails one request: retried, and the circuit breaker's
    # business, not a sign that the level is too high.
    load_failures: int = 0
    sent: int = 0  # requests sent here (retries included): what refusals are a share of
    latency_counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    latency_sum: float = 0.0
    spec_steps: int = 0  # verify steps of the engine's drafter, over the answers it reported
    spec_accepted: int = 0  # draft tokens those steps accepted
    # Data events of streamed answers received so far, answers in flight included: live
    # concurrency's measure of an engine that counts no tokens of its own (an event is a
    # token on vLLM and SGLang by default, several with speculative decoding; a level's
    # events/s against another's is what it reads).
    streamed_events: int = 0

    @property
    def acceptance_length(self) -> float | None:
        """Tokens per verify step, bonus included, as vLLM's mean_acceptance_length."""
        return 1 + self.spec_accepted / self.spec_steps if self.spec_steps else None

    def record_spec(self, spec: dict | None) -> None:
        if spec:
            self.spec_steps += int(spec.get("num_spec_steps") or 0)
            self.spec_accepted += int(spec.get("num_accepted_draft_tokens") or 0)

    def record_success(self, latency: float, tokens: int, prompt_tokens: int = 0) -> None:
        self.completed += 1
        self.completion_tokens += tokens
        self.prompt_tokens += prompt_tokens
        self.latency_counts[bisect.bisect_left(LATENCY_BUCKETS, latency)] += 1
        self.latency_sum += latency
        alpha = 0.1 if self.latency_ewma else 1.0
        self.latency_ewma += alpha * (latency - self.latency_ewma)
