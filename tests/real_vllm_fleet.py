"""A real vLLM fleet as a user runs one: `regen serve --engine vllm --model embedded --device
cpu --restart-dead` in the foreground (the CPU build in .venv-vllm, the embedded SmolLM2),
stopped with `regen serve --stop` as a user stops one (anything left running fails the
session, and is killed by pid).

Every fleet here runs `--enforce-eager`: vLLM 0.32's CPU build fails to load its own compile
cache ("'function' object has no attribute 'finalize_loading'") and compiles the model again
at every start, 1.5 to 4 minutes on two cores, restarts included; eager, a start takes about
40 s, and what the tests check (regen's side of the wire) is the same.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import session_tmp
import warmups
from regen.serve.control import is_our_process
from regen.serve.fleetfile import FleetFile

sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))
from vllm_cpu_fleet import serve_cmd  # the bench's `regen serve` line

VLLM_PYTHON = Path(__file__).parent.parent / ".venv-vllm" / "bin" / "python"
KEY = "sk-real-vllm-test-4242"
START_TIMEOUT = 900.0
EAGER = "--enforce-eager"  # see above: the start, not the engine, is what it changes


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
            self.root = session_tmp.folder("real-vllm-")
        folder = self.root / name
        folder.mkdir(parents=True)
        env = {k: v for k, v in (env or os.environ).items() if not k.startswith("OPENAI_")}
        env["VLLM_API_KEY"] = KEY
        env["TMPDIR"] = str(self.root)  # vLLM's own temporary files go with the fleet's
        command = serve_cmd(
            folder / "FLEET.json",
            replicas,
            VLLM_PYTHON,
            START_TIMEOUT,
            "--restart-dead",
            "--",
            EAGER,
            *engine_args,
        )
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
