"""A stand-in for an inference engine's server process (sglang, vLLM, llama.cpp), for tests.

It records its command line and environment, then serves the OpenAI API with the fake server
on the port it was given. Environment knobs (all optional):
  STANDIN_RECORD_DIR    write <port>.json with {"argv", "env"} there
  STANDIN_MISSING       `-c "import X"` fails for these comma-separated modules
  STANDIN_DIE_AFTER     die after this many chat requests ...
  STANDIN_SIGNAL        ... by this signal (default SIGILL), as a miscompiled binary would
  STANDIN_DIE_ONCE      a marker file: die only while it does not exist (it is created)
  STANDIN_SECONDS_PER_TOKEN  service time, to keep a run busy
  STANDIN_EXIT0         exit 0 at once without serving (a launcher that is only a shim)
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import orjson

from regen.testing.fake_server import Behaviour, FakeServer, echo_answer

RECORDED_ENV = ("CUDA_VISIBLE_DEVICES", "VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_KVCACHE_SPACE")


def main(argv: list[str]) -> None:
    if argv[:1] == ["-c"]:
        module = argv[1].removeprefix("import ").strip()
        missing = [m for m in os.environ.get("STANDIN_MISSING", "").split(",") if m]
        if any(module == m or module.startswith(m + ".") for m in missing):
            print(f"ModuleNotFoundError: No module named '{module}'", file=sys.stderr)
            sys.exit(1)
        sys.exit(0)
    if argv[:1] == ["--console"]:  # run as the engine's console script: NAME serve ...
        module, args = argv[1], argv[3:]
    else:
        module, args = (argv[1], argv[2:]) if argv[:1] == ["-m"] else ("", argv)
    if args[:1] == ["serve"]:  # python -m vllm.entrypoints.cli.main serve MODEL ...
        args = args[1:]
    if os.environ.get("STANDIN_EXIT0"):
        print("stand-in: an entry point that only re-exports the module, and exits", flush=True)
        sys.exit(0)
    serve(args, module)


def _value(args: list[str], *names: str) -> str:
    for name in names:
        if name in args:
            return args[args.index(name) + 1]
    raise SystemExit(f"stand-in: none of {names} in {args}")


def serve(args: list[str], module: str = "") -> None:
    port = int(_value(args, "--port"))
    model = _value(args, "--served-model-name", "--model_alias")
    record_dir = os.environ.get("STANDIN_RECORD_DIR")
    if record_dir:
        record = {
            "argv": sys.argv,
            "env": {k: v for k, v in os.environ.items() if k in RECORDED_ENV},
        }
        Path(record_dir, f"{port}.json").write_bytes(orjson.dumps(record))
    seconds_per_token = float(os.environ.get("STANDIN_SECONDS_PER_TOKEN", "0"))
    dialect = next((d for d in ("sglang", "vllm") if module.startswith(d)), None)
    behaviour = Behaviour(
        model=model,
        answer=_mortal_answer(),
        seconds_per_token=seconds_per_token,
        dialect=dialect,
        api_key=_api_key(args, dialect),
        deterministic="--enable-deterministic-inference" in args,
    )
    server = FakeServer(behaviour, port=port)

    async def run() -> None:
        await server.start_async()
        print(f"stand-in engine on {server.url}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(run())


def _api_key(args: list[str], dialect: str | None) -> str | None:
    """`--api-key K` as both engines take it; vLLM also reads VLLM_API_KEY from its
    environment (vllm/entrypoints/serve/middleware/register.py:32-33 in 0.33.0)."""
    if "--api-key" in args:
        return args[args.index("--api-key") + 1]
    return os.environ.get("VLLM_API_KEY") if dialect == "vllm" else None


def _mortal_answer():
    die_after = int(os.environ.get("STANDIN_DIE_AFTER", "0"))
    sig = signal.Signals[os.environ.get("STANDIN_SIGNAL", "SIGILL")]
    once = os.environ.get("STANDIN_DIE_ONCE")
    served = 0

    def answer(body):
        nonlocal served
        served += 1
        if die_after and served >= die_after and not (once and Path(once).exists()):
            if once:
                Path(once).touch()
            print("stand-in: dying as a miscompiled binary would", flush=True)
            os.kill(os.getpid(), sig)
        return echo_answer(body)

    return answer


if __name__ == "__main__":
    main(sys.argv[1:])
