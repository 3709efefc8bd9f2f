"""The command line of one server for each engine regen can start.

Each engine is run as `PYTHON -m MODULE ...` with the Python the user chose, so "is the engine
installed?" is one question with one answer: can that Python import it. Extra arguments after
`--` on regen's command line go to every server unchanged (speculative decoding, reasoning
parser, memory fraction...).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Engine:
    name: str
    module: str  # run with `python -m`
    import_check: str  # what must import in that Python
    uses_gpus: bool

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
        head = [python, "-m", self.module]
        if self.name == "sglang":
            args = ["--model-path", model, "--served-model-name", served_name,
                    "--host", host, "--port", str(port)]  # fmt: skip
            if gpus_per_server > 1:
                args += ["--tp-size", str(gpus_per_server)]
            if context:
                args += ["--context-length", str(context)]
        elif self.name == "vllm":
            args = ["--model", model, "--served-model-name", served_name,
                    "--host", host, "--port", str(port)]  # fmt: skip
            if gpus_per_server > 1:
                args += ["--tensor-parallel-size", str(gpus_per_server)]
            if context:
                args += ["--max-model-len", str(context)]
        else:
            args = ["--model", model, "--model_alias", served_name,
                    "--host", host, "--port", str(port),
                    "--n_ctx", str(context or 2048), "--n_threads", str(threads),
                    "--verbose", "False"]  # fmt: skip
        return [*head, *args, *extra]


ENGINES = {
    "sglang": Engine("sglang", "sglang.launch_server", "sglang", uses_gpus=True),
    "vllm": Engine("vllm", "vllm.entrypoints.openai.api_server", "vllm", uses_gpus=True),
    "llamacpp": Engine("llamacpp", "llama_cpp.server", "llama_cpp.server", uses_gpus=False),
}
