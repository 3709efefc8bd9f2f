"""No verb renames over, or writes beside, anything that is not a regular file or a folder
(issue 54): /dev/null and /dev/stdout are written straight through; /dev/full, a disk, a
FIFO, a socket or /proc are refused with exit 2 and the reason, before any work. The device
nodes are made here with os.mknod (the suite runs as root), with /dev/null's and /dev/full's
numbers; the block device has numbers kept for local use (60:0), so that a bug that did
write there would find no disk behind them."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from regen.cli import main
from regen.errors import ConfigError, OutputError
from regen.output_place import Kind, place_of
from regen.storage.destination import Destination

REGEN = [sys.executable, "-m", "regen"]


def make(folder: Path, shape: str) -> Path:
    path = folder / shape
    if shape == "null":
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    elif shape == "full":
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    elif shape == "disk":
        os.mknod(path, stat.S_IFBLK | 0o600, os.makedev(60, 0))
    elif shape == "fifo":
        os.mkfifo(path)
    elif shape == "socket":
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(path))
    elif shape == "file":
        path.write_text("not a folder\n")
    return path


def listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Each entry's type and device numbers: what a rename over it or a sibling would change."""
    return {p.name: (stat.S_IFMT(p.lstat().st_mode), p.lstat().st_rdev) for p in folder.iterdir()}


@pytest.fixture
def devices(tmp_path) -> Path:
    folder = tmp_path / "dev"
    folder.mkdir()
    for shape in ("null", "full", "disk", "fifo", "socket", "file"):
        make(folder, shape)
    return folder


@pytest.fixture
def finished(tmp_path) -> Path:
    return checkfix.write_run(tmp_path / "run", checkfix.healthy(4))


def invoke(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_what_is_at_a_path_is_named_once(devices, tmp_path):
    assert place_of(devices / "null").kind is Kind.STREAM
    assert place_of("/dev/stdout").fd == 1 and place_of("/dev/fd/2").fd == 2
    assert place_of(devices / "file").kind is Kind.FILE
    assert place_of(tmp_path / "new.json").kind is Kind.NEW
    link = tmp_path / "link.json"
    link.symlink_to(devices / "file")
    assert place_of(link).path == devices / "file"  # the rename replaces the file, not the link
    reasons = {
        "full": "fails every write",
        "disk": "block device",
        "fifo": "named pipe",
        "socket": "socket",
    }
    for shape, why in reasons.items():
        with pytest.raises(ConfigError, match=why):
            place_of(devices / shape, "-o")
    with pytest.raises(ConfigError, match="/proc or /sys"):
        place_of("/proc/regen-test")
    with pytest.raises(ConfigError, match="not a folder"):
        place_of(devices / "null", "--output-dir", "folder")


@pytest.mark.parametrize("shape", ["full", "disk", "fifo", "socket"])
def test_prepare_refuses_a_device_and_leaves_it_as_it_was(tmp_path, devices, shape):
    (tmp_path / "src.jsonl").write_text('{"prompt": "hi"}\n')
    before = listing(devices)
    result = invoke("prepare", "--source", tmp_path / "src.jsonl", "-o", devices / shape)
    assert result.exit_code == 2, result.output
    assert f"cannot write --output {devices / shape}: it is" in result.output
    assert "wrote" not in result.output  # refused before any source was read
    assert listing(devices) == before


def test_prepare_into_proc_is_refused_not_a_traceback(tmp_path):
    (tmp_path / "src.jsonl").write_text('{"prompt": "hi"}\n')
    for target in ("/proc/regen-54.jsonl", "/proc/self/regen-54.jsonl"):
        result = invoke("prepare", "--source", tmp_path / "src.jsonl", "-o", target)
        assert result.exit_code == 2, result.output
        assert "the kernel's /proc or /sys" in result.output and result.exception is not None
        assert isinstance(result.exception, SystemExit)  # a message, no traceback


def test_prepare_to_dev_null_writes_nothing_beside_it_and_says_so(tmp_path, devices):
    rows = [{"prompt": "hi"}, {"prompt": "yo"}, {"prompt": "ok"}, {"prompt": ""}]
    (tmp_path / "src.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    before = listing(devices)
    result = invoke("prepare", "--source", tmp_path / "src.jsonl", "-o", devices / "null")
    assert result.exit_code == 0, result.output
    assert "nothing is written beside it: no rejects and no report file" in result.output
    assert "rejects: not written (give --rejects FILE" in result.output
    assert listing(devices) == before
    kept = tmp_path / "kept.rejects.jsonl"  # given, it is written where it was given
    again = invoke(
        "prepare", "--source", tmp_path / "src.jsonl", "-o", devices / "null", "--rejects", kept
    )
    assert again.exit_code == 0, again.output
    assert orjson.loads(kept.read_bytes().splitlines()[0])["kind"] == "empty_prompt"
    assert listing(devices) == before


def test_prepare_streams_to_standard_output_and_talks_on_stderr(tmp_path):
    (tmp_path / "src.jsonl").write_text('{"prompt": "hi"}\n{"prompt": "yo"}\n')
    command = [*REGEN, "prepare", "--source", str(tmp_path / "src.jsonl"), "-o", "/dev/stdout"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert sorted(r["messages"][0]["content"] for r in rows) == ["hi", "yo"]
    assert "wrote 2 prompts to /dev/stdout" in done.stderr
    assert list(tmp_path.iterdir()) == [tmp_path / "src.jsonl"]  # no dev/ folder, no siblings


@pytest.mark.parametrize("flag", ["--json", "--html", "--per-sample"])
def test_check_writes_dev_null_through_and_refuses_the_rest(finished, devices, flag):
    tokenizer = checkfix.qwen_style_dir()
    before = listing(devices)
    kept = invoke("check", finished, "--tokenizer", tokenizer, flag, devices / "null")
    assert kept.exit_code == 0, kept.output
    for shape in ("full", "disk", "fifo"):
        result = invoke("check", finished, "--tokenizer", tokenizer, flag, devices / shape)
        assert result.exit_code == 2, result.output
        assert f"cannot write {flag} {devices / shape}: it is" in result.output
        assert "verdict" not in result.output  # refused before the run was judged
    assert listing(devices) == before


def test_check_json_to_standard_output_is_only_the_json(finished):
    command = [*REGEN, "check", str(finished), "--tokenizer", str(checkfix.qwen_style_dir())]
    done = subprocess.run(
        [*command, "--json", "/dev/stdout"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["verdict"] == "pass"
    assert "verdict: PASS" in done.stderr  # the text report goes to people, on stderr


@pytest.mark.parametrize(
    "args",
    [
        ["export", "{run}", "-o", "{place}", "--format", "sharegpt"],
        ["score", "{run}", "--draft", "ngram", "--tokenizer", "{tok}", "-o", "{place}"],
        ["generate", "--prompts", "{run}/p.jsonl", "-o", "{place}", "--servers", "http://h:1"],
        ["plan", "--prompts", "{run}/p.jsonl", "-o", "{place}", "--servers", "http://h:1"],
        ["demo", "{place}"],
    ],
    ids=["export", "score", "generate", "plan", "demo"],
)
def test_a_verb_that_writes_a_folder_refuses_every_other_shape(finished, devices, args):
    tokenizer = str(checkfix.qwen_style_dir())
    before = listing(devices)
    for shape in ("null", "full", "disk", "fifo", "socket", "file"):
        place = devices / shape
        filled = [a.format(run=finished, place=place, tok=tokenizer) for a in args]
        result = invoke(*filled)
        assert result.exit_code == 2, (shape, result.output)
        assert f"{place}: it is" in result.output and "hint:" in result.output, result.output
        assert "Traceback" not in result.output
    assert listing(devices) == before


def test_export_reports_to_dev_null_and_refuses_a_staging_dir_that_is_a_file(
    tmp_path, finished, devices
):
    before = listing(devices)
    done = invoke("export", finished, "-o", tmp_path / "ds", "--report", devices / "null")
    assert done.exit_code == 0, done.output
    staged = invoke(
        "export", finished, "-o", "s3://b/ds", "--staging-dir", devices / "file", "--overwrite"
    )
    assert staged.exit_code == 2, staged.output
    assert f"cannot write --staging-dir {devices / 'file'}: it is a file" in staged.output
    assert staged.exception is None or isinstance(staged.exception, SystemExit)
    assert listing(devices) == before


def test_a_parent_that_is_a_file_is_named_as_one(tmp_path, finished, devices):
    """Not "its folder is gone": the file in the way, and to move it; before the work (exit
    2), or when the folder turns into a file under the verb (exit 6)."""
    target = devices / "file" / "r.json"
    result = invoke("check", finished, "--tokenizer", checkfix.qwen_style_dir(), "--json", target)
    assert result.exit_code == 2, result.output
    assert f"{devices / 'file'} is a file" in result.output and "gone" not in result.output
    folder = tmp_path / "reports"
    destination = Destination(str(folder / "r.json"), "--json")
    with (
        pytest.raises(OutputError, match="reports is a file") as caught,
        destination.local_file() as path,
    ):
        folder.rmdir()
        folder.write_text("in the way")
        path.write_bytes(b"{}")
    assert "move" in (caught.value.hint or "") and "gone" not in str(caught.value)
