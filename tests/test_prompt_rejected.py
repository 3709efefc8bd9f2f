"""A prompt the engine cannot take is one prompt's error, never a server benched.

llama-cpp-python's server (the embedded engine, real here: SmolLM2 on a free port, started
once for the module) answers HTTP 500 both when it crashes and when its request schema
refuses a message, a `developer` turn among them. regen sends `developer` as `system` to it
(and says so in the record), and tells a refused request from a fault by type: pydantic's
report on the request body makes it a PromptRejected, not retried and not counted against
the server. A 500 in any words that comes three times while the server answers other prompts
and fails nothing else is the prompt's too (the fake server's `crash_on`)."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from gen_helpers import read_lines, run, write_prompts
from regen.embedded_model import EMBEDDED_MODEL_NAME, default_model_path
from regen.errors import PromptRejected
from regen.fleet.dispatch import Fleet
from regen.fleet.embedded import SERVER_LOGS, EmbeddedFleet, embedded_spec
from regen.fleet.engine import EngineInfo
from regen.fleet.policy import RetryPolicy
from regen.fleet.server import Server, Timeouts
from regen.run.sampling import Sampling
from regen.testing.fake_behaviour import Behaviour

pytestmark = pytest.mark.model
DEVELOPER = [
    {"role": "developer", "content": "Answer in one word."},
    {"role": "user", "content": "Name a colour."},
]


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """The embedded llama.cpp server, as generate starts it (its FLEET.json names the
    engine: llamacpp)."""
    run_dir = tmp_path_factory.mktemp("embedded")
    with EmbeddedFleet(embedded_spec(default_model_path(), run_dir)) as fleet:
        yield fleet.urls[0], run_dir / SERVER_LOGS / "FLEET.json"


async def _send(url: str, bodies: list[dict]) -> tuple[list, Server]:
    server = Server(url, 4, None, Timeouts(request=120, connect=5))
    server.engine = EngineInfo("llamacpp")
    fleet = Fleet([server], RetryPolicy(max_retries=3, base_delay=0.05, max_delay=0.2))
    try:
        done = await asyncio.gather(*(fleet.complete(b) for b in bodies), return_exceptions=True)
    finally:
        await server.close()
    return done, server


def test_a_request_llama_cpp_cannot_read_is_the_prompts_error_at_once(llama):
    """Four at once: each one PromptRejected on its first attempt, none a strike against
    the server (three 500s in a row took it out of rotation before), and the server goes on
    answering."""
    url, _ = llama
    unread = {"role": "tool", "content": "18C"}  # llama-cpp-python wants its tool_call_id
    bad = {"model": EMBEDDED_MODEL_NAME, "messages": [unread], "max_tokens": 4}
    good = {"model": EMBEDDED_MODEL_NAME, "messages": DEVELOPER[1:], "max_tokens": 4}
    done, server = asyncio.run(_send(url, [bad] * 4 + [good]))
    *rejected, answered = done
    assert all(isinstance(e, PromptRejected) and e.attempts == 1 for e in rejected), rejected
    assert "HTTP 500" in rejected[0].message and "validation error" in rejected[0].message
    assert answered.data["choices"][0]["message"]["content"] is not None
    assert server.available and server.breaker.consecutive_failures == 0


def test_a_developer_turn_is_sent_as_system_and_the_record_says_so(llama, tmp_path):
    _, fleet_file = llama
    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts, 2)
    with open(prompts, "ab") as fh:
        for i in range(3):
            fh.write(orjson.dumps({"id": f"d{i}", "messages": DEVELOPER}) + b"\n")
    result = run(
        prompts,
        tmp_path / "out",
        [],
        fleet=fleet_file,
        timeouts=Timeouts(request=120, connect=5),
        sampling=Sampling(max_tokens=8, temperature=0.0),
    )
    assert result.exit_code == 0, result.message
    assert not read_lines(tmp_path / "out", "errors")
    records = {r["id"]: r for r in read_lines(tmp_path / "out", "completions")}
    assert len(records) == 5
    for i in range(3):
        record = records[f"d{i}"]
        assert record["messages"][0] == DEVELOPER[0]  # kept as the dataset had it
        assert record["meta"]["roles_sent"] == {"developer": "system"}
        assert record["messages"][-1]["role"] == "assistant"
    assert "roles_sent" not in records["p00000"]["meta"]


def test_a_500_that_follows_one_prompt_is_that_prompts_error(tmp_path, fake_server):
    """The same 500, in a crash's words, three times, while the server answers the others
    (each in about 25 ms) and fails nothing else; a flaky server's random 500s stay faults
    (tests/test_resilience.py)."""
    server = fake_server(Behaviour(crash_on="BROKEN", seconds_per_token=0.003))
    prompts = tmp_path / "p.jsonl"
    broken = {"id": "broken", "messages": [{"role": "user", "content": "BROKEN template"}]}
    prompts.write_bytes(orjson.dumps(broken) + b"\n")
    with open(prompts, "ab") as fh:
        for i in range(30):
            row = {"id": f"ok{i}", "messages": [{"role": "user", "content": f"q{i}"}]}
            fh.write(orjson.dumps(row) + b"\n")
    retry = RetryPolicy(max_retries=5, base_delay=0.05, max_delay=0.2)  # 6 attempts at most
    result = run(prompts, tmp_path / "out", [server.url], concurrency=2, retry=retry)
    assert result.exit_code == 0, result.message
    (error,) = read_lines(tmp_path / "out", "errors")
    assert error["id"] == "broken" and error["error"]["type"] == "PromptRejected"
    # the third same answer blames the prompt, when the server answered others in between
    # each (on a loaded machine it may take a fourth); a fault would use all 6 attempts
    assert f"the same answer {error['attempts']} times" in error["error"]["message"]
    assert 3 <= error["attempts"] <= 5
    assert len(read_lines(tmp_path / "out", "completions")) == 30
