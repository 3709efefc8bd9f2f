"""`regen score` against a real vLLM speculative decoder (issue 26, item 6).

    .venv/bin/python bench/bench_engine_accept.py [--layers 28 --k 3 --max-new 32]

Target: the embedded SmolLM2-135M as an HF directory (its GGUF dequantised into a plain
LlamaForCausalLM, bf16). Draft: the same model cut to its first --layers layers. Two vLLM CPU
servers from .venv-vllm: the target speculating with the draft (`"method": "draft_model"`,
`num_speculative_tokens` k, `--per-request-spec-decode-metrics detailed`), and the draft
alone. Greedy answers are generated through the first (`regen generate --return-token-ids`);
then, on the same answers:

    engine: `regen score RUN --from-engine` (vLLM's own per-request acceptance, per category)
    score:  `regen score RUN --k k --draft-servers <the draft's server>` (teacher forcing)

and the engine's /metrics counters over the run. The draft-model engine is slow on CPU
(minutes of compilation, then a few tokens/s): keep the prompts few and short.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from regen.fleet.engine_metrics import spec_decode_counters

ROOT = Path(__file__).resolve().parent.parent
VLLM_PYTHON = Path(os.environ.get("REGEN_VLLM_PYTHON", ROOT / ".venv-vllm/bin/python"))
PROMPTS = {
    "code": [
        "Write a Python function that returns the sum of a list.",
        "Write a for loop in Python that prints the numbers 1 to 5.",
    ],
    "chat": ["Say hello to a new colleague in one sentence.", "Give two tips for sleeping well."],
    "math": [
        "What is 12 times 12? Explain step by step.",
        "List the first ten even numbers, separated by commas.",
    ],
}


def target_dir(given: Path | None) -> Path:
    """The embedded GGUF as the HF folder `regen serve --engine vllm` builds and caches."""
    if given is not None:
        return given
    from regen.serve.hf_model import ensure_hf_model

    return ensure_hf_model(str(VLLM_PYTHON))


def cut(target: Path, layers: int, out: Path) -> Path:
    """The target's first `layers` layers (with its embeddings, final norm and head) as a
    model of its own: a draft that agrees with the target most of the time."""
    from safetensors.torch import load_file, save_file

    out.mkdir(parents=True)
    for item in target.iterdir():
        if item.name not in ("model.safetensors", "config.json"):
            shutil.copy(item, out / item.name)
    weights = load_file(target / "model.safetensors")
    save_file(
        {k: v for k, v in weights.items() if _layer(k) < layers},
        out / "model.safetensors",
        metadata={"format": "pt"},
    )
    config = json.loads((target / "config.json").read_text())
    config["num_hidden_layers"] = layers
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return out


def _layer(name: str) -> int:
    parts = name.split(".")
    return int(parts[2]) if name.startswith("model.layers.") else -1


def start_vllm(model: Path, name: str, port: int, log: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    cmd = [
        str(VLLM_PYTHON),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        "2048",
        *extra,
    ]
    with open(log, "wb") as fh:
        return subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)


def wait_ready(url: str, proc: subprocess.Popen, log: Path, limit: float = 1500) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"vLLM exited ({proc.returncode}); its log: {log}")
        try:
            with urllib.request.urlopen(f"{url}/v1/models", timeout=5):
                return
        except OSError:
            time.sleep(5)
    raise SystemExit(f"vLLM at {url} not ready after {limit:.0f} s; its log: {log}")


def counters(url: str) -> dict[str, float]:
    """vLLM's spec-decode counters from /metrics, as `score --from-engine` names them."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        return spec_decode_counters(resp.read().decode())


def regen(*args: str) -> dict:
    cmd = [sys.executable, "-m", "regen", *args]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout) if "--json" in args else {}


def by_category(report: dict, k: int) -> dict[str, float]:
    groups = report["drafts"][0]["groups"]
    return {g: next(a for a in v["by_k"] if a["k"] == k)["tau"]["value"] for g, v in groups.items()}


def run(target: Path, layers: int, k: int, max_new: int, tmp: Path) -> dict:
    draft = cut(target, layers, tmp / f"draft-{layers}")
    spec = json.dumps({"method": "draft_model", "model": str(draft), "num_speculative_tokens": k})
    engine_url, draft_url = "http://127.0.0.1:18231", "http://127.0.0.1:18232"
    procs = [
        start_vllm(
            target,
            "target",
            18231,
            tmp / "engine.log",
            "--speculative-config",
            spec,
            "--per-request-spec-decode-metrics",
            "detailed",
        ),
        start_vllm(draft, "draft", 18232, tmp / "draft.log"),
    ]
    try:
        started = time.monotonic()
        wait_ready(engine_url, procs[0], tmp / "engine.log")
        wait_ready(draft_url, procs[1], tmp / "draft.log")
        ready_s = time.monotonic() - started
        prompts = tmp / "prompts.jsonl"
        prompts.write_text(
            "".join(
                json.dumps(
                    {
                        "id": f"{c}-{i}",
                        "messages": [{"role": "user", "content": p}],
                        "meta": {"category": c},
                    }
                )
                + "\n"
                for c, ps in PROMPTS.items()
                for i, p in enumerate(ps)
            )
        )
        before = counters(engine_url)
        started = time.monotonic()
        regen(
            "generate",
            "--prompts",
            str(prompts),
            "--output-dir",
            str(tmp / "run"),
            "--servers",
            engine_url,
            "--model",
            "target",
            "--temperature",
            "0",
            "--max-output-tokens",
            str(max_new),
            "--return-token-ids",
            "--display",
            "plain",
        )
        generate_s = time.monotonic() - started
        after = counters(engine_url)
        engine = regen("score", str(tmp / "run"), "--from-engine", "--all", "--json")
        scored = regen(
            "score",
            str(tmp / "run"),
            "--k",
            str(k),
            "--draft-servers",
            draft_url,
            "--tokenizer",
            str(target),
            "--all",
            "--json",
        )
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=60)
    delta = {name: after[name] - before.get(name, 0.0) for name in after}
    eng, sc = by_category(engine, k), by_category(scored, k)
    return {
        "draft_layers": layers,
        "k": k,
        "max_new": max_new,
        "ready_s": round(ready_s),
        "generate_s": round(generate_s, 1),
        "metrics_mean_acceptance_length": round(
            1 + delta["num_accepted_tokens"] / delta["num_drafts"], 4
        ),
        "metrics_counters": delta,
        "engine_counters": engine["drafts"][0]["engine_counters"]["(overall)"],
        "by_category": {
            g: {"engine": eng[g], "score": sc[g], "difference_pct": _pct(sc[g], eng[g])}
            for g in eng
            if g in sc
        },
    }


def _pct(score: float, engine: float) -> float:
    return round(100 * (score - engine) / engine, 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=28, help="draft depth (of 30 layers)")
    parser.add_argument("--k", type=int, default=3, help="num_speculative_tokens")
    parser.add_argument("--target", type=Path, help="an HF folder [default: the embedded model's]")
    parser.add_argument("--max-new", type=int, default=32, help="answer tokens at most")
    args = parser.parse_args()
    if not VLLM_PYTHON.exists():
        print(f"no vLLM environment at {VLLM_PYTHON}: run scripts/bootstrap.sh --test")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        result = run(target_dir(args.target), args.layers, args.k, args.max_new, Path(tmp))
    print(json.dumps(result, indent=2))
    out = ROOT / ".bench" / "engine_accept.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
