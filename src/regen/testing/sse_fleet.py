"""A fleet of cheap vLLM-shaped streaming servers in one process, for client-cost benchmarks.

    python -m regen.testing.sse_fleet --ports 8001 8002 --slots 1024 --seconds-per-token 0.25

Each port is one engine: up to `slots` answers decode at once (the rest wait their turn), each
gaining `tokens_per_event` tokens every `seconds_per_token` x `tokens_per_event` seconds
(0: as fast as this process can send). Every answer streams as vLLM streams it with
`return_token_ids`: the prompt's ids in the first chunk, then reasoning, then content, each
chunk with its own ids, the finish reason, usage, `[DONE]`. The events are encoded (and framed
for HTTP chunked transfer) once at start, so a token costs this process one write, not a JSON
encoding: its CPU is not the client's, and it leaves the client most of the machine.

A client that reads slower than the engine decodes holds its answer back (the engine skips
that answer's steps while the socket's buffer is full), so the tokens sent, counted at
`GET /stats`, are the tokens the client took. Answer lengths: `--tokens`, or log-normal with
that median and `--sigma` (capped at `--max-tokens`), decided by a hash of the request body.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import zlib
from collections import deque
from statistics import NormalDist

import orjson

from regen.testing.sse_http import HttpConnection, Reply

MODEL = "fake-model"
IDLE_STEP_S = 0.005  # how often an engine with nothing ready to send looks again
POOL = 251  # distinct token events, cycled (a prime: no pattern with the answer's length)
WORDS = [" the", " of", " and", " to", " a", " in", " is", " that", " for", " it", " é", " 🙂"]


def _framed(payload: bytes) -> bytes:
    """One HTTP/1.1 chunk (Transfer-Encoding: chunked) holding one SSE event."""
    event = b"data: " + payload + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(event), event)


class Events:
    """The pre-encoded, pre-framed events of every answer this fleet sends."""

    def __init__(self, tokens_per_event: int) -> None:
        self.per_event = tokens_per_event
        self.reasoning = [self._token_event("reasoning", i) for i in range(POOL)]
        self.content = [self._token_event("content", i) for i in range(POOL)]

    def _token_event(self, field: str, n: int) -> bytes:
        ids = [1000 + (n * self.per_event + k) % 50_000 for k in range(self.per_event)]
        text = "".join(WORDS[i % len(WORDS)] for i in ids)
        return _framed(self._chunk({field: text}, None, ids))

    @staticmethod
    def _chunk(delta: dict, finish: str | None, ids: list[int], **extra: object) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        chunk = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": MODEL,
            "choices": [{**choice, "token_ids": ids}],
            **extra,
        }
        return orjson.dumps(chunk)

    def first(self, prompt: int) -> bytes:
        delta = {"role": "assistant", "content": ""}
        return _framed(self._chunk(delta, None, [], prompt_token_ids=list(range(prompt))))

    def last(self, prompt: int, tokens: int) -> bytes:
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": tokens,
            "total_tokens": prompt + tokens,
        }
        end = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": MODEL,
            "choices": [],
            "usage": usage,
        }
        finish = _framed(self._chunk({}, "stop", []))
        return finish + _framed(orjson.dumps(end)) + _framed(b"[DONE]")

    def token(self, n: int, reasoning: bool) -> bytes:
        return (self.reasoning if reasoning else self.content)[n % POOL]

    def answer_start(self, serial: int) -> bytes:
        """The first content event names its answer: answers differ, as real ones do (the
        client's repeated-answer alarm reads their heads)."""
        ids = [7] * self.per_event
        return _framed(self._chunk({"content": f"Answer {serial}."}, None, ids))


class Answer:
    """One answer being decoded: where it is, and the connection it goes out on."""

    __slots__ = ("conn", "events", "held", "prompt", "ready_at", "sent", "serial", "steps")

    def __init__(
        self,
        conn: HttpConnection,
        events: Events,
        tokens: int,
        prompt: int,
        ready_at: float,
        serial: int,
    ) -> None:
        self.conn, self.events, self.prompt = conn, events, prompt
        self.ready_at = ready_at  # its first token (the prompt's prefill before it)
        self.held = False
        self.serial = serial
        self.steps = max(1, math.ceil(tokens / events.per_event))  # events to send
        self.sent = 0
        conn.send_head()
        conn.write(events.first(prompt))

    def step(self, events_per_write: int) -> int:
        """Send the next events (one write); the tokens they carry. Reasoning, then content."""
        ev, start = self.events, self.sent
        stop = min(self.steps, start + events_per_write)
        thinking = self.steps * 3 // 4
        self.conn.write(
            b"".join(
                ev.answer_start(self.serial) if n == thinking else ev.token(n, n < thinking)
                for n in range(start, stop)
            )
        )
        self.sent = stop
        if stop == self.steps:
            self.conn.write(ev.last(self.prompt, self.steps * ev.per_event))
            self.conn.finish()
        return (stop - start) * ev.per_event

    @property
    def done(self) -> bool:
        return self.sent >= self.steps


class Engine:
    """One port's scheduler: `slots` answers decoding in steps, the rest waiting."""

    def __init__(self, events: Events, args: argparse.Namespace) -> None:
        self.events, self.args = events, args
        self.waiting: deque[Answer] = deque()
        self.running: list[Answer] = []
        self.stats = {
            "requests": 0,
            "served": 0,
            "tokens_sent": 0,
            "tokens_done": 0,
            "late_steps": 0,
            "steps": 0,
            "held": 0,
        }
        self._wake = asyncio.Event()

    def answer_length(self, body: bytes) -> int:
        args = self.args
        if not args.sigma:
            return args.tokens
        unit = min(max(zlib.crc32(body) / 0xFFFFFFFF, 1e-9), 1 - 1e-9)
        z = NormalDist().inv_cdf(unit)
        return max(1, min(args.max_tokens, round(args.tokens * math.exp(args.sigma * z))))

    def reply(self, conn: HttpConnection, method: str, path: str, body: bytes) -> Reply | None:
        if method == "GET" and path == "/v1/models":
            return Reply(200, {"object": "list", "data": [{"id": MODEL}]})
        if method == "GET" and path.startswith("/stats"):
            return Reply(
                200, {**self.stats, "running": len(self.running), "waiting": len(self.waiting)}
            )
        if method != "POST" or path != "/v1/chat/completions":
            return Reply(404, {"error": {"message": f"no route {method} {path}"}})
        request = orjson.loads(body)
        self.stats["requests"] += 1
        tokens = min(self.answer_length(body), int(request.get("max_tokens") or 10**9))
        if not request.get("stream"):  # a probe (regen's preflight): answered at once
            return Reply(200, _whole_answer(tokens))
        prefill = self.args.first_token_s if tokens > 1 else 0.0  # a client's probe: at once
        ready_at = asyncio.get_running_loop().time() + prefill
        serial = self.stats["requests"]
        self.waiting.append(
            Answer(conn, self.events, tokens=tokens, prompt=16, ready_at=ready_at, serial=serial)
        )
        self._wake.set()
        return None

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        interval = self.args.seconds_per_token * self.events.per_event
        writes = self.args.events_per_write
        due = loop.time()  # steps keep to a clock, so a late one does not slow the rate
        while True:
            started = loop.time()
            while self.waiting and len(self.running) < self.args.slots:
                self.running.append(self.waiting.popleft())
            sent = self._step(started, writes)
            self.stats["tokens_sent"] += sent
            self.stats["steps"] += 1
            if any(a.done or a.conn.closed for a in self.running):
                finished = [a for a in self.running if a.done]
                self.stats["served"] += len(finished)
                self.stats["tokens_done"] += sum(a.steps * a.events.per_event for a in finished)
                self.running = [a for a in self.running if not (a.done or a.conn.closed)]
            if not self.running and not self.waiting:
                self._wake.clear()
                await self._wake.wait()
                due = loop.time()
                continue
            due += interval if sent else max(interval, IDLE_STEP_S)  # none ready: no spinning
            if interval and loop.time() > due + interval:  # over a step behind: too busy
                self.stats["late_steps"] += 1
                due = loop.time()
            await asyncio.sleep(max(0.0, due - loop.time()))

    def _step(self, now: float, writes: int) -> int:
        """One engine step: each running answer that is ready and read gets its next events.
        With --hold-at, an answer pauses there for --hold-s (a benchmark's quiet moment)."""
        sent, hold = 0, self.args.hold_at
        for answer in self.running:
            if answer.conn.paused or now < answer.ready_at:
                continue
            sent += answer.step(writes)
            if hold and not answer.held and answer.sent * self.events.per_event >= hold:
                answer.held, answer.ready_at = True, now + self.args.hold_s
                self.stats["held"] += 1
        return sent


def _whole_answer(tokens: int) -> dict:
    message = {"role": "assistant", "content": "ok " * tokens}
    choice = {
        "index": 0,
        "message": message,
        "finish_reason": "stop",
        "token_ids": list(range(1000, 1000 + tokens)),
    }
    usage = {"prompt_tokens": 16, "completion_tokens": tokens, "total_tokens": 16 + tokens}
    return {"choices": [choice], "usage": usage, "prompt_token_ids": list(range(16))}


async def serve(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    events = Events(args.tokens_per_event)
    engines = []
    for port in args.ports:
        engine = Engine(events, args)
        engines.append(asyncio.ensure_future(engine.run()))
        await loop.create_server(
            lambda e=engine: HttpConnection(e.reply), "127.0.0.1", port, backlog=4096
        )
    print(f"sse fleet on {len(args.ports)} ports", flush=True)
    await asyncio.gather(*engines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ports", type=int, nargs="+", required=True)
    parser.add_argument("--slots", type=int, default=1024, help="answers decoding at once")
    parser.add_argument("--seconds-per-token", type=float, default=0.0)
    parser.add_argument("--tokens", type=int, default=2048, help="answer length (median)")
    parser.add_argument("--sigma", type=float, default=0.0, help="log-normal spread (0: fixed)")
    parser.add_argument("--max-tokens", type=int, default=32_768)
    parser.add_argument("--tokens-per-event", type=int, default=1)
    parser.add_argument("--events-per-write", type=int, default=1)
    parser.add_argument("--first-token-s", type=float, default=0.0, help="prefill, per answer")
    parser.add_argument("--hold-at", type=int, default=0, help="pause answers at this token")
    parser.add_argument("--hold-s", type=float, default=0.0, help="for this long")
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
