"""The command line of one server for each engine regen can start.

Each engine is run as `PYTHON -m MODULE ...` with the Python the user chose, so "is the engine
installed?" is one question with one answer: can that Python import it. Extra arguments after
`--` on regen's command line go to every server unchanged (speculative decoding, reasoning
parser, memory fraction...).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Flags:
    """How an engine spells the options regen sets."""

    model: str
    served_name: str
    context: str
    tensor_parallel: str = ""  # GPU engines only


@dataclass(frozen=True)
class Engine:
    name: str
    module: str  # run with `python -m`
    import_check: str  # what must import in that Python
    uses_gpus: bool
    flags: Flags

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
        args = [python, "-m", self.module, flags.model, model, flags.served_name, served_name,
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
    ),
    "vllm": Engine(
        "vllm", "vllm.entrypoints.openai.api_server", "vllm", uses_gpus=True,
        flags=Flags("--model", "--served-model-name", "--max-model-len", "--tensor-parallel-size"),
    ),
    "llamacpp": Engine(
        "llamacpp", "llama_cpp.server", "llama_cpp.server", uses_gpus=False,
        flags=Flags("--model", "--model_alias", "--n_ctx"),
    ),
}  # fmt: skip
