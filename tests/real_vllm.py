"""Real vLLM servers (the CPU build in .venv-vllm, the embedded SmolLM2) for the whole test
run, each fleet started once by `regen serve --engine vllm --model embedded --device cpu
--restart-dead`, as a user starts one, and stopped at the end with `regen serve --stop`, as a
user stops one (anything left running fails the session, and is killed by pid).

    real_vllm          the shared fleet: one replica, an API key (VLLM_API_KEY), chunked
                       prefill off as regen serves it on CPU, and n-gram speculative decoding
                       (SPEC: regen serve adds the per-request acceptance flag itself)
    real_vllm_pair     the shared fleet and one with chunked prefill on (the seeded crash)
    real_vllm_qwen3_style  a fleet with a Qwen3-style template that keeps the reasoning of
                       the current tool loop, and a reasoning parser that makes every answer
                       reasoning (both are server flags)
    real_vllm_fleets   the factory: `fleets.start("name", *engine_args)` for a fleet of one's
                       own; fleets started in the same test session share nothing

Every fleet here runs `--enforce-eager`: vLLM 0.32's CPU build fails to load its own compile
cache ("'function' object has no attribute 'finalize_loading'") and compiles the model again
at every start, 1.5 to 4 minutes on two cores, restarts included; eager, a start takes about
40 s, and what the tests check (regen's side of the wire) is the same.

A start is one to two minutes of the suite's two cores, most of it one core's imports. So the
session fleets the collected tests will ask for start as warm-ups (tests/warmups.py) at the end
of collection, the pair first, and the modules that use a fleet run last: by then the fleets
answer, their starts overlapped by the tests before (conftest, `real_vllm_modules_last`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import warmups
from regen.serve.control import is_our_process
from regen.serve.fleetfile import FleetFile

VLLM_PYTHON = Path(__file__).parent.parent / ".venv-vllm" / "bin" / "python"
KEY = "sk-real-vllm-test-4242"
START_TIMEOUT = 900.0
K = 3  # draft tokens per step of the shared fleet's n-gram speculation
SPEC = {"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_max": 3}
EAGER = "--enforce-eager"  # see above: the start, not the engine, is what it changes
TEMPLATES = Path(__file__).parent / "fixtures" / "templates"
# The fleets the session fixtures serve, by name, with their engine arguments.
PAIR = {
    "shared": ("--speculative-config", json.dumps(SPEC)),
    "chunked": ("--enable-chunked-prefill", "--max-num-batched-tokens", "256"),
}
QWEN3_STYLE_ARGS = (
    "--chat-template",
    str(TEMPLATES / "qwen3_style.jinja"),
    "--reasoning-parser-plugin",
    str(TEMPLATES / "all_reasoning.py"),
    "--reasoning-parser",
    "all_reasoning",
)
QWEN3_STYLE = {"qwen3-style": QWEN3_STYLE_ARGS}
# The fixtures of the fleets (a module with a test on one runs last).
FLEET_FIXTURES = {"real_vllm", "real_vllm_pair", "real_vllm_qwen3_style", "real_vllm_fleets"}


@dataclass
class RealFleet:
    """A `regen serve --restart-dead` in the foreground and the FLEET.json it keeps true."""

    name: str
    fleet_path: Path
    out_path: Path  # regen serve's own output (its changes: exits, causes, restarts)
    process: subprocess.Popen
    env: dict[str, str] = field(repr=False)

    @property
    def fleet(self) -> FleetFile:
        return FleetFile.read(self.fleet_path)

    @property
    def url(self) -> str:
        return self.fleet.servers[0].url

    @property
    def model(self) -> str:
        return self.fleet.served_model_name

    def output(self) -> str:
        return self.out_path.read_text(errors="replace")

    def wait_for(self, text: str, count: int = 1, timeout: float = START_TIMEOUT) -> str:
        """Until regen serve has printed `text` `count` times (or has exited)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.output()
            if out.count(text) >= count:
                return out
            if self.process.poll() is not None:
                raise AssertionError(f"regen serve {self.name} exited:\n{out}")
            time.sleep(1)
        raise AssertionError(f"no {text!r} x{count} from regen serve {self.name}:\n{self.output()}")

    def metrics(self) -> str:
        """The server's /metrics text."""
        request = urllib.request.Request(
            self.url + "/metrics", headers={"Authorization": f"Bearer {KEY}"}
        )
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.read().decode()

    def metric(self, name: str) -> float:
        """A gauge or counter of the server's /metrics (summed over its label sets)."""
        values = [
            float(line.rsplit(" ", 1)[1])
            for line in self.metrics().splitlines()
            if line.startswith(name + "{") or line.startswith(name + " ")
        ]
        if not values:
            raise AssertionError(f"{name} is not on {self.url}/metrics")
        return sum(values)

    def stop(self) -> None:
        """`regen serve --stop FLEET.json`, as a user stops a fleet: the supervisor and every
        server must end (what is left fails the session); then every pid the file named is
        killed by the test itself, so that a bug in --stop never leaks a server."""
        pids = [s.pid for s in self.fleet.servers] if self.fleet_path.exists() else []
        left: list[str] = []
        if pids and self.process.poll() is None:
            done = subprocess.run(
                [sys.executable, "-m", "regen", "serve", "--stop", str(self.fleet_path)],
                capture_output=True,
                text=True,
                timeout=180,
                env=self.env,
            )
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                left.append(f"the supervisor ({done.stdout.strip()})")
            left += [s.name for s in self.fleet.servers if is_our_process(s)]
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        for pid in pids + [s.pid for s in self.fleet.servers if self.fleet_path.exists()]:
            with contextlib.suppress(ProcessLookupError, PermissionError, TypeError):
                os.killpg(pid, signal.SIGKILL)
        if left:
            raise AssertionError(f"regen serve --stop left running in fleet {self.name}: {left}")


class Fleets:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root  # made at the first launch: a run without real vLLM makes none
        self.started: list[RealFleet] = []

    def launch(
        self, name: str, *engine_args: str, replicas: int = 1, env: dict[str, str] | None = None
    ) -> RealFleet:
        """Start `regen serve` (returns at once; `ready()` waits)."""
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="regen-real-vllm-"))
        folder = self.root / name
        folder.mkdir(parents=True)
        env = {k: v for k, v in (env or os.environ).items() if not k.startswith("OPENAI_")}
        env["VLLM_API_KEY"] = KEY
        command = [
            sys.executable,
            "-m",
            "regen",
            "serve",
            "--engine",
            "vllm",
            "--model",
            "embedded",
            "--device",
            "cpu",
            "--replicas",
            str(replicas),
            "--python",
            str(VLLM_PYTHON),
            "--kv-cache-gib",
            "1",
            "--context",
            "2048",
            "--fleet",
            str(folder / "FLEET.json"),
            "--startup-timeout",
            str(START_TIMEOUT),
            "--restart-dead",
            "--",
            EAGER,
            *engine_args,
        ]
        out = folder / "serve.out"
        with open(out, "wb") as sink:
            process = subprocess.Popen(
                command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
            )
        fleet = RealFleet(name, folder / "FLEET.json", out, process, env)
        self.started.append(fleet)
        return fleet

    def ready(self, fleet: RealFleet) -> RealFleet:
        fleet.wait_for("server(s) answer; wrote")
        assert all(is_our_process(s) for s in fleet.fleet.servers)
        return fleet

    def start(self, name: str, *engine_args: str, replicas: int = 1) -> RealFleet:
        return self.ready(self.launch(name, *engine_args, replicas=replicas))

    def start_many(
        self, specs: dict[str, tuple[str, ...]], env: dict[str, str] | None = None
    ) -> dict[str, RealFleet]:
        """The fleets of `specs`, started together."""
        launched = {name: self.launch(name, *args, env=env) for name, args in specs.items()}
        return {name: self.ready(fleet) for name, fleet in launched.items()}

    def stop_all(self) -> None:
        """Every fleet is stopped, even after one that --stop left running (said at the end)."""
        warmups.stop()  # a start under way ends first
        failed: list[AssertionError] = []
        while self.started:
            try:
                self.started.pop().stop()
            except AssertionError as err:
                failed.append(err)
        if failed:
            raise AssertionError("; ".join(map(str, failed)))


SESSION_FLEETS = Fleets()  # the session fixtures' fleets, prelaunched or not


def fixtures_asked_for(items: list[pytest.Item]) -> set[str]:
    """The fixtures the items use, with the pair for those marked as asking at run time."""
    names = {name for item in items for name in item.fixturenames}
    marked = any(item.get_closest_marker("real_vllm") for item in items)
    return names | {"real_vllm_pair"} if marked else names


# The session fleets start as warm-ups (tests/warmups.py), the pair first.
warmups.register("real_vllm_pair", lambda env: SESSION_FLEETS.start_many(PAIR, env))
warmups.register(
    "real_vllm_qwen3_style", lambda env: SESSION_FLEETS.start_many(QWEN3_STYLE, env)["qwen3-style"]
)


def real_vllm_modules_last(items: list[pytest.Item]) -> None:
    """Reorder `items` in place: the modules with a test on a session fleet run last, in
    their order, so that their fleets started while the others ran. Whole modules move,
    so that no module's fixtures are set up twice."""
    late = {item.module for item in items if _uses_a_fleet(item)}
    items.sort(key=lambda item: item.module in late)


def _uses_a_fleet(item: pytest.Item) -> bool:
    marked = item.get_closest_marker("real_vllm") is not None
    return marked or bool(FLEET_FIXTURES & set(item.fixturenames))


@pytest.fixture(scope="session")
def real_vllm_fleets() -> Iterator[Fleets]:
    try:
        yield SESSION_FLEETS
    finally:
        SESSION_FLEETS.stop_all()


@pytest.fixture(scope="session")
def real_vllm_pair(real_vllm_fleets: Fleets) -> dict[str, RealFleet]:
    """The shared fleet and one with chunked prefill back on (the seeded crash)."""
    return warmups.result("real_vllm_pair")


@pytest.fixture(scope="session")
def real_vllm(real_vllm_pair: dict[str, RealFleet]) -> RealFleet:
    return real_vllm_pair["shared"]


@pytest.fixture(scope="session")
def real_vllm_qwen3_style(real_vllm_fleets: Fleets) -> RealFleet:
    return warmups.result("real_vllm_qwen3_style")


def json_post(
    url: str, body: dict, key: str | None = KEY, timeout: float = 120
) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")
