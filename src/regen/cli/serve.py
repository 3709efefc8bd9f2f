"""`regen serve`: bring up a fleet of inference servers, look at it, stop it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from regen.cli.paths import InputPath, OutputPath
from regen.errors import ConfigError
from regen.fleet.embedded import EMBEDDED_MODEL_NAME
from regen.serve.control import fleet_status, stop_fleet
from regen.serve.cpus import usable_cores
from regen.serve.engine_python import default_python
from regen.serve.fleetfile import FleetFile
from regen.serve.gpus import parse_gpu_list
from regen.serve.hf_model import embedded_model
from regen.serve.launch import ServeSpec
from regen.serve.run import serve as run_serve
from regen.serve.spec_metrics import with_spec_metrics
from regen.serve.tool_parsers import tool_parser_args

# why these two are paths on this machine, not bucket URLs
READ_BACK = "regen serve --status and --stop read it back here"
LOADED_HERE = "the servers of this machine load the model from there"


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--engine", type=click.Choice(["sglang", "vllm", "llamacpp"]), help="Server engine.")
@click.option("--model", help="Model path or hub name; `embedded`: the demo SmolLM2 GGUF.")
@click.option(
    "--fleet", "fleet_path", type=OutputPath("file", local=READ_BACK), help="FLEET.json to write."
)
@click.option(
    "--gpus",
    help="GPUs to use, as nvidia-smi numbers them, e.g. 0-7 or 0,1,2,3 [default: those "
    "$CUDA_VISIBLE_DEVICES gives this job, else all nvidia-smi sees].",
)
@click.option("--gpus-per-server", type=int, default=1, show_default=True, help="Tensor parallel.")
@click.option(
    "--device",
    type=click.Choice(["gpu", "cpu"]),
    help="Where the engine runs [vllm, sglang: gpu; llamacpp: cpu].",
)
@click.option("--replicas", type=int, default=1, show_default=True, help="CPU servers.")
@click.option("--port-base", type=int, help="First port; server k gets port-base+k [free ports].")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--served-model-name", help="Name clients request [model's name].")
@click.option(
    "--python", help="Python with the engine [vllm: ./.venv-vllm's if there; else regen's]."
)
@click.option("--threads", type=int, help="CPU cores per replica [the CPUs / replicas].")
@click.option(
    "--kv-cache-gib",
    type=int,
    help="vLLM on CPU: KV cache per replica [$VLLM_CPU_KVCACHE_SPACE, else 4 or less "
    "to fit memory].",
)
@click.option("--context", type=int, help="Context length passed to the engine.")
@click.option(
    "--copy-model-to",
    type=OutputPath("folder", local=LOADED_HERE),
    help="Copy first, e.g. /dev/shm.",
)
@click.option(
    "--max-gpu-memory-used",
    type=float,
    default=0.1,
    show_default=True,
    help="A GPU with more of its memory in use counts as busy.",
)
@click.option(
    "--startup-timeout",
    type=float,
    default=900,
    show_default=True,
    help="Seconds for every server to answer a first completion.",
)
@click.option(
    "--api-key-env",
    metavar="VAR",
    help="Variable holding the servers' API key [key after --, else VLLM_API_KEY "
    "(vLLM), else OPENAI_API_KEY].",
)
@click.option(
    "--tool-call-parser",
    metavar="NAME",
    help="vllm, sglang: how the server reads the model's tool calls (the engine's parser "
    "name; `none`: no parser) [the model family's: hermes/qwen25 for Qwen, llama3_json/"
    "llama3 for Llama 3.1, ...].",
)
@click.option("--restart-dead", is_flag=True, help="Stay in the foreground; restart dead servers.")
@click.option("--status", "status_of", type=InputPath(), help="Check a FLEET.json.")
@click.option("--stop", "stop_of", type=InputPath(), help="Stop a FLEET.json's servers.")
@click.argument("engine_args", nargs=-1, type=click.UNPROCESSED)
def serve(engine_args: tuple[str, ...], status_of, stop_of, **opts) -> None:
    """Start one server per GPU group (or CPU replica), wait until each answers, write FLEET.json.

    Arguments after `--` go to every server: regen serve --engine sglang --model M
    --fleet fleet.json -- --reasoning-parser qwen3 --mem-fraction-static 0.85
    """
    if status_of or stop_of:
        sys.exit(_status(status_of) if status_of else _stop(stop_of))
    missing = [f"--{name}" for name in ("engine", "model", "fleet_path") if not opts[name]]
    if missing:
        raise ConfigError(
            "regen serve needs " + ", ".join(m.replace("_path", "") for m in missing),
            hint="e.g. regen serve --engine vllm --model /models/M --fleet fleet.json",
        )
    model, served_name = opts["model"], opts["served_model_name"]
    python = opts["python"] or default_python(opts["engine"])
    if model == "embedded":  # the demo model, as `--tokenizer embedded` names its tokenizer
        model = str(embedded_model(opts["engine"], python, echo=click.echo))
        served_name = served_name or EMBEDDED_MODEL_NAME
    tools = tool_parser_args(opts["engine"], model, opts["tool_call_parser"], list(engine_args))
    if tools.line:
        click.echo(tools.line)
    spec = ServeSpec(
        engine=opts["engine"],
        model=model,
        served_name=served_name,
        log_dir=opts["fleet_path"].resolve().parent / "logs",
        gpus=parse_gpu_list(opts["gpus"]) if opts["gpus"] else None,
        gpus_per_server=opts["gpus_per_server"],
        replicas=opts["replicas"],
        device=opts["device"],
        kv_cache_gib=opts["kv_cache_gib"],
        port_base=opts["port_base"],
        host=opts["host"],
        python=python,
        threads=opts["threads"] or threads_per_replica(opts["replicas"]),
        context=opts["context"],
        startup_timeout=opts["startup_timeout"],
        max_gpu_memory_used=opts["max_gpu_memory_used"],
        copy_model_to=opts["copy_model_to"],
        extra=[*with_spec_metrics(opts["engine"], python, list(engine_args)), *tools.flags],
        api_key_env=opts["api_key_env"],
    )
    sys.exit(run_serve(spec, opts["fleet_path"], opts["restart_dead"], echo=click.echo))


def threads_per_replica(replicas: int) -> int:
    """The CPUs regen may use shared among the replicas: N replicas of 2 threads each on a
    4-core machine would fight over the cores and each go slower."""
    return max(1, len(usable_cores()) // max(1, replicas))


def _status(path: Path) -> int:
    fleet = FleetFile.read(path)
    states = fleet_status(fleet)
    gone = "stopped" if fleet.stopped_at else "DOWN"
    for s in states:
        word = "ok" if s.answers else ("running, not answering" if s.running else gone)
        click.echo(f"{s.name}  {s.url}  pid {s.pid}  {word}")
    down = sum(not s.answers for s in states)
    click.echo(
        f"{len(states) - down} of {len(states)} servers answer ({fleet.engine}, "
        f"{fleet.served_model_name})"
    )
    if fleet.stopped_at:
        click.echo(
            f"stopped on purpose at {fleet.stopped_at}; start it again with "
            f"`regen serve ... --fleet {path}`"
        )
    return 0 if down == 0 else 1


def _stop(path: Path) -> int:
    for line in stop_fleet(path):
        click.echo(line)
    click.echo(f"{path} now reads as stopped (regen serve --status {path})")
    return 0
