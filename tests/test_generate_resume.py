"""regen generate against fake servers, run again: a finished run does no work, failed
records retried, changed input refused, the output dir locked, torn lines and sealed
shards on restart, and a full disk that a resume recovers from."""

from __future__ import annotations

import orjson
import pytest

from gen_helpers import assert_exactly_once, fill_disk_after, read_lines, run, write_prompts
from regen.errors import OutputError, RunStateError
from regen.run.config import Sampling
from regen.storage.lock import RunLock


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
