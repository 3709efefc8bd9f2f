"""regen generate against fake servers: what is stored, resume, locking, refusals."""

from __future__ import annotations

import os

import orjson
import pytest

from gen_helpers import assert_exactly_once, fill_disk_after, read_lines, run, write_prompts
from regen.errors import ConfigError, FleetUnavailable, OutputError, RunStateError
from regen.fleet.server import Timeouts
from regen.run.config import Sampling
from regen.run.generate import generate
from regen.storage.lock import RunLock
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


def test_rerun_after_success_does_no_work(tmp_path, fake_server):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 10)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    before = len(server.requests)
    again = run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    assert again.already_done and "nothing to do" in again.message
    assert len(server.requests) == before


def test_retry_errors_retries_only_what_failed(tmp_path, fake_server):
    failing = fake_server(faults=["400"])
    ids = write_prompts(tmp_path / "p.jsonl", 4)
    run(tmp_path / "p.jsonl", tmp_path / "out", [failing.url])
    _, errors = assert_exactly_once(tmp_path / "out", ids)
    assert len(errors) == 4 and errors[0]["error"]["status"] == 400
    assert "prompt is too long" in errors[0]["error"]["message"]
    healthy = fake_server()
    # Without --retry-errors nothing is redone; with it, the errors become completions.
    assert run(tmp_path / "p.jsonl", tmp_path / "out", [healthy.url]).already_done
    run(tmp_path / "p.jsonl", tmp_path / "out", [healthy.url], retry_errors=True)
    completions, errors = assert_exactly_once(tmp_path / "out", ids)
    assert len(completions) == 4 and not errors
    assert list((tmp_path / "out" / "errors-retried").glob("*.jsonl"))
    assert not list((tmp_path / "out" / "errors").iterdir())  # sidecars moved along


def test_changed_input_or_sampling_is_refused_unless_allowed(tmp_path, fake_server):
    server = fake_server()
    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts, 3)
    run(prompts, tmp_path / "out", [server.url])
    write_prompts(prompts, 4)
    with pytest.raises(RunStateError, match="prompt file grew") as err:
        run(prompts, tmp_path / "out", [server.url])
    assert "--allow-changed-input" in err.value.hint
    result = run(prompts, tmp_path / "out", [server.url], allow_changed_input=True)
    assert result.stats.completed == 1
    with pytest.raises(RunStateError, match="temperature"):
        run(prompts, tmp_path / "out", [server.url], sampling=Sampling(temperature=1.0))


def test_output_dir_in_use_is_refused_and_stale_lock_is_not(tmp_path, fake_server):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 2)
    (tmp_path / "out").mkdir()
    with RunLock(tmp_path / "out" / "run.lock"), pytest.raises(RunStateError, match="in use"):
        run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    # A lock file left by a dead process (no flock held) does not block.
    (tmp_path / "out" / "run.lock").write_text('{"pid": 999999, "host": "gone"}')
    assert run(tmp_path / "p.jsonl", tmp_path / "out", [server.url]).exit_code == 0


def test_preflight_fails_fast_naming_the_server(tmp_path, fake_server):
    good = fake_server()
    write_prompts(tmp_path / "p.jsonl", 1)
    with pytest.raises(FleetUnavailable, match=r"127\.0\.0\.1:9") as err:
        run(tmp_path / "p.jsonl", tmp_path / "out", ["http://127.0.0.1:9"])
    assert "/v1/models" in err.value.hint
    with pytest.raises(ConfigError, match="'other' is not served"):
        run(tmp_path / "p.jsonl", tmp_path / "out2", [good.url], model="other")


def test_api_key_is_sent_and_never_written(tmp_path, fake_server, monkeypatch):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 2)
    monkeypatch.setenv("MY_KEY", "sekret-123")
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], api_key_env="MY_KEY")
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert b"sekret-123" not in path.read_bytes(), path
    monkeypatch.delenv("MY_KEY")
    with pytest.raises(ConfigError, match="MY_KEY"):
        run(tmp_path / "p.jsonl", tmp_path / "out3", [server.url], api_key_env="MY_KEY")


def test_compressed_shards_roll_and_resume(tmp_path, fake_server):
    server = fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 25)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], compress=True, shard_max_records=10)
    shards = sorted(p.name for p in (tmp_path / "out" / "completions").glob("*.jsonl.zst"))
    assert len(shards) == 3
    assert not list((tmp_path / "out" / "completions").glob("*.jsonl"))
    assert_exactly_once(tmp_path / "out", ids)
    assert run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], compress=True).already_done


def test_torn_last_line_is_repaired_on_restart(tmp_path, fake_server):
    server = fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 6)
    out = tmp_path / "out"
    run(tmp_path / "p.jsonl", out, [server.url])
    # Simulate a writer killed mid-line: a shard of a dead process ending in half a record.
    (shard,) = (out / "completions").glob("*.jsonl")
    lines = shard.read_bytes().splitlines(keepends=True)
    dead = out / "completions" / "part-19990101T000000-dead-1-00001.jsonl"
    dead.write_bytes(lines[-1][:-20])
    shard.write_bytes(b"".join(lines[:-1]))
    for side in (out / "completions").glob("*.keys"):
        side.unlink()
    result = run(tmp_path / "p.jsonl", out, [server.url])
    assert result.stats.completed == 1
    assert any("torn line" in note for note in result.repaired)
    assert not dead.exists()  # nothing whole was in it
    assert_exactly_once(out, ids)


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


def test_missing_prompt_file_and_unwritable_output_are_config_errors(tmp_path, fake_server):
    server = fake_server()
    with pytest.raises(ConfigError, match="does not exist"):
        run(tmp_path / "missing.jsonl", tmp_path / "out", [server.url])
    write_prompts(tmp_path / "p.jsonl", 1)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="cannot create --output-dir"):
        generate(quick_config_for(tmp_path / "p.jsonl", blocker / "sub", server.url))


def quick_config_for(prompts, output, url):
    from gen_helpers import quick_config

    return quick_config(prompts, output, [url], timeouts=Timeouts(request=5))


def test_no_default_path_outside_the_output_dir(tmp_path, fake_server):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 2)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        run(tmp_path / "p.jsonl", tmp_path / "deep" / "new" / "out", [server.url])
    finally:
        os.chdir(cwd)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep", "p.jsonl"]


def test_resume_does_not_reparse_finished_records_and_still_finds_duplicates(tmp_path, fake_server):
    server = fake_server()
    prompts = tmp_path / "p.jsonl"
    ids = write_prompts(prompts, 20)
    with open(prompts, "ab") as fh:  # a duplicate of a finished id, after the run
        fh.write(orjson.dumps({"id": ids[3], "messages": [{"role": "user", "content": "x"}]}))
        fh.write(b"\n")
    run(prompts, tmp_path / "out", [server.url])
    from regen.inputs import read_prompts
    from regen.records import Finished

    entries = list(read_prompts(prompts, is_finished=lambda i: i in set(ids)))
    assert all(isinstance(e, Finished) for e in entries)
    again = run(prompts, tmp_path / "out", [server.url])
    assert again.already_done
    errors = read_lines(tmp_path / "out", "errors")
    assert [(e["line"], e["error"]["type"]) for e in errors] == [(21, "duplicate_id")]


def test_restart_reads_sealed_shards_from_their_sidecars_without_rewriting(tmp_path, fake_server):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 12)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url], shard_max_records=5)
    folder = tmp_path / "out" / "completions"
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert len([n for n in before if n.endswith(".jsonl")]) == 3
    assert run(tmp_path / "p.jsonl", tmp_path / "out", [server.url]).already_done
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before


def test_a_full_disk_stops_the_run_with_a_clear_error_and_resume_recovers(
    tmp_path, fake_server, monkeypatch
):
    from regen.format.writer import ShardWriter

    server = fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 30)
    real_write = ShardWriter.write
    fill_disk_after(monkeypatch, 10)
    with pytest.raises(OutputError, match="No space left on device") as err:
        run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    assert "resume" in err.value.hint
    monkeypatch.setattr(ShardWriter, "write", real_write)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    assert_exactly_once(tmp_path / "out", ids)
