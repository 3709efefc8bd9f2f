"""End-game dispatch against real HTTP fake servers: a fast and a slow one. A copy of a slow
request races on the fast server once every item is sent; whichever answers first is the one
line written, the other is cancelled and never written, and kill -9 mid-race stays exactly
once. Which server saw a prompt (and when) is told by the servers themselves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import orjson

from gen_helpers import assert_exactly_once, run, write_prompts
from regen.cli.status import render
from regen.fleet.control.endgame import EndGame
from regen.fleet.server import Server
from regen.fleet.timeouts import Timeouts
from regen.run.status import read_status
from regen.testing.fake_server import Behaviour, echo_answer

SLOTS = 4


class Sightings:
    """Every (server, prompt) a fake server took, in order, with when it took it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[str, str, float]] = []
        self.copy_arrived = threading.Event()

    def answer(self, name: str, tokens_for_copy: int | None = None):
        def answer(body: dict) -> dict:
            echoed = echo_answer(body)
            prompt = echoed["content"]
            with self.lock:
                copy = any(p == prompt for _, p, _ in self.seen)
                # (the fake server's clock for arrivals, FakeEngine.requested_at)
                self.seen.append((name, prompt, time.time()))
            if copy:
                self.copy_arrived.set()
            # 6-10 tokens by a hash of the prompt, so the slow server's requests drift apart
            tokens = (
                tokens_for_copy if copy and tokens_for_copy else 6 + zlib.crc32(prompt.encode()) % 5
            )
            return {"content": f"{name}: {prompt}", "tokens": tokens}

        return answer

    def copies(self) -> list[tuple[str, str, float]]:
        firsts: set[str] = set()
        out = []
        for name, prompt, at in self.seen:
            if prompt in firsts:
                out.append((name, prompt, at))
            firsts.add(prompt)
        return out


def fast_and_slow(fake_server, seen: Sightings, slow_per_token: float, copy_tokens=None):
    fast = fake_server(
        Behaviour(slots=SLOTS, seconds_per_token=0.005, answer=seen.answer("fast", copy_tokens))
    )
    slow = fake_server(
        Behaviour(slots=SLOTS, seconds_per_token=slow_per_token, answer=seen.answer("slow"))
    )
    return fast, slow


def progress(out: Path) -> dict:
    return orjson.loads((out / "progress.json").read_bytes())


def test_a_copy_that_comes_first_is_the_one_line_written(tmp_path, fake_server):
    seen = Sightings()
    fast, slow = fast_and_slow(fake_server, seen, slow_per_token=0.1)
    ids = write_prompts(tmp_path / "p.jsonl", 400)
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [fast.url, slow.url])
    assert result.exit_code == 0, result.message
    completions, _ = assert_exactly_once(tmp_path / "out", ids)
    end_game = progress(tmp_path / "out")["end_game"]
    copies = seen.copies()
    assert copies and all(name == "fast" for name, _, _ in copies)
    assert end_game["copies_started"] == len(copies) <= 4  # 1% of 400 answers
    assert end_game["copies_won"] >= 1
    by_prompt = {r["messages"][-1]["content"].split(": ", 1)[1]: r for r in completions}
    won = [p for _, p, _ in copies if by_prompt[p]["meta"]["server"] == fast.url]
    assert len(won) == end_game["copies_won"]
    for prompt in won:  # the slow original was cancelled: its answer is nowhere
        assert by_prompt[prompt]["messages"][-1]["content"] == f"fast: {prompt}"
    assert "end of batch: drain" in result.message
    shown = "\n".join(render(read_status(tmp_path / "out")))
    assert f"{end_game['copies_started']} copies of slow requests" in shown


def test_the_drain_starts_when_the_last_request_has_a_server_slot(tmp_path, fake_server):
    """Live concurrency lets the cap (256) be in flight in the run while the server's level
    takes far fewer at once: the drain is the batch's tail, not the whole run (it was: a
    47-s run ended with a 46-s drain)."""
    server = fake_server(Behaviour(slots=4, seconds_per_token=0.01))
    ids = write_prompts(tmp_path / "p.jsonl", 120)
    started = time.monotonic()
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], concurrency=256)
    wall = time.monotonic() - started
    assert result.exit_code == 0, result.message
    assert_exactly_once(tmp_path / "out", ids)
    drain = progress(tmp_path / "out")["end_game"]["drain"]
    assert drain["finished"] and 0 < drain["seconds"] < 0.5 * wall, (drain, wall)


def test_a_copy_that_loses_is_never_written(tmp_path, fake_server):
    seen = Sightings()
    # A copy on the fast server is made to run 400 tokens (2 s): the original comes first.
    fast, slow = fast_and_slow(fake_server, seen, slow_per_token=0.1, copy_tokens=400)
    ids = write_prompts(tmp_path / "p.jsonl", 400)
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [fast.url, slow.url])
    assert result.exit_code == 0, result.message
    completions, _ = assert_exactly_once(tmp_path / "out", ids)
    end_game = progress(tmp_path / "out")["end_game"]
    copied = {p for _, p, _ in seen.copies()}
    assert copied and end_game["copies_started"] == len(copied)
    assert end_game["copies_won"] == 0 and end_game["copy_tokens_wasted"] > 0
    for record in completions:
        content = record["messages"][-1]["content"]
        if content.split(": ", 1)[1] in copied:
            assert content.startswith("slow: ") and record["meta"]["server"] == slow.url


def test_copies_start_only_once_every_item_is_sent(tmp_path, fake_server):
    """Each prompt's first request reached a server before any copy began. Sent is read at
    the servers' door (`requested_at`), not when a server took the request up: a request
    waits at the door for one of the slow server's 4 slots, and a CI once saw copies taken
    up at the fast server while an original still waited there (sent, not yet taken)."""
    seen = Sightings()
    fast, slow = fast_and_slow(fake_server, seen, slow_per_token=0.1)
    write_prompts(tmp_path / "p.jsonl", 400)
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [fast.url, slow.url])
    assert result.exit_code == 0, result.message
    copies = seen.copies()
    first_sent: dict[str, float] = {}
    for server in (fast, slow):
        for body, at in zip(server.requests, server.requested_at, strict=True):
            prompt = echo_answer(body)["content"]  # (as Sightings names it)
            first_sent[prompt] = min(at, first_sent.get(prompt, at))
    assert len(first_sent) == 400
    last_original = max(first_sent.values())
    assert copies and all(at >= last_original for _, _, at in copies)


def test_duplicate_requests_stay_under_one_percent(tmp_path, fake_server):
    seen = Sightings()
    fast, slow = fast_and_slow(fake_server, seen, slow_per_token=0.03)
    other = fake_server(Behaviour(slots=SLOTS, seconds_per_token=0.005, answer=seen.answer("f2")))
    n = 800
    ids = write_prompts(tmp_path / "p.jsonl", n)
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [fast.url, other.url, slow.url])
    assert result.exit_code == 0, result.message
    assert_exactly_once(tmp_path / "out", ids)
    sent = len(fast.requests) + len(other.requests) + len(slow.requests)
    assert 0 < sent - n <= n // 100


def test_kill9_while_a_copy_races_then_resume_is_exactly_once(tmp_path, fake_server):
    seen = Sightings()
    fast, slow = fast_and_slow(fake_server, seen, slow_per_token=0.25)  # 2 s a request
    ids = write_prompts(tmp_path / "p.jsonl", 600)  # the slow server answers 8 before the end
    out = tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "regen",
        "generate",
        "--prompts",
        str(tmp_path / "p.jsonl"),
        "--output-dir",
        str(out),
        "--servers",
        fast.url,
        slow.url,
        "--concurrency",
        str(SLOTS),
        "--display",
        "none",
    ]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert seen.copy_arrived.wait(timeout=60), "no copy was ever started"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    slow.behaviour.seconds_per_token = 0.005  # slow for a copy to race at the kill; no more
    final = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert final.returncode == 0, final.stderr
    assert_exactly_once(out, ids)


def rated(url: str, tokens_per_s: float) -> Server:
    server = Server(url, concurrency=16)
    server.stats.completed, server.stats.latency_sum = 100, 100.0
    server.stats.completion_tokens = round(100 * tokens_per_s)
    server.stats.latency_ewma = 50 / tokens_per_s
    return server


def test_the_last_items_skip_a_slower_servers_free_slot_only_near_the_end():
    fast = [rated(f"http://127.0.0.1:{9000 + i}", 100.0) for i in range(7)]
    slow = rated("http://127.0.0.1:9100", 50.0)
    end = EndGame([*fast, slow], release=lambda s: None, copy_failed=lambda s, e: None)
    end.near_end(5000)  # far from the end: every free slot is used
    assert not end.placing and not end.declines(slow)
    # 7 x 16 slots at 100 tok/s get through an item per (1/50 - 1/100) s x 11,200 tok/s
    # = 112 unsent items sooner than the slow server answers one: below that, it waits.
    end.near_end(200)
    assert end.placing and not end.declines(slow) and not end.declines(fast[0])
    end.near_end(100)
    assert end.declines(slow) and not end.declines(fast[0])
    end.begin()  # all sent: a retry may go anywhere
    assert not end.declines(slow)


def test_requests_are_flights_from_a_stall_timeout_before_the_end():
    """A stream that stalls a stall timeout before the end is still silent then: it must be
    a flight for a copy to race it. Without streams, flights start two request times out."""
    streamed = Timeouts(stall=60.0, stream=True)
    servers = [rated(f"http://127.0.0.1:{9000 + i}", 100.0) for i in range(2)]
    for server in servers:
        server.timeouts = streamed
    end = EndGame(servers, release=lambda s: None, copy_failed=lambda s, e: None)
    # 2 x 16 slots, each answering every 0.5 s: 64 a second; 2 request times are 1 s, so
    # placement starts at 32 + 64 = 96 items left, and flights at 96 + 60 s x 64 = 3,936.
    end.near_end(4000)
    assert not end.armed
    end.near_end(3900)
    assert end.armed and not end.placing
    end.near_end(90)
    assert end.armed and end.placing
    plain = [rated(f"http://127.0.0.1:{9000 + i}", 100.0) for i in range(2)]
    end = EndGame(plain, release=lambda s: None, copy_failed=lambda s, e: None)
    end.near_end(100)
    assert not end.armed
    end.near_end(90)
    assert end.armed and end.placing
