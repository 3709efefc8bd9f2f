"""regen generate against fake servers: what is stored and what is sent. Resume, locking
and refusals are in test_generate_resume.py, setup errors in test_generate_config.py."""

from __future__ import annotations

import orjson
import pytest

from gen_helpers import assert_exactly_once, read_lines, run, write_prompts
from regen.errors import ConfigError
from regen.fleet.server import Timeouts
from regen.run.config import Sampling
from regen.testing.fake_answers import fake_logprob


def test_completions_pair_answers_with_prompts(tmp_path, fake_server):
    server = fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 30)
    result = run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    assert result.exit_code == 0
    completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert not errors
    for record in completions:
        assert list(record)[:2] == ["id", "sample"]
        user, answer = record["messages"]
        assert answer == {"role": "assistant", "content": f"answer to: {user['content']}"}
        assert record["finish_reason"] == "stop"
        assert record["usage"] == {"prompt_tokens": 10, "completion_tokens": 8}
        assert record["meta"]["model"] == "fake-model"
        assert record["meta"]["server"] == server.url
    manifest = orjson.loads((tmp_path / "out" / "manifest.json").read_bytes())
    assert manifest["input"]["lines"] == 30 and manifest["config"]["model"] == "fake-model"


def test_reasoning_field_is_captured(tmp_path, fake_server):
    server = fake_server(reasoning="split")
    write_prompts(tmp_path / "p.jsonl", 3)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    for record in read_lines(tmp_path / "out", "completions"):
        answer = record["messages"][-1]
        assert answer["reasoning_content"].startswith("thinking about: answer to")
        assert answer["content"].startswith("answer to:")


def test_inline_think_is_split_the_same_way(tmp_path, fake_server):
    server = fake_server(reasoning="inline")
    write_prompts(tmp_path / "p.jsonl", 3)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    for record in read_lines(tmp_path / "out", "completions"):
        answer = record["messages"][-1]
        assert "<think>" not in answer["content"]
        assert answer["content"].startswith("answer to:")
        assert answer["reasoning_content"].startswith("thinking about:")


def test_finish_reason_length_is_recorded(tmp_path, fake_server):
    server = fake_server(finish_reason="length")
    write_prompts(tmp_path / "p.jsonl", 2)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    assert {r["finish_reason"] for r in read_lines(tmp_path / "out", "completions")} == {"length"}


def test_malformed_lines_go_to_errors_and_the_run_goes_on(tmp_path, fake_server):
    server = fake_server()
    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts, 5)
    with open(prompts, "ab") as fh:
        fh.write(b"{broken\n")
        fh.write(orjson.dumps({"messages": [{"role": "system", "content": "no user"}]}) + b"\n")
        fh.write(orjson.dumps({"id": "p00001", "messages": [{"role": "user", "content": "again"}]}))
        fh.write(b"\n")
    result = run(prompts, tmp_path / "out", [server.url])
    assert result.exit_code == 0 and result.stats.completed == 5
    bad = {e["line"]: e["error"]["type"] for e in read_lines(tmp_path / "out", "errors")}
    assert bad == {6: "invalid_json", 7: "no_user_turn", 8: "duplicate_id"}
    # A rerun does not record the bad lines a second time.
    again = run(prompts, tmp_path / "out", [server.url])
    assert again.already_done
    assert len(read_lines(tmp_path / "out", "errors")) == 3


def test_request_carries_sampling_thinking_tools_and_seed_per_sample(tmp_path, fake_server):
    server = fake_server()
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]
    ids = write_prompts(tmp_path / "p.jsonl", 2, extra={"tools": tools})
    sampling = Sampling(max_tokens=100, temperature=0.6, top_p=0.9, top_k=20, seed=7, thinking="on")
    run(
        tmp_path / "p.jsonl",
        tmp_path / "out",
        [server.url],
        sampling=sampling,
        samples_per_prompt=3,
    )
    assert_exactly_once(tmp_path / "out", ids, samples=3)
    seeds = sorted(body["seed"] for body in server.requests)
    assert seeds == [7, 7, 8, 8, 9, 9]
    body = server.requests[0]
    assert body["chat_template_kwargs"] == {"enable_thinking": True}
    assert (body["temperature"], body["top_p"], body["top_k"], body["max_tokens"]) == (
        0.6,
        0.9,
        20,
        100,
    )
    assert body["tools"] == tools and body["model"] == "fake-model"
    record = read_lines(tmp_path / "out", "completions")[0]
    assert record["tools"] == tools and record["meta"]["sampling"]["thinking"] == "on"


def test_regenerate_all_turns_uses_regenerated_history(tmp_path, fake_server):
    server = fake_server(reasoning="split")
    conversation = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "OLD one"},
        {"role": "user", "content": "second"},
        {"role": "assistant", "content": "OLD two"},
    ]
    (tmp_path / "p.jsonl").write_bytes(orjson.dumps({"id": "c", "messages": conversation}) + b"\n")
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], regenerate_turns="all")
    (record,) = read_lines(tmp_path / "out", "completions")
    contents = [m["content"] for m in record["messages"]]
    assert contents == ["first", "answer to: first", "second", "answer to: second"]
    second_request = server.requests[1]["messages"]
    # no reasoning: the plain fake names no engine, and a server regen cannot name gets none
    assert second_request[1] == {"role": "assistant", "content": "answer to: first"}
    assert len(record["meta"]["turns"]) == 2


def test_per_record_sampling_overrides_are_used_and_recorded(tmp_path, fake_server):
    server = fake_server()
    (tmp_path / "p.jsonl").write_bytes(
        orjson.dumps(
            {
                "id": "a",
                "messages": [{"role": "user", "content": "x"}],
                "sampling": {"thinking": "off", "max_tokens": 5},
            }
        )
        + b"\n"
        + orjson.dumps({"id": "b", "messages": [{"role": "user", "content": "y"}]})
        + b"\n"
    )
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], sampling=Sampling(thinking="on"))
    by_id = {r["id"]: r for r in read_lines(tmp_path / "out", "completions")}
    assert by_id["a"]["meta"]["sampling"]["thinking"] == "off"
    assert by_id["a"]["meta"]["sampling"]["max_tokens"] == 5
    assert by_id["b"]["meta"]["sampling"]["thinking"] == "on"
    bodies = {b["messages"][0]["content"]: b for b in server.requests}
    assert bodies["x"]["chat_template_kwargs"] == {"enable_thinking": False}


def test_token_ids_are_stored_when_the_server_returns_them(tmp_path, fake_server):
    able = fake_server(return_token_ids=True)
    write_prompts(tmp_path / "p.jsonl", 2)
    run(tmp_path / "p.jsonl", tmp_path / "out", [able.url], return_token_ids=True)
    record = read_lines(tmp_path / "out", "completions")[0]
    assert record["token_ids"]["completion"] == list(range(100, 108))
    unable = fake_server()
    with pytest.raises(ConfigError, match="do not return token ids"):
        run(tmp_path / "p.jsonl", tmp_path / "out2", [unable.url], return_token_ids=True)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_logprobs_are_asked_and_kept_one_per_answer_token(tmp_path, fake_server, stream, caplog):
    server = fake_server(dialect="vllm")
    write_prompts(tmp_path / "p.jsonl", 2)
    result = run(
        tmp_path / "p.jsonl",
        tmp_path / "out",
        [server.url],
        logprobs=True,
        timeouts=Timeouts(request=10, connect=2, stream=stream),
    )
    assert result.exit_code == 0, result.message
    # without the engine's token ids, score may not line the logprobs up: said at the start
    said = [r.getMessage() for r in caplog.records if "--return-token-ids" in r.getMessage()]
    assert said and "logprobs_mismatch" in said[0], said
    assert all(b["logprobs"] is True and b["top_logprobs"] == 0 for b in server.requests)
    for record in read_lines(tmp_path / "out", "completions"):
        n = record["usage"]["completion_tokens"]
        assert record["logprobs"] == [fake_logprob(i) for i in range(n)]
    run(tmp_path / "p.jsonl", tmp_path / "plain", [server.url])  # not asked: not kept
    assert "logprobs" not in read_lines(tmp_path / "plain", "completions")[0]
