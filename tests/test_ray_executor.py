"""`regen generate --executor ray --shards 2` on a local Ray instance (started by regen and
shut down by it): one task's worker is killed with SIGKILL, Ray runs the task again, and it
resumes its part; the union of the parts is exactly once."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile

import orjson

from gen_helpers import assert_exactly_once, write_prompts
from regen.testing.fake_server import Behaviour
from waiting import wait_until


def test_two_shards_on_ray_with_one_task_killed(tmp_path, fake_server):
    server = fake_server(Behaviour(slots=8, seconds_per_token=0.03))  # 0.24 s an answer
    ids = write_prompts(tmp_path / "p.jsonl", 120)
    out = tmp_path / "out"
    ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths are long
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
        server.url,
        "--concurrency",
        "4",
        "--executor",
        "ray",
        "--shards",
        "2",
    ]
    env = {**os.environ, "RAY_TMPDIR": ray_tmp, "RAY_USAGE_STATS_ENABLED": "0"}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        progress = out / "progress-0000-of-0002.json"
        wait_until(
            lambda: progress.exists() and orjson.loads(progress.read_bytes())["finished"] >= 8,
            180,
            "part 0 started on Ray, eight answers in",
            alive=proc,
        )
        killed = orjson.loads(progress.read_bytes())["pid"]
        os.kill(killed, signal.SIGKILL)
        server.behaviour.seconds_per_token = 0.002  # slow for the kill to land mid-part; no more
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=60)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    text = stdout.decode()
    assert proc.returncode == 0, text + stderr.decode()[-3000:]
    assert "shard 0/2" in text and "shard 1/2" in text
    assert f"pid {killed})" not in text  # part 0 was finished by a second attempt
    completions, errors = assert_exactly_once(out, ids)
    assert len(completions) == 120 and not errors
    # The retry resumed: only what was in flight at the kill was asked again.
    assert len(server.requests) <= 120 + 4
