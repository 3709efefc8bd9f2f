"""`regen status` reading a run's files: liveness from the lock, or from the heartbeat of a
run on another machine, and counts from the output files themselves."""

from __future__ import annotations

import time

import orjson
import pytest

from gen_helpers import run, write_prompts
from regen.errors import ConfigError
from regen.run.status import read_status
from regen.storage.lock import RunLock


def finished_run(tmp_path, fake_server):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 5)
    run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])
    return tmp_path / "out"


def rewrite_progress(out, **changes) -> None:
    path = out / "progress.json"
    progress = orjson.loads(path.read_bytes())
    path.write_bytes(orjson.dumps({**progress, **changes}))


def test_a_run_on_another_machine_is_judged_by_its_heartbeat(tmp_path, fake_server):
    out = finished_run(tmp_path, fake_server)
    rewrite_progress(out, host="gpu-node-7", state="running", updated_unix=time.time() - 5)
    alive = read_status(out)["alive"]
    assert alive["alive"] is True and "heartbeat" in alive["how"]
    rewrite_progress(out, updated_unix=time.time() - 600)
    assert read_status(out)["alive"]["alive"] is False


def test_the_lock_decides_on_this_machine(tmp_path, fake_server):
    out = finished_run(tmp_path, fake_server)
    assert read_status(out)["alive"]["alive"] is False
    with RunLock(out / "run.lock"):
        assert read_status(out)["alive"]["alive"] is True


def test_counts_come_from_the_files_even_without_a_snapshot(tmp_path, fake_server):
    out = finished_run(tmp_path, fake_server)
    (out / "progress.json").unlink()
    info = read_status(out)
    assert info["files"] == {"completions": 5, "errors": 0}
    assert info["progress"] is None


def test_not_an_output_dir(tmp_path):
    with pytest.raises(ConfigError, match="not a regen output dir"):
        read_status(tmp_path)
