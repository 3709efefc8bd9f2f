"""One count of a run: generate's summary, `regen status`, `status --json`, `plan --from-run`
and the manifest say the same items, errors, unusable lines and items left, for every kind
of input line; a finished run reads 0 left."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from regen.cli import main


def good(i: int) -> str:
    return json.dumps({"id": f"p{i}", "messages": [{"role": "user", "content": f"q{i}"}]})


# Each kind of line amid three good ones: (lines, items it makes, unusable lines among them).
KINDS = {
    "blank line": ([good(1), "", good(2), "   ", good(3)], 3, 0),
    "bad JSON": ([good(1), '{"id": "x", oops', good(2), good(3)], 4, 1),
    "repeated id": ([good(1), good(2), good(1), good(3)], 4, 1),
    "no turns": ([good(1), json.dumps({"id": "x", "text": "hi"}), good(2), good(3)], 4, 1),
}


def invoke(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def generate(prompts: Path, out: Path, url: str, *more: str) -> str:
    return invoke(
        "generate",
        "--prompts",
        str(prompts),
        "-o",
        str(out),
        "--servers",
        url,
        "--display",
        "none",
        *more,
    )


def assert_one_count(out: Path, items: int, unusable: int) -> None:
    errors = unusable
    status = invoke("status", str(out))
    of_them = f" ({unusable} of them unusable input lines)" if unusable else ""
    assert (
        f"finished: {items} of {items} items (100.0%): {items - errors} completions, "
        f"{errors} errors{of_them}; 0 left"
    ) in status
    info = json.loads(invoke("status", str(out), "--json"))
    assert info["count"] == {
        "items": items,
        "completions": items - errors,
        "errors": errors,
        "unusable_lines": unusable,
        "left": 0,
        "counted": True,
    }
    assert info["eta"]["items"] == 0 and info["progress"]["remaining"] == 0
    plan = json.loads(invoke("plan", "--from-run", str(out), "--json"))
    assert (plan["items"], plan["finished"], plan["remaining"]) == (items, items, 0)
    assert plan["unusable_lines"] == unusable
    assert f"{items} of {items} items finished, 0 left" in invoke("plan", "--from-run", str(out))
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    counted = manifest["sessions"][-1]["ended"]["counted"]
    assert (counted["items"], counted["unusable_lines"]) == (items, unusable)


@pytest.mark.parametrize("kind", KINDS)
def test_every_reader_says_the_same_count_and_a_finished_run_has_none_left(
    tmp_path, fake_server, kind
):
    lines, items, unusable = KINDS[kind]
    prompts, out = tmp_path / "p.jsonl", tmp_path / "out"
    prompts.write_text("\n".join(lines) + "\n")
    url = fake_server().url
    done = generate(prompts, out, url)
    errors = f"{unusable} errors" + (f" ({unusable} of them unusable input lines)" * unusable)
    assert f"done: {items - unusable} new completions, {errors};" in done
    assert_one_count(out, items, unusable)
    again = generate(prompts, out, url)  # a resume of a finished run: still the same
    assert f"nothing to do: all {items} items are already in" in again
    assert_one_count(out, items, unusable)
    (out / "progress.json").unlink()  # the manifest keeps the count
    info = json.loads(invoke("status", str(out), "--json"))
    assert info["count"]["left"] == 0 and info["count"]["items"] == items


def test_a_limited_trial_leaves_the_rest_to_do(tmp_path, fake_server):
    """--limit reads the first lines only: the count stays the whole file's estimate."""
    prompts, out = tmp_path / "p.jsonl", tmp_path / "out"
    prompts.write_text("\n".join(good(i) for i in range(6)) + "\n")
    generate(prompts, out, fake_server().url, "--limit", "2")
    info = json.loads(invoke("status", str(out), "--json"))
    assert info["count"]["counted"] is False
    assert (info["count"]["items"], info["count"]["left"]) == (6, 4)


def test_a_sharded_run_is_counted_once_every_part_has_read_its_lines(tmp_path, fake_server):
    prompts, out = tmp_path / "p.jsonl", tmp_path / "out"
    prompts.write_text("\n".join([good(1), "", good(2), "{oops", good(3), "", good(4)]) + "\n")
    url = fake_server().url
    generate(prompts, out, url, "--shard", "0/2")
    info = json.loads(invoke("status", str(out), "--json"))
    assert info["count"]["counted"] is False  # part 1 has not read its lines yet
    generate(prompts, out, url, "--shard", "1/2")
    info = json.loads(invoke("status", str(out), "--json"))
    assert info["count"] == {
        "items": 5,
        "completions": 4,
        "errors": 1,
        "unusable_lines": 1,
        "left": 0,
        "counted": True,
    }


def test_a_resumed_session_says_the_whole_count_beside_its_own(tmp_path, fake_server):
    prompts, out = tmp_path / "p.jsonl", tmp_path / "out"
    prompts.write_text("\n".join([good(1), "", good(2)]) + "\n")
    url = fake_server().url
    generate(prompts, out, url)
    with prompts.open("a") as fh:
        fh.write("{oops\n" + good(3) + "\n")
    done = generate(prompts, out, url, "--allow-changed-input")
    assert (
        "done: 1 new completions, 1 errors (1 of them unusable input lines); the run has "
        "4 of 4 items, 0 left;"
    ) in done
    assert "finished: 4 of 4 items (100.0%)" in invoke("status", str(out))
