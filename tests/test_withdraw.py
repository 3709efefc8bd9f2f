"""A lowered level takes effect at once: the requests past it that have no first token yet
are withdrawn and sent again (fleet/waiting_streams.py), each answered once, none counted as
a failure; those already streaming are left to finish (WaitingStreams.started)."""

from __future__ import annotations

import asyncio

from fleet_helpers import FAST, chat, until
from regen.errors import Withdrawn
from regen.fleet.control.tuning import withdraw_excess
from regen.fleet.dispatch import Fleet
from regen.fleet.server import Server, Timeouts
from regen.fleet.waiting_streams import WaitingStreams


def test_the_youngest_waiting_streams_are_withdrawn_first_and_only_they():
    async def run() -> None:
        waiting = WaitingStreams()
        requests = [asyncio.get_running_loop().create_future() for _ in range(4)]
        for at, request in enumerate(requests):
            waiting.sent(request, float(at))
        waiting.started(requests[3])  # its first token came: it stays
        assert waiting.withdraw(2) == 2
        assert [r.cancelled() for r in requests] == [False, True, True, False]
        assert waiting.was_withdrawn(requests[2]) and not waiting.was_withdrawn(requests[2])
        assert not waiting.was_withdrawn(requests[0])
        assert waiting.withdraw(5) == 1 and len(waiting) == 0  # no more than are waiting

    asyncio.run(run())


def test_a_lowered_level_withdraws_its_waiting_streams_and_each_is_answered_once(fake_server):
    fake = fake_server(slots=2, base_latency=0.4)

    async def run():
        server = Server(fake.url, concurrency=6, timeouts=Timeouts(stream=True))
        fleet = Fleet([server], FAST, on_event=lambda text: None)
        try:
            sends = [asyncio.ensure_future(fleet.complete(chat(i))) for i in range(6)]
            await until(lambda: len(fake.requests) == 6)  # all six at the server, none answered
            assert len(server.waiting) == 6
            server.set_limit(2, "lowered")
            withdraw_excess(server)
            assert len(server.waiting) == 2  # the two oldest wait on
            await until(lambda: server.in_flight == 2)  # the four freed their slots
            return await asyncio.gather(*sends), server
        finally:
            await server.close()

    done, server = asyncio.run(run())
    answers = [d.data["choices"][0]["message"]["content"] for d in done]
    assert answers == [f"answer to: prompt {i}" for i in range(6)]
    assert [d.attempts for d in done] == [1] * 6  # a withdrawal is no attempt
    assert server.stats.failed == 0 and server.available  # nor a failure
    assert server.stats.withdrawn == 4  # counted where status and progress.json show it
    assert len(fake.requests) == 10  # the four withdrawn were sent again, once each
    withdrawn = [r["messages"][0]["content"] for r in fake.requests[6:]]
    assert sorted(withdrawn) == sorted(set(withdrawn))


def test_a_withdrawn_request_tells_its_sender_so_not_that_the_server_failed(fake_server):
    fake = fake_server(base_latency=5.0)

    async def run() -> None:
        server = Server(fake.url, concurrency=2, timeouts=Timeouts(stream=True))
        try:
            request = asyncio.ensure_future(server.chat(chat(0)))
            await until(lambda: len(server.waiting) == 1)
            assert server.waiting.withdraw(1) == 1
            try:
                await request
            except Withdrawn as err:
                assert err.server == server.name
            else:
                raise AssertionError("a withdrawn request answered")
        finally:
            await server.close()

    asyncio.run(run())
