"""A resume passes over finished input lines without parsing them (issue 9: restart in
seconds at 10M prompts), and gets exactly what a full pass would: the same pending work, the
same counts, the same unusable and repeated lines recorded once."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

import regen.jsonio
import regen.run.intake
import regen.run.linemap
from gen_helpers import assert_exactly_once, read_lines, run, write_prompts
from regen.format.sidecar import sidecar_path


@pytest.fixture
def parsed(monkeypatch) -> list[int]:
    """The input lines the run's pass over the input parses, in order. (The input gate
    reads the first 1,000 lines of every run on its own; that is not this.)"""
    lines: list[int] = []
    real = regen.run.intake.read_prompts

    def counting(*args, **kwargs):
        for entry in real(*args, **kwargs):
            lines.append(entry.line)
            yield entry

    monkeypatch.setattr(regen.run.intake, "read_prompts", counting)
    return lines


def forget(out: Path, lines: set[int]) -> None:
    """Take the records of these input lines out of the output, as if the run had been
    killed before they were written: their shards lose them and their sidecars."""
    for kind in ("completions", "errors"):
        for shard in sorted((out / kind).glob("*.jsonl")):
            records = [orjson.loads(x) for x in shard.read_bytes().splitlines() if x]
            line_of = (lambda r: r["line"]) if kind == "errors" else (lambda r: r["meta"]["line"])
            kept = [r for r in records if line_of(r) not in lines]
            if len(kept) != len(records):
                shard.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in kept))
                sidecar_path(shard).unlink()


def with_bad_lines(path: Path, n: int) -> list[str]:
    """n prompts, a blank line, invalid JSON, and a repeat of the first id near the end."""
    ids = write_prompts(path, n)
    body = path.read_bytes().splitlines(keepends=True)
    body.insert(3, b"\n")  # line 4: blank
    body.insert(5, b"{broken\n")  # line 6: not JSON
    repeat = {"id": ids[0], "messages": [{"role": "user", "content": "again"}]}
    body.insert(len(body) - 2, orjson.dumps(repeat) + b"\n")
    path.write_bytes(b"".join(body))
    return ids


def error_kinds(out: Path) -> dict[int, str]:
    return {e["line"]: e["error"]["type"] for e in read_lines(out, "errors")}


def test_a_resume_parses_only_the_lines_left(tmp_path, fake_server, parsed):
    server = fake_server()
    prompts = tmp_path / "p.jsonl"
    ids = with_bad_lines(prompts, 60)
    out = tmp_path / "out"
    first = run(prompts, out, [server.url], shard_max_records=7)
    assert first.exit_code == 0
    kinds = error_kinds(out)
    assert sorted(kinds.values()) == ["duplicate_id", "invalid_json"]
    left = {10, 11, 30, 47}  # out of order, as a killed run leaves them
    forget(out, left)
    parsed.clear()
    again = run(prompts, out, [server.url], shard_max_records=7)
    assert again.exit_code == 0 and again.stats.completed == len(left)
    assert sorted(set(parsed)) == sorted(left)  # nothing else was parsed
    assert again.stats.total == first.stats.total  # the counts of skipped lines add up
    assert again.stats.skipped == 60 - len(left)
    assert error_kinds(out) == kinds  # recorded once, not again
    assert_exactly_once(out, ids)


def test_a_repeated_id_in_the_unread_part_is_still_a_repeat(tmp_path, fake_server, parsed):
    """The first use of the id is a finished line the resume skips; its repeat comes after
    the lines left, and must be recorded as a repeat, not taken as finished."""
    server = fake_server()
    prompts = tmp_path / "p.jsonl"
    ids = with_bad_lines(prompts, 40)
    out = tmp_path / "out"
    run(prompts, out, [server.url])
    repeat_line = next(line for line, kind in error_kinds(out).items() if kind == "duplicate_id")
    forget(out, {20, repeat_line})
    again = run(prompts, out, [server.url])
    assert again.stats.completed == 1 and again.stats.bad_lines == 1
    assert error_kinds(out)[repeat_line] == "duplicate_id"
    assert 20 in parsed and repeat_line in parsed
    assert_exactly_once(out, ids)


def test_partly_finished_samples_are_finished_and_nothing_else(tmp_path, fake_server, parsed):
    server = fake_server()
    prompts = tmp_path / "p.jsonl"
    ids = write_prompts(prompts, 12)
    out = tmp_path / "out"
    run(prompts, out, [server.url], samples_per_prompt=3)
    shard = next((out / "completions").glob("*.jsonl"))
    records = [orjson.loads(x) for x in shard.read_bytes().splitlines()]
    dropped = {(r["id"], r["sample"]) for r in records if r["meta"]["line"] == 5 and r["sample"]}
    shard.write_bytes(
        b"".join(orjson.dumps(r) + b"\n" for r in records if (r["id"], r["sample"]) not in dropped)
    )
    sidecar_path(shard).unlink()
    parsed.clear()
    again = run(prompts, out, [server.url], samples_per_prompt=3)
    assert again.stats.completed == 2 and parsed == [5]
    assert_exactly_once(out, ids, samples=3)


def test_a_changed_input_is_read_in_full(tmp_path, fake_server, parsed):
    """Line numbers of an older input mean nothing in a new one: with --allow-changed-input
    (a line inserted at the top shifts all the others) every line is read and ids decide."""
    server = fake_server()
    prompts = tmp_path / "p.jsonl"
    ids = write_prompts(prompts, 20)
    out = tmp_path / "out"
    run(prompts, out, [server.url])
    new = {"id": "new-first", "messages": [{"role": "user", "content": "a new one"}]}
    prompts.write_bytes(orjson.dumps(new) + b"\n" + prompts.read_bytes())
    parsed.clear()
    again = run(prompts, out, [server.url], allow_changed_input=True)
    assert again.stats.completed == 1 and len(parsed) == 21
    why = "does not say which lines of this input its records are"
    assert any("reads every input line" in e and why in e for e in again.stats.events)
    assert_exactly_once(out, ["new-first", *ids])
    parsed.clear()
    third = run(prompts, out, [server.url], allow_changed_input=True)
    assert third.already_done and len(parsed) == 21  # old shards still name the old input


def test_prompts_appended_to_the_input_keep_the_skipping(tmp_path, fake_server, parsed):
    """The usual change: more prompts at the end (--allow-changed-input). The old input is
    the start of the new one, so its line numbers still hold: only new lines are read."""
    server = fake_server()
    prompts = tmp_path / "p.jsonl"
    ids = write_prompts(prompts, 20)
    out = tmp_path / "out"
    run(prompts, out, [server.url])
    for batch, count in (("b", 5), ("c", 3)):  # twice: the first input is still remembered
        more = [f"{batch}{i}" for i in range(count)]
        with open(prompts, "ab") as fh:
            for pid in more:
                fh.write(orjson.dumps({"id": pid, "messages": [{"role": "user", "content": pid}]}))
                fh.write(b"\n")
        ids += more
        parsed.clear()
        again = run(prompts, out, [server.url], allow_changed_input=True)
        assert again.stats.completed == count and len(parsed) == count
        assert not any("reads every input line" in e for e in again.stats.events)
    assert_exactly_once(out, ids)
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert len(manifest["earlier_inputs"]) == 2
    # An edit in the middle is no append: every line is read again, and ids decide.
    body = prompts.read_bytes().replace(b"question p00003", b"question p00003, edited")
    prompts.write_bytes(body)
    parsed.clear()
    third = run(prompts, out, [server.url], allow_changed_input=True)
    assert third.already_done and len(parsed) == len(ids)


def test_an_output_written_before_line_maps_resumes_by_ids(tmp_path, fake_server, parsed):
    """Shards named without the input digest and format 1 sidecars (regen before this
    change): the resume reads every line, and is exactly once."""
    server = fake_server()
    prompts = tmp_path / "p.jsonl"
    ids = write_prompts(prompts, 30)
    out = tmp_path / "out"
    run(prompts, out, [server.url], shard_max_records=8)
    for shard in sorted((out / "completions").glob("*.jsonl")):
        old_name = re.sub(r"-i[0-9a-f]{12}-", "-", shard.name)
        records = [orjson.loads(x) for x in shard.read_bytes().splitlines()]
        old_sidecar = {
            "shard": old_name,
            "bytes": shard.stat().st_size,
            "keys": [[r["id"], r["sample"]] for r in records],
        }
        sidecar_path(shard).unlink()
        shard = shard.rename(shard.with_name(old_name))
        sidecar_path(shard).write_bytes(orjson.dumps(old_sidecar))
    forget(out, {3, 17})
    parsed.clear()
    again = run(prompts, out, [server.url])
    assert again.stats.completed == 2 and len(parsed) == 30
    assert_exactly_once(out, ids)


def test_another_parts_lines_are_skipped_and_its_open_shard_left_alone(
    tmp_path, fake_server, parsed
):
    server = fake_server()
    prompts = tmp_path / "p.jsonl"
    ids = write_prompts(prompts, 40)
    out = tmp_path / "out"
    assert run(prompts, out, [server.url], part=_part(0, 2)).exit_code == 0
    # Part 0 is "still writing" a shard: a plain shard with a torn last line.
    mine = sorted((out / "completions").glob("*.jsonl"))[0]
    live = mine.with_name(mine.name.replace("-s0000of0002-", "-s0000of0002-x-"))
    live.write_bytes(mine.read_bytes() + b'{"id": "torn')
    before = live.read_bytes()
    parsed.clear()
    assert run(prompts, out, [server.url], part=_part(1, 2)).exit_code == 0
    assert live.read_bytes() == before and not sidecar_path(live).exists()
    live.unlink()
    part_one = [i for i in ids if _part(1, 2).owns_id(i)]
    assert sorted(parsed) == sorted(ids.index(i) + 1 for i in part_one)  # none of part 0's
    parsed.clear()
    again = run(prompts, out, [server.url], part=_part(1, 2))
    assert again.already_done and parsed == []
    assert_exactly_once(out, ids)


def _part(index: int, count: int):
    from regen.format.part import Part

    return Part(index, count)


def test_a_compressed_output_resumes_without_parsing_either(tmp_path, fake_server, parsed):
    server = fake_server()
    prompts = tmp_path / "p.jsonl"
    ids = write_prompts(prompts, 25)
    out = tmp_path / "out"
    run(prompts, out, [server.url], compress=True, shard_max_records=10)
    assert len(list((out / "completions").glob("*.jsonl.zst"))) == 3
    sidecar_path(next((out / "completions").glob("*.zst"))).unlink()  # rebuilt from the records
    parsed.clear()
    again = run(prompts, out, [server.url], compress=True)
    assert again.already_done and parsed == []
    assert_exactly_once(out, ids)
