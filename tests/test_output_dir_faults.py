"""A full or read-only output directory: a plain message, no temporary file left behind,
and a resume that loses nothing."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys

import pytest

from gen_helpers import (
    assert_exactly_once,
    fill_disk_after,
    run,
    run_with_read_only,
    write_prompts,
)
from regen.errors import OutputError


# -- 7. a full or read-only output dir --------------------------------------------------------
def test_a_full_disk_ends_with_a_plain_message_and_resume_loses_nothing(tmp_path, fake_server):
    server = fake_server()
    ids = write_prompts(tmp_path / "p.jsonl", 300)
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
        server.url,
        "--display",
        "none",
    ]

    def small_files() -> None:  # no file may grow past 20 kB: the shard fills up
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    full = subprocess.run(
        command, capture_output=True, text=True, timeout=120, preexec_fn=small_files
    )
    assert full.returncode == 6, full.stderr
    assert f"cannot write to {out / 'completions'}" in full.stderr
    assert "free space" in full.stderr and "Traceback" not in full.stderr
    again = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    completions, errors = assert_exactly_once(out, ids)
    assert len(completions) == 300 and not errors


def test_a_failed_atomic_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    import errno

    from regen import jsonio

    def no_space(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(jsonio.os, "fsync", no_space)
    with pytest.raises(OSError, match="No space"):
        jsonio.atomic_write_bytes(tmp_path / "progress.json", b"{}")
    assert list(tmp_path.iterdir()) == []


def test_a_failing_seal_does_not_hide_the_full_disk_message(tmp_path, fake_server, monkeypatch):
    import errno

    from regen.format import writer as writer_mod

    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 30)

    def no_space(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    fill_disk_after(monkeypatch, 10)
    monkeypatch.setattr(writer_mod, "write_sidecar", no_space)
    with pytest.raises(OutputError, match="completions: No space left"):
        run(tmp_path / "p.jsonl", tmp_path / "out", [server.url])


@pytest.mark.parametrize("existing", [True, False])
def test_a_read_only_output_dir_is_a_plain_message(tmp_path, fake_server, existing):
    server = fake_server()
    write_prompts(tmp_path / "p.jsonl", 2)
    read_only = tmp_path / "ro"
    read_only.mkdir()
    out = read_only if existing else read_only / "run"  # an existing dir, or one to create
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
        "--display",
        "none",
    ]
    result = run_with_read_only(read_only, command)
    assert result.returncode == 6, result.stderr
    assert f"cannot write to {out}" in result.stderr and "hint:" in result.stderr
    assert "Traceback" not in result.stderr


def test_prepare_into_a_read_only_dir_is_a_plain_message(tmp_path):
    write_prompts(tmp_path / "src.jsonl", 3)
    read_only = tmp_path / "ro"
    read_only.mkdir()
    command = [
        sys.executable,
        "-m",
        "regen",
        "prepare",
        "--source",
        str(tmp_path / "src.jsonl"),
        "-o",
        str(read_only / "prompts.jsonl"),
    ]
    result = run_with_read_only(read_only, command)
    assert result.returncode == 6, result.stderr
    assert f"cannot write to {read_only}" in result.stderr and "Traceback" not in result.stderr
    assert "prepare writes its files anew" in result.stderr and "resume" not in result.stderr
