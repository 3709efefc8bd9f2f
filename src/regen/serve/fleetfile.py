"""FLEET.json: what `regen serve` started, for `regen generate --fleet`, `regen serve --status`
and `regen serve --stop`. Written atomically; read with errors that name the file."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from regen.errors import ConfigError
from regen.storage.destination import Destination

VERSION = 1


@dataclass
class FleetServer:
    name: str
    url: str
    port: int
    pid: int | None
    log: str
    command: list[str]
    gpus: list[int] = field(default_factory=list)


@dataclass
class FleetSupervisor:
    """The `regen serve --restart-dead` process that restarts the servers: `--stop` must end
    it first, or it starts again what was stopped. Its whole command line is kept so that a
    pid reused by another program is never signalled."""

    pid: int
    command: list[str]

    @classmethod
    def this_process(cls) -> FleetSupervisor:
        return cls(os.getpid(), read_cmdline(os.getpid()) or [])


def check_writable(path: Path) -> None:
    """Before any server starts: servers left unrecorded could not be stopped by --stop."""
    probe = path.with_name(f".{path.name}.probe")
    with Destination(str(path), "--fleet").mapped(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()


def utc_now() -> str:
    """When a fleet was stopped, as `--status` prints it."""
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def read_cmdline(pid: int) -> list[str] | None:
    """A live process's arguments (from /proc), or None when there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [arg.decode(errors="replace") for arg in raw.rstrip(b"\0").split(b"\0")]


@dataclass
class FleetFile:
    engine: str
    model: str
    served_model_name: str
    servers: list[FleetServer]
    version: int = VERSION
    api_key_env: str | None = None  # the variable that holds the servers' key (never the key)
    supervisor: FleetSupervisor | None = None  # with --restart-dead
    stopped_at: str | None = None  # UTC time the fleet was stopped on purpose (--stop, Ctrl-C)
    # vLLM's --speculative-config as the servers were started with it: `score --draft ngram`
    # scores the same prompt lookup (its prompt_lookup_min/max)
    speculative_config: dict[str, Any] | None = None

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.servers]

    def write(self, path: Path) -> None:
        """Atomically; a folder that cannot be written is an OutputError (exit 6)."""
        Destination(str(path), "--fleet").write_bytes(
            orjson.dumps(asdict(self), option=orjson.OPT_INDENT_2)
        )

    @classmethod
    def read(cls, path: str | Path) -> FleetFile:
        path = Path(path)
        try:
            data = orjson.loads(path.read_bytes())
            servers = [FleetServer(**s) for s in data.pop("servers")]
            supervisor = data.pop("supervisor", None)
            if supervisor is not None:
                supervisor = FleetSupervisor(**supervisor)
            fleet = cls(servers=servers, supervisor=supervisor, **data)
        except FileNotFoundError:
            raise ConfigError(
                f"fleet file {path} does not exist",
                hint="start a fleet with `regen serve ... --fleet FILE`, or pass --servers URL",
            ) from None
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(
                f"{path} is not a fleet file written by `regen serve` ({exc})",
                hint="pass the FLEET.json that `regen serve --fleet` wrote",
            ) from None
        if not fleet.servers:
            raise ConfigError(f"fleet file {path} lists no server")
        return fleet


def speculative_config(extra: list[str]) -> dict[str, Any] | None:
    """The JSON of `--speculative-config JSON` (or `=JSON`) among an engine's arguments; None
    when absent or not JSON (vLLM's dotted `--speculative-config.method` form is not read)."""
    for i, arg in enumerate(extra):
        name, eq, value = arg.partition("=")
        if name.replace("_", "-") != "--speculative-config":
            continue
        if not eq and i + 1 < len(extra):
            value = extra[i + 1]
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None
