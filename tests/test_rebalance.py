"""The end of a run: streams without a first token queued on one server move to a server
with room (fleet/control/rebalance.py), each answered once; queues alike stay put."""

from __future__ import annotations

import asyncio

from fleet_helpers import FAST, chat, until
from regen.fleet.control.rebalance import move_waiting, pick_order, to_move
from regen.fleet.dispatch import Fleet
from regen.fleet.server import Server, Timeouts


def servers_waiting(*counts: int, limit: int = 40, in_flight: int = 20) -> list[Server]:
    """Servers at `limit`, `in_flight` claimed, each with `count` streams without a first
    token (futures of a running loop)."""
    loop = asyncio.get_running_loop()
    servers = []
    for i, count in enumerate(counts):
        server = Server(f"http://127.0.0.1:{9000 + i}", concurrency=limit)
        for _ in range(in_flight):
            server.claim()
        for at in range(count):
            server.waiting.sent(loop.create_future(), float(at))
        servers.append(server)
    return servers


def test_a_deep_queue_gives_half_the_difference_to_a_server_with_room():
    async def run() -> None:
        idle, deep = servers_waiting(0, 18)
        assert to_move(idle, [idle, deep], now=0.0) == (deep, 9)
        assert move_waiting(idle, [idle, deep], now=0.0) == 9
        assert len(deep.waiting) == 9 and deep.stats.moved == 9
        # The youngest went: the oldest nine (sent first) still wait there.
        assert sorted(deep.waiting._since.values()) == [float(at) for at in range(9)]
        # Once the nine moved wait there, the two queues are alike: nothing more moves.
        for at in range(9):
            idle.waiting.sent(asyncio.get_running_loop().create_future(), float(at))
        assert to_move(idle, [idle, deep], now=0.0) is None

    asyncio.run(run())


def test_no_more_move_than_the_idle_server_has_room_for():
    async def run() -> None:
        idle, deep = servers_waiting(0, 30, in_flight=37)  # 3 free slots of 40
        assert to_move(idle, [idle, deep], now=0.0) == (deep, 3)

    asyncio.run(run())


def test_queues_alike_stay_where_they_are():
    async def run() -> None:
        # A prefill or two each; one queue a little deeper than another: nothing moves.
        for counts in [(0, 3), (30, 38), (2, 2)]:
            idle, other = servers_waiting(*counts)
            assert to_move(idle, [idle, other], now=0.0) is None, counts
        # The deepest queue is the idle server's own, or it has no room: nothing either.
        deep, shallow = servers_waiting(20, 0)
        assert to_move(deep, [deep, shallow], now=0.0) is None
        full, deep = servers_waiting(0, 30, in_flight=40)
        assert to_move(full, [full, deep], now=0.0) is None

    asyncio.run(run())


def test_at_the_end_a_request_goes_where_the_fewest_wait_for_a_first_token():
    async def run() -> None:
        queued, free = servers_waiting(12, 0)
        free.claim()  # more loaded, but nothing waits there
        order = pick_order(at_end=True)
        assert min([queued, free], key=order) is free
        assert min([queued, free], key=pick_order(at_end=False)) is queued  # least loaded

    asyncio.run(run())


def test_a_fast_server_takes_the_queue_a_slow_one_holds_and_each_is_answered_once(fake_server):
    """Two servers at 8 in flight; the slow one runs one request at a time and queues the
    rest. Once every item is sent, the fast one, done with its own, takes queued requests
    from the slow one (withdrawn there, sent again): without the move it would answer its 8
    and idle while the slow one works through its queue."""
    slow_fake = fake_server(slots=1, base_latency=0.3)
    fast_fake = fake_server(slots=8, base_latency=0.05)

    async def run():
        slow, fast = (
            Server(fake.url, concurrency=8, timeouts=Timeouts(stream=True))
            for fake in (slow_fake, fast_fake)
        )
        fleet = Fleet([slow, fast], FAST, on_event=lambda text: None)
        try:
            sends = [asyncio.ensure_future(fleet.complete(chat(i))) for i in range(16)]
            await until(lambda: slow.in_flight == 8 and fast.in_flight == 8)
            fleet.all_sent()
            return await asyncio.gather(*sends), slow, fast
        finally:
            for server in (slow, fast):
                await server.close()

    done, slow, fast = asyncio.run(run())
    answers = [d.data["choices"][0]["message"]["content"] for d in done]
    assert answers == [f"answer to: prompt {i}" for i in range(16)]  # each its own, once
    assert [d.attempts for d in done] == [1] * 16  # a move is no attempt
    assert slow.stats.moved >= 3, slow.stats  # the fast one took some of the slow one's queue
    by_fast = sum(d.server is fast for d in done)
    assert by_fast > 8, by_fast  # more than its own eight
    assert slow.stats.failed == fast.stats.failed == 0  # a move is not a failure
