"""One inference server process that regen started: start it, know when it is ready, notice
at once when it exits (and why), stop it by its pid.

Ready means it answered a real one-token chat completion, not only `/v1/models`: a llama.cpp
build with instructions the CPU does not run lists its model happily and dies with SIGILL on
the first token.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from regen.errors import ConfigError

LOG_TAIL_LINES = 20
CAUSE_LINES = 2000  # a dying vLLM writes its cause, then a traceback per request in flight
# "SomeError: what happened" or an engine-core death, as a Python server logs them
# (at the start of a line or after a logger's "[file.py:12] "; not inside a warning's text)
_CAUSE = re.compile(r"(?:^|\] )(?:[\w.]+\.)?(\w+(?:Error|Exception)): (.+)|(died unexpectedly)")
# Errors that only say that the engine is gone, not why.
_AFTERMATH = ("EngineDeadError", "CancelledError", "EngineGenerateError")
START_MARK = "--- regen: starting "
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class LaunchSpec:
    """Everything needed to (re)start one server, identically, any number of times."""

    name: str  # e.g. "server-0"
    command: list[str]
    env: dict[str, str]  # added to the environment regen runs in
    port: int
    log_path: Path
    model_name: str  # what /v1/chat/completions is asked for in the readiness check
    gpus: list[int] = field(default_factory=list)
    host: str = "127.0.0.1"  # where clients reach it
    api_key: str | None = field(default=None, repr=False)  # sent with every check; never saved

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


@dataclass(frozen=True)
class ExitReport:
    """How a server process ended, in words a user can act on."""

    name: str
    returncode: int
    log_path: Path
    log_tail: list[str]
    cause: str | None = None  # the line of its log that says why (see `find_cause`)

    @property
    def how(self) -> str:
        if self.returncode < 0:
            try:
                return f"killed by {signal.Signals(-self.returncode).name}"
            except ValueError:
                return f"killed by signal {-self.returncode}"
        return f"exited with code {self.returncode}"

    @property
    def fix(self) -> str:
        sig = -self.returncode
        if sig == signal.SIGILL:
            return (
                "the server binary uses CPU instructions this machine does not run: rebuild "
                "llama-cpp-python portably with scripts/bootstrap.sh, or by hand with "
                'CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" '
                "pip install --force-reinstall --no-cache-dir llama-cpp-python"
            )
        if self.returncode == 0:
            return (
                "the launcher exited 0 without serving: it may be an entry point this engine "
                "version no longer runs (see the log); check the engine's version and --python"
            )
        if sig == signal.SIGKILL:
            return (
                "something killed it with SIGKILL, often the kernel's out-of-memory killer "
                "(see `dmesg`): lower the context size or the number of servers per machine"
            )
        return f"read the server's log for the cause: {self.log_path}"

    @property
    def summary(self) -> str:
        why = f": {self.cause}" if self.cause else ""
        return f"server {self.name} {self.how}{why} (log: {self.log_path})"

    def describe(self) -> str:
        tail = "\n    ".join(self.log_tail) if self.log_tail else "(the log is empty)"
        return f"server {self.name} {self.how}; last lines of {self.log_path}:\n    {tail}"


class ServerProcess:
    """A started server. `tied_to_parent` makes the kernel kill it when regen dies (Linux),
    so a `kill -9` of regen never leaves an orphan holding a port and memory."""

    def __init__(self, spec: LaunchSpec, tied_to_parent: bool) -> None:
        self.spec = spec
        self.tied_to_parent = tied_to_parent
        self.process: subprocess.Popen | None = None
        self.restarts = 0
        self._reaped = False

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def start(self) -> None:
        """Start the process (without waiting for readiness). Must be called from a thread that
        lives as long as the server: the parent-death signal follows the thread that forked."""
        self.spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._reaped = False
        with open(self.spec.log_path, "ab") as log:
            log.write(f"{START_MARK}{' '.join(self.spec.command)}\n".encode())
            log.flush()
            try:
                self.process = subprocess.Popen(
                    self.spec.command,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env={**os.environ, **self.spec.env},
                    # Its own session: a Ctrl-C meant for regen's drain does not kill it first.
                    start_new_session=True,
                    preexec_fn=_die_with(os.getpid()) if self.tied_to_parent else None,
                )
            except OSError as exc:
                raise ConfigError(
                    f"cannot start server {self.spec.name}: {exc.strerror or exc} "
                    f"({self.spec.command[0]})",
                    hint="check that the engine's Python or executable exists",
                ) from exc

    def exited(self) -> ExitReport | None:
        """The exit report if the process has ended, else None. Never blocks."""
        if self.process is None or self.process.poll() is None:
            return None
        if not self._reaped:
            self._reaped = True
            kill_leftovers(self.process.pid)
        return ExitReport(
            self.spec.name,
            self.process.returncode,
            self.spec.log_path,
            self.log_tail(),
            find_cause(self.log_tail(CAUSE_LINES)),
        )

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> list[str]:
        """The last lines this incarnation wrote (the log is appended across restarts)."""
        try:
            with open(self.spec.log_path, "rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - max(64 * 1024, 256 * lines)))
                text = log.read().decode(errors="replace")
        except OSError:
            return []
        tail: deque[str] = deque(maxlen=lines)
        for line in text.splitlines():
            if line.startswith(START_MARK):
                tail.clear()
            else:
                tail.append(line.rstrip())
        return list(tail)

    def answers(self, timeout: float = 5.0) -> bool:
        """Ready: it generated one token for a trivial chat."""
        return answers_chat(self.spec.url, self.spec.model_name, timeout, self.spec.api_key)

    def terminate(self) -> None:
        """SIGTERM its process group, without waiting (`stop` waits)."""
        if self.process is not None and self.process.poll() is None:
            signal_group(self.process.pid, signal.SIGTERM)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM its process group, then SIGKILL after `grace` seconds; then what is left of
        the group (vLLM's engine core, still loading when its API server exits) is given
        `grace` seconds more and killed."""
        if self.process is None:
            return
        if self.process.poll() is None:
            signal_group(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                signal_group(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=grace)
        end_group(self.process.pid, grace)


def end_group(leader: int, grace: float) -> None:
    """Wait up to `grace` seconds for a dead leader's group to empty, then kill the rest."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(leader, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.2)
    kill_leftovers(leader)


def find_cause(lines: list[str]) -> str | None:
    """The first error line of a server's last words that says why, not only that the engine
    is dead (vLLM logs the engine core's exception first, then EngineDeadError many times)."""
    found = [m for m in map(_CAUSE.search, lines) if m is not None]
    telling = [m for m in found if m.group(1) not in _AFTERMATH]
    best = (telling or found or [None])[0]
    if best is None:
        return None
    return (f"{best.group(1)}: {best.group(2)}" if best.group(1) else best.group(3))[:300]


def answers_chat(url: str, model: str, timeout: float = 30.0, api_key: str | None = None) -> bool:
    """True when the server generates one token for a trivial chat. A 401/403 is no "not
    yet": the server wants another key, and waiting will not change that, so it is raised."""
    body = orjson.dumps(
        {"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
    )
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(url + "/v1/chat/completions", data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            data = orjson.loads(resp.read())
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise ServerWantsKey(url, exc.code, sent=bool(api_key)) from None
        return False
    except (urllib.error.URLError, OSError, orjson.JSONDecodeError):
        return False
    return isinstance(data, dict) and bool(data.get("choices"))


class ServerWantsKey(ConfigError):
    def __init__(self, url: str, status: int, sent: bool) -> None:
        which = "refuses the API key regen sent" if sent else "wants an API key and got none"
        super().__init__(
            f"{url} answers HTTP {status} to a one-token chat: it {which}",
            hint="give regen the servers' key: after `--` as `--api-key K`, or in a variable "
            "named by --api-key-env (default OPENAI_API_KEY; VLLM_API_KEY for vLLM)",
        )


def signal_group(pid: int | None, sig: signal.Signals) -> None:
    """Signal a server and its workers: it was started in its own session, so its process
    group is its own."""
    if pid is None:
        return
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def kill_leftovers(leader: int) -> None:
    """SIGKILL what is left of a dead server's process group: vLLM's engine-core process
    outlives an API server killed with -9, holding its memory (and, on a GPU, the GPU). The
    group's id is the dead leader's pid, which the kernel does not reuse while the group has
    members, so only that server's own children are hit."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(leader, signal.SIGKILL)


# Loaded once in the parent: the child, between fork and exec, only calls it.
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def _die_with(parent_pid: int):
    """A pre-exec hook for the child: the kernel sends it SIGKILL when the parent thread that
    started it dies (PR_SET_PDEATHSIG; Linux only, elsewhere nothing)."""

    def hook() -> None:
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent_pid:  # the parent died before prctl took effect
                os._exit(1)

    return hook
