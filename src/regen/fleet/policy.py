"""How the dispatcher retries a request and watches servers: plain values, set from the CLI."""

from __future__ import annotations

import random
from dataclasses import dataclass

from regen.errors import Overloaded, RetryableError, ServerRefused, TransportError


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter; a server's Retry-After wins when it sends one.

    One counter per request, its attempts. A failure that may be the prompt's fault (5xx,
    408, 429, a timeout) is retried while attempts <= `max_retries`. A connection failure
    (refused, reset) or a server refusing every request says nothing about the prompt, so it
    is retried up to the larger `max_attempts`: the circuit breaker, refusal count and
    --give-up-after bound a bad fleet, and this cap still ends a prompt that kills every
    server it touches.
    """

    max_retries: int = 5
    max_attempts: int = 24
    base_delay: float = 1.0
    max_delay: float = 60.0

    def allows_retry(self, attempts: int, error: RetryableError | ServerRefused) -> bool:
        blameless = isinstance(error, TransportError | ServerRefused)
        return attempts < (self.max_attempts if blameless else self.max_retries + 1)

    def delay(self, attempt: int, error: RetryableError) -> float:
        if isinstance(error, Overloaded) and error.retry_after is not None:
            return min(error.retry_after, 10 * self.max_delay)
        return random.uniform(0, min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))


@dataclass(frozen=True)
class HealthPolicy:
    """How servers are watched. A server with requests in flight is asked /v1/models every
    `liveness_interval` s; `liveness_failures` misses in a row, with no answer from it in
    between, mean it hangs: it is taken out and its requests go elsewhere. `give_up_after`
    bounds the wait when every server is down (0 waits forever)."""

    liveness_interval: float = 15.0
    liveness_timeout: float = 10.0
    liveness_failures: int = 3
    give_up_after: float = 1800.0
