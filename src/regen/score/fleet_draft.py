"""A draft served by a fleet that returns prompt log-probabilities: a real fleet scores 100K
rows at fleet speed, with generate's dispatch (least-loaded, retries, breaker, health).

    vllm    POST /v1/completions {prompt: ids, max_tokens: 1, prompt_logprobs: 1}: each prompt
            position lists its own token with its rank; rank 1 is the draft's greedy guess
    sglang  POST /generate {input_ids, return_logprob, logprob_start_len, top_logprobs_num: 1}:
            `meta_info.input_top_logprobs` holds the top guess per position

Both answer for prompt + answer in one forward pass, so the result is the same teacher-forced
match vector a local GGUF draft gives. Rows go out concurrently; each result is handed to the
sink as it lands (the results file is keyed by row id, so order does not matter).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from regen.errors import InputError, PermanentError
from regen.fleet.dispatch import Fleet
from regen.fleet.preflight import resolve_model
from regen.fleet.server import Server
from regen.score.logprobs import SGLANG, VLLM, parse_matches, request
from regen.score.tokens import Sink, TokenRow

PER_SERVER = 8  # rows in flight per server: a prompt-logprob request is one prefill


class FleetDraft:
    def __init__(
        self, urls: list[str], api: str, concurrency: int = PER_SERVER, api_key: str | None = None
    ) -> None:
        if api not in (VLLM, SGLANG):
            raise ValueError(api)
        self.urls, self.api, self.concurrency = urls, api, concurrency
        self.api_key = api_key  # sent as a bearer token, as generate's fleet sends it
        self.name = f"{api}-fleet"
        self.tok: Any = None
        self._vocab_unchecked = True  # the first answer is checked against the target's tokens

    @property
    def identity(self) -> str:
        return f"{self.api}:{','.join(sorted(self.urls))}"

    def check(self, tok: Any) -> None:
        """Checked on the first answer (its decoded tokens against the target's): the servers
        expose no vocabulary listing that vLLM and SGLang share."""
        self.tok = tok

    def fits(self, row: TokenRow) -> bool:
        return True  # the server answers a row too long for it with a 400: the row is skipped

    def run(self, rows: Iterable[TokenRow], sink: Sink) -> None:
        asyncio.run(self._run(rows, sink))

    def close(self) -> None:
        """Sessions are closed at the end of `run`."""

    async def _run(self, rows: Iterable[TokenRow], sink: Sink) -> None:
        servers = [Server(url, self.concurrency, self.api_key) for url in self.urls]
        fleet = Fleet(servers)
        health: asyncio.Task | None = None
        try:
            model, down = await resolve_model(servers, None)
            for server, why in down.items():
                fleet.take_out_at_start(server, why)
            health = asyncio.create_task(fleet.watch_health())
            await self._pump(fleet, model, rows, sink, self.concurrency * len(servers))
        finally:
            if health is not None:
                health.cancel()
            await asyncio.gather(*(s.close() for s in servers))

    async def _pump(
        self, fleet: Fleet, model: str, rows: Iterable[TokenRow], sink: Sink, window: int
    ) -> None:
        pending: set[asyncio.Task] = set()
        try:
            for row in rows:
                if len(pending) >= window:
                    pending = await _hand_over(pending, sink)
                pending.add(asyncio.create_task(self._one(fleet, model, row)))
            while pending:
                pending = await _hand_over(pending, sink)
        finally:
            for task in pending:  # a failure stops the score; the rows written are kept
                task.cancel()

    async def _one(self, fleet: Fleet, model: str, row: TokenRow) -> tuple[TokenRow, Any]:
        path, body = request(self.api, model, row.ids, row.start)
        try:
            done = await fleet.post(path, body)
        except PermanentError as err:  # this row's fault (too long, say): skip it, go on
            return row, InputError(f"{row.label}: {err.message}", kind="server_refused_row")
        tok, self._vocab_unchecked = (self.tok if self._vocab_unchecked else None), False
        return row, parse_matches(self.api, done.data, row, tok, done.server.name)


async def _hand_over(pending: set[asyncio.Task], sink: Sink) -> set[asyncio.Task]:
    """Wait for at least one row; hand every finished one to the sink."""
    done, rest = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    for task in done:
        sink(*task.result())  # a fleet failure raises here and stops the score: rerun resumes
    return rest
