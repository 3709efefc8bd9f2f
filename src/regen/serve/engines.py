"""The command line of one server for each engine regen can start.

Each engine runs from the Python the user chose, so "is the engine installed?" is one question
with one answer: can that Python import it. The launcher is the engine's own console script
beside that Python when it has one (`vllm serve`, `sglang serve`), else `PYTHON -m MODULE`:
vLLM 0.33.0 deprecates `python -m vllm.entrypoints.openai.api_server`
(vllm/entrypoints/openai/api_server.py:50-59), and SGLang 0.5.23 recommends `sglang serve`
over `python -m sglang.launch_server` (sglang/launch_server.py:70-77). Extra arguments after
`--` on regen's command line go to every server unchanged (speculative decoding, reasoning
parser, memory fraction...).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Flags:
    """How an engine spells the options regen sets."""

    model: str  # "" : the model is the first argument (`vllm serve MODEL`)
    served_name: str
    context: str
    tensor_parallel: str = ""  # GPU engines only


@dataclass(frozen=True)
class Engine:
    name: str
    module: str  # run with `python -m` when there is no console script
    import_check: str  # what must import in that Python
    uses_gpus: bool
    flags: Flags
    console: str | None = None  # the console script beside that Python, run as `NAME serve`
    module_serves: bool = False  # the module needs the `serve` subcommand too

    def launcher(self, python: str) -> list[str]:
        if self.console is not None:
            script = Path(python).parent / self.console
            if script.is_file() and os.access(script, os.X_OK):
                return [str(script), "serve"]
        return [python, "-m", self.module, *(["serve"] if self.module_serves else [])]

    def command(
        self,
        python: str,
        model: str,
        served_name: str,
        host: str,
        port: int,
        gpus_per_server: int,
        threads: int,
        context: int | None,
        extra: list[str],
    ) -> list[str]:
        flags = self.flags
        model_args = [flags.model, model] if flags.model else [model]
        args = [*self.launcher(python), *model_args, flags.served_name, served_name,
                "--host", host, "--port", str(port)]  # fmt: skip
        if self.uses_gpus:
            if gpus_per_server > 1:
                args += [flags.tensor_parallel, str(gpus_per_server)]
            if context:
                args += [flags.context, str(context)]
        else:  # llama.cpp on CPU threads, with a context that fits the embedded model
            args += [flags.context, str(context or 2048), "--n_threads", str(threads),
                     "--verbose", "False"]  # fmt: skip
        return [*args, *extra]


ENGINES = {
    "sglang": Engine(
        "sglang", "sglang.launch_server", "sglang", uses_gpus=True,
        flags=Flags("--model-path", "--served-model-name", "--context-length", "--tp-size"),
        console="sglang",
    ),
    "vllm": Engine(
        "vllm", "vllm.entrypoints.cli.main", "vllm", uses_gpus=True,
        flags=Flags("", "--served-model-name", "--max-model-len", "--tensor-parallel-size"),
        console="vllm", module_serves=True,
    ),
    "llamacpp": Engine(
        "llamacpp", "llama_cpp.server", "llama_cpp.server", uses_gpus=False,
        flags=Flags("--model", "--model_alias", "--n_ctx"),
    ),
}  # fmt: skip
