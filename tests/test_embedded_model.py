"""End to end against a real server: the embedded llama.cpp server with SmolLM2-135M."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import orjson
import psutil
import pytest

from gen_helpers import read_lines
from waiting import wait_until

EXAMPLES = Path(__file__).parent.parent / "examples" / "prompts.jsonl"

pytestmark = pytest.mark.model


def llama_servers() -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if "llama_cpp.server" in cmdline:
            found.append(proc)
    return found


def servers_on_port(port: str) -> list[psutil.Process]:
    """llama.cpp servers listening on this port: the one a run started, if it is still alive
    (other tests and other users may run servers of their own meanwhile)."""
    return [p for p in llama_servers() if port in p.info["cmdline"]]


def test_embedded_server_end_to_end(tmp_path):
    out = tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "regen",
        "generate",
        "--prompts",
        str(EXAMPLES),
        "--output-dir",
        str(out),
        "--max-output-tokens",
        "24",
        "--temperature",
        "0",
        "--display",
        "plain",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"output in {out}" in done.stdout
    assert "smollm2-135m-instruct" in done.stdout  # the resolved configuration was printed

    completions = read_lines(out, "completions")
    assert len(completions) == 7
    for record in completions:
        answer = record["messages"][-1]
        assert answer["role"] == "assistant" and answer["content"].strip()
        assert record["usage"]["completion_tokens"] > 0
        assert record["finish_reason"] in ("stop", "length")
        assert record["meta"]["model"] == "smollm2-135m-instruct"
        assert record["meta"]["server"].startswith("http://127.0.0.1:")
    (bad,) = read_lines(out, "errors")
    assert bad["line"] == 8 and bad["error"]["type"] == "unknown_role"
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["config"]["embedded"] is True
    # The server was stopped by its pid at the end.
    port = completions[0]["meta"]["server"].rsplit(":", 1)[1]
    assert not servers_on_port(port)

    status = subprocess.run(
        [sys.executable, "-m", "regen", "status", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    info = orjson.loads(status.stdout)
    assert info["alive"]["alive"] is False
    assert info["files"] == {"completions": 7, "errors": 1}
    assert info["progress"]["state"] == "finished"


def test_portable_build_uses_no_instructions_beyond_the_baseline():
    """The wheel scripts/bootstrap.sh builds runs on any x86-64-v3 machine: no AVX-512 or AMX
    compiled in, whatever the build machine has (a native build died with SIGILL on VMs that
    advertise them)."""
    import platform

    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode()
    if platform.machine() in ("x86_64", "AMD64"):
        assert "AVX2 = 1" in info, info
        assert "AVX512" not in info and "AMX" not in info, info


def many_prompts(path: Path, n: int) -> list[str]:
    from gen_helpers import write_prompts

    return write_prompts(path, n)


def test_kill9_of_the_embedded_server_mid_run_is_restarted_and_finishes(tmp_path):
    import os
    import signal

    from gen_helpers import assert_exactly_once
    from regen.serve.fleetfile import FleetFile

    ids = many_prompts(tmp_path / "p.jsonl", 12)  # killed after 3: most are still to come
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "regen",
            "generate",
            "--prompts",
            str(tmp_path / "p.jsonl"),
            "--output-dir",
            str(out),
            "--max-output-tokens",
            "16",
            "--temperature",
            "0",
            "--display",
            "plain",
            "--log-interval",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        record = out / "servers" / "FLEET.json"
        wait_until(record.exists, 120, "embedded server")
        (server,) = FleetFile.read(record).servers
        wait_until(lambda: len(read_lines(out, "completions")) >= 3, 120, "first completions")
        os.kill(server.pid, signal.SIGKILL)
        text, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert proc.returncode == 0, text
    assert "killed by SIGKILL" in text and "restarting server server-0" in text
    completions, errors = assert_exactly_once(out, ids)
    assert len(completions) == 12 and not errors
    assert not servers_on_port(str(server.port))


def test_serve_two_llamacpp_servers_restart_dead_and_generate_with_fleet(tmp_path):
    import os
    import signal

    from gen_helpers import assert_exactly_once
    from regen.serve.control import is_our_process
    from regen.serve.fleetfile import FleetFile

    fleet_path = tmp_path / "fleet.json"
    gguf = subprocess.run(
        [
            sys.executable,
            "-c",
            "from regen.fleet.embedded import default_model_path as d; print(d())",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "regen",
            "serve",
            "--engine",
            "llamacpp",
            "--model",
            gguf,
            "--replicas",
            "2",
            "--threads",
            "1",
            "--fleet",
            str(fleet_path),
            "--restart-dead",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    said: list[str] = []  # serve's output as it comes: the restart is waited for, not raced
    reader = threading.Thread(target=lambda: said.extend(serve.stdout), daemon=True)
    reader.start()
    generate = None
    try:
        wait_until(fleet_path.exists, 180, "FLEET.json")
        fleet = FleetFile.read(fleet_path)
        ids = many_prompts(tmp_path / "p.jsonl", 40)
        out = tmp_path / "out"
        generate = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "regen",
                "generate",
                "--prompts",
                str(tmp_path / "p.jsonl"),
                "--output-dir",
                str(out),
                "--fleet",
                str(fleet_path),
                "--concurrency",
                "2",
                "--max-output-tokens",
                "16",
                "--temperature",
                "0",
                "--display",
                "plain",
                "--log-interval",
                "1",
                "--health-interval",
                "1",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        wait_until(lambda: len(read_lines(out, "completions")) >= 4, 120, "first completions")
        victim = fleet.servers[1]
        os.kill(victim.pid, signal.SIGKILL)
        back = wait_until(
            lambda: [s for s in FleetFile.read(fleet_path).servers[1:] if s.pid != victim.pid],
            120,
            "restarted server",
        )
        assert is_our_process(back[0]) and back[0].port == victim.port
        text, _ = generate.communicate(timeout=300)
        assert generate.returncode == 0, text
        completions, errors = assert_exactly_once(out, ids)
        assert len(completions) == 40 and not errors
        served_by = {r["meta"]["server"] for r in completions}
        assert served_by == set(fleet.urls)  # both servers did work
        # generate may finish on server-0 before server-1 is back: wait for serve to say so
        wait_until(lambda: "is back and answers" in "".join(said), 120, "restarted server's answer")
    finally:
        for proc in (generate, serve):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:  # serve's output is the reader's; generate's is read here
                    if proc is generate:
                        proc.communicate(timeout=30)
                    else:
                        proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        reader.join(timeout=10)
    log = "".join(said)
    assert serve.returncode == 0, log
    assert "killed by SIGKILL" in log and "is back and answers" in log
    assert not any(is_our_process(s) for s in FleetFile.read(fleet_path).servers)
