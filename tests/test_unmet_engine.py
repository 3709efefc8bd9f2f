"""Live concurrency on an engine that counts no tokens of its own (no /metrics): its answers
are streamed, and the tokens arriving measure each level long before the answers are back."""

from __future__ import annotations

from gen_helpers import assert_exactly_once, run, write_prompts
from regen.fleet.control import concurrency
from regen.testing.fake_engine import EngineCurve
from regen.testing.fake_server import Behaviour, echo_answer

# No /metrics; a batch that is nearly free up to far past the start (a GPU below its knee).
UNMET = EngineCurve(step_s=0.02, per_seq_s=0.0001, kv_tokens=10**6, time_scale=1.0, metrics=False)
TOKENS = 200  # about 4-7 s an answer on this clock, under the tests' 10-s request timeout


def answer_of(tokens: int):
    def answer(body):
        # A piece of text an event (7 characters): about one event a token, as engines stream.
        return {**echo_answer(body), "tokens": tokens, "content": "x" * 7 * tokens}

    return answer


def unmet_run(tmp_path, fake_server, count: int, tokens: int = TOKENS, **overrides):
    ids_asked = overrides.get("return_token_ids", False)
    behaviour = Behaviour(engine=UNMET, answer=answer_of(tokens), return_token_ids=ids_asked)
    server = fake_server(behaviour)
    tmp_path.mkdir(exist_ok=True)
    prompts, out = tmp_path / "prompts.jsonl", tmp_path / "out"
    ids = write_prompts(prompts, count)
    run(prompts, out, [server.url], **({"concurrency": None} | overrides))
    completions, _ = assert_exactly_once(out, ids)
    return server, completions


def test_without_an_engine_counter_the_climb_reads_the_streams(tmp_path, fake_server):
    """Measured by answers alone, no level could change before the first answers are back
    (a request's time at 16 in flight); by the streams, it has doubled at least twice."""
    # 128 prompts: twice the 64 asked, and all of them sent before the first answer when the
    # climb works (as with 240, which only drained longer); 16 when it reads the answers alone
    server, completions = unmet_run(tmp_path, fake_server, 128)
    first_answer = min(server.served_at)
    sent_before = sum(1 for at in server.requested_at if at < first_answer)
    assert sent_before >= 4 * concurrency.START, sent_before
    assert all(body.get("stream") for body in server.requests)  # streamed, though not asked
    assert all(r["messages"][-1]["content"] == "x" * 7 * TOKENS for r in completions)


def test_fixed_concurrency_or_token_ids_are_not_streamed_unasked(tmp_path, fake_server):
    """Streaming is only live concurrency's means of measuring: a fixed level needs none,
    and token ids are not streamed by every engine (SGLang refuses them in a stream)."""
    short = 20  # what is asked is all this test reads: the answers need not be long
    server, _ = unmet_run(tmp_path, fake_server, 8, short, concurrency=4, fixed_concurrency=True)
    assert not any(body.get("stream") for body in server.requests)
    server, _ = unmet_run(tmp_path / "ids", fake_server, 8, short, return_token_ids=True)
    chats = [body for body in server.requests if body.get("max_tokens") != 1]  # not preflight
    assert chats and not any(body.get("stream") for body in chats)
