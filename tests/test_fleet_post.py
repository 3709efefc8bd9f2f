"""Fleet.post: any verb goes through the same dispatch as a chat completion (retries on
another server, the circuit breaker, permanent errors at once), so `regen score` can send
/v1/completions with prompt_logprobs the way generate sends chats."""

from __future__ import annotations

import asyncio

import pytest

from regen.errors import PermanentError
from regen.fleet.dispatch import Fleet, RetryPolicy
from regen.fleet.server import Server

FAST = RetryPolicy(max_retries=3, base_delay=0.01, max_delay=0.05)
BODY = {"model": "fake-model", "prompt": "one two three", "prompt_logprobs": 1, "max_tokens": 1}


async def post_all(urls: list[str], bodies: list[dict], retry: RetryPolicy = FAST):
    servers = [Server(url, concurrency=4) for url in urls]
    fleet = Fleet(servers, retry, on_event=lambda text: None)
    try:
        return await asyncio.gather(*(fleet.post("/v1/completions", b) for b in bodies)), servers
    finally:
        for server in servers:
            await server.close()


def test_post_retries_a_server_fault_and_returns_the_answer(fake_server):
    server = fake_server(faults=["500", "ok"])
    (done,), _ = asyncio.run(post_all([server.url], [BODY]))
    assert done.attempts == 2
    choice = done.data["choices"][0]
    assert choice["text"] == "answer to: one two three"
    assert choice["prompt_logprobs"][0] is None and len(choice["prompt_logprobs"]) == 3
    assert [b["prompt"] for b in server.requests] == ["one two three"] * 2


def test_post_moves_to_a_healthy_server_when_one_keeps_failing(fake_server):
    broken = fake_server(faults=["500"])
    good = fake_server()
    results, (bad_server, _) = asyncio.run(post_all([broken.url, good.url], [BODY] * 12))
    assert all(r.data["choices"][0]["text"].startswith("answer to") for r in results)
    assert {r.server.url for r in results} == {good.url}
    assert not bad_server.available  # three 500s in a row opened its breaker
    assert bad_server.stats.failed >= 3


def test_post_raises_a_permanent_error_at_once(fake_server):
    server = fake_server(faults=["400"])
    with pytest.raises(PermanentError) as caught:
        asyncio.run(post_all([server.url], [BODY]))
    assert caught.value.attempts == 1 and caught.value.status == 400
    assert len(server.requests) == 1


def test_complete_is_a_post_to_chat_completions(fake_server):
    server = fake_server()

    async def one() -> dict:
        s = Server(server.url, concurrency=1)
        try:
            done = await Fleet([s], FAST).complete(
                {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}
            )
            return done.data
        finally:
            await s.close()

    data = asyncio.run(one())
    assert data["object"] == "chat.completion"
    assert data["choices"][0]["message"]["content"] == "answer to: hi"
