"""A loopback server answering prompt log-probability requests the way vLLM and SGLang do,
computed with a real llama.cpp model, so `regen score --draft-servers` can be checked against
the local GGUF draft on the same model.

    POST /v1/completions  vLLM: prompt (token ids), prompt_logprobs -> choices[0].prompt_logprobs
    POST /generate        SGLang: input_ids, return_logprob, logprob_start_len, top_logprobs_num
                          -> meta_info.input_token_logprobs / input_top_logprobs
    GET  /v1/models       the model's name

The forward pass is the one the local draft makes (prompt + answer minus its last token,
`llama_draft.forward`), so both give the same match vectors. No token is generated: scoring
never needs it. Handlers run one at a time on the loop (the model is not thread-safe).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from aiohttp import web

from regen.fleet.embedded import free_port
from regen.score.llama_draft import forward
from regen.testing.auth import bearer_auth
from regen.testing.loop_thread import LoopThread


class LogprobServer:
    def __init__(
        self, model_path: Path, n_ctx: int = 1024, name: str = "draft", api_key: str | None = None
    ) -> None:
        from llama_cpp import Llama

        self.llm = Llama(model_path=str(model_path), n_ctx=n_ctx, n_threads=2, verbose=False)
        self.name, self.api_key = name, api_key
        self.port = 0
        self.requests: list[str] = []  # paths asked, in order
        self._runner: web.AppRunner | None = None
        self._background = LoopThread("logprob server")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _positions(self, ids: list[int]) -> list[tuple[float, int, int, float]]:
        """Per position i >= 1: (logprob of ids[i], its rank, argmax id, its logprob)."""
        out = []
        for at, batch in forward(self.llm, ids[:-1], 0):  # the pass the local draft makes
            for j, row in enumerate(np.asarray(batch, dtype=np.float64)):
                token = ids[at + j + 1]
                logz, own, best = np.logaddexp.reduce(row), row[token], int(np.argmax(row))
                out.append(
                    (float(own - logz), int(np.sum(row > own)) + 1, best, float(row[best] - logz))
                )
        return out

    def _text(self, token: int) -> str:
        return self.llm.detokenize([token]).decode("utf-8", errors="replace")

    async def completions(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append("/v1/completions")
        ids = body["prompt"]
        prompt_logprobs: list[Any] = [None]
        for i, (own, rank, best, best_lp) in enumerate(self._positions(ids), start=1):
            entry = {
                str(ids[i]): {"logprob": own, "rank": rank, "decoded_token": self._text(ids[i])}
            }
            if best != ids[i]:
                entry[str(best)] = {
                    "logprob": best_lp,
                    "rank": 1,
                    "decoded_token": self._text(best),
                }
            prompt_logprobs.append(entry)
        choice = {
            "index": 0,
            "text": "",
            "finish_reason": "length",
            "prompt_logprobs": prompt_logprobs,
        }
        return web.json_response(
            {
                "id": "cmpl-score",
                "object": "text_completion",
                "model": self.name,
                "choices": [choice],
            }
        )

    async def generate(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append("/generate")
        ids, start = body["input_ids"], int(body.get("logprob_start_len", 0))
        positions = [(None, 0, ids[0], None), *self._positions(ids)]
        own = [[lp, ids[i], self._text(ids[i])] for i, (lp, _, _, _) in enumerate(positions)]
        top = [
            None if blp is None else [[blp, best, self._text(best)]]
            for _, _, best, blp in positions
        ]
        meta = {
            "input_token_logprobs": own[start:],
            "input_top_logprobs": top[start:],
            "prompt_tokens": len(ids),
            "completion_tokens": 0,
        }
        return web.json_response({"text": "", "meta_info": meta})

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.name}]})

    def start(self) -> LogprobServer:
        self.port = self.port or free_port()
        middlewares = [bearer_auth(lambda: self.api_key)]
        app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=middlewares)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/generate", self.generate)
        app.router.add_get("/v1/models", self.models)

        async def setup() -> None:
            self._runner = web.AppRunner(app)
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

        async def teardown() -> None:
            if self._runner is not None:
                await self._runner.cleanup()

        self._background.start(setup, teardown)
        return self

    def stop(self) -> None:
        self._background.stop()
        self.llm.close()

    def __enter__(self) -> LogprobServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
