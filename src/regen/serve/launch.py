"""Bring up a fleet: preflight (engine importable, GPUs present and free or CPU cores enough,
ports free, model there), one server per GPU group or CPU replica, each with its own log, then
wait until every one answers a real completion. Used by `regen serve` and by `regen generate`'s
embedded model.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from regen.errors import ConfigError
from regen.serve import cpus
from regen.serve import gpus as gpu_mod
from regen.serve.auth import serve_key
from regen.serve.engine_python import check_importable, distribution_found
from regen.serve.engines import ENGINES, Device, Engine, ServerArgs
from regen.serve.fleetfile import FleetFile, FleetServer, speculative_config
from regen.serve.process import LaunchSpec, ServerProcess
from regen.serve.visible_gpus import Visible, not_visible, visible_gpus


@dataclass
class ServeSpec:
    engine: str
    model: str
    log_dir: Path
    served_name: str | None = None
    gpus: list[int] | None = None  # None: every GPU the job may use (visible_gpus.py)
    gpus_per_server: int = 1
    replicas: int = 1  # CPU servers
    device: Device | None = None  # None: the engine's first (vllm, sglang: gpu; llamacpp: cpu)
    kv_cache_gib: int | None = None  # vLLM on CPU (see cpus.py)
    port_base: int | None = None  # None: any free ports
    host: str = "127.0.0.1"
    python: str = sys.executable
    threads: int = 2
    context: int | None = None
    startup_timeout: float = 600.0
    max_gpu_memory_used: float = 0.10
    copy_model_to: Path | None = None
    extra: list[str] = field(default_factory=list)
    api_key_env: str | None = None  # the variable holding the servers' key (see auth.py)


def plan_servers(spec: ServeSpec) -> list[LaunchSpec]:
    """Preflight everything, then the launch spec of every server. Raises ConfigError with the
    fix before anything is started."""
    engine = ENGINES.get(spec.engine)
    if engine is None:
        raise ConfigError(
            f"unknown engine {spec.engine!r}", hint="use one of: " + ", ".join(ENGINES)
        )
    device = engine_device(engine, spec.device)
    check_importable(spec.python, engine.import_check, engine.name)
    dist_found = engine.dist is None or distribution_found(spec.python, engine.dist)
    model = _model_path(spec)
    placements = _placements(spec, engine, device)
    ports = _ports(spec.port_base, len(placements), spec.host)
    served = spec.served_name or _default_served_name(spec.model)
    key = serve_key(spec.engine, spec.extra, spec.api_key_env)
    launches = []
    extra = cpus.seed_safe_args(spec.extra) if _cpu_vllm(engine, device) else spec.extra
    for n, ((group, env), port) in enumerate(zip(placements, ports, strict=True)):
        server = ServerArgs(
            model=model,
            served_name=served,
            host=spec.host,
            port=port,
            gpus_per_server=spec.gpus_per_server,
            threads=spec.threads,
            context=spec.context,
            extra=extra,
        )
        command = engine.command(spec.python, server, device, dist_found)
        launches.append(
            LaunchSpec(
                f"server-{n}",
                command,
                env=env,
                port=port,
                log_path=spec.log_dir / f"server-{n}.log",
                model_name=served,
                gpus=group,
                host=_url_host(spec.host),
                api_key=key.value,
            )
        )
    return launches


def engine_device(engine: Engine, wanted: Device | None) -> Device:
    if wanted is None:
        return engine.devices[0]
    if wanted not in engine.devices:
        raise ConfigError(
            f"regen serve runs {engine.name} on {' or '.join(engine.devices)} only, not {wanted}",
            hint="drop --device, or use --engine vllm --device cpu for CPU servers of vLLM",
        )
    return wanted


def _cpu_vllm(engine: Engine, device: Device) -> bool:
    return device == "cpu" and engine.name == "vllm"


def _placements(
    spec: ServeSpec, engine: Engine, device: Device
) -> list[tuple[list[int], dict[str, str]]]:
    """Per server: its GPUs and the environment that confines it to its share."""
    if device == "gpu":
        groups, visible = _gpu_groups(spec)
        return [(g, {"CUDA_VISIBLE_DEVICES": visible.name_of(g)}) for g in groups]
    if engine.name == "llamacpp":  # its threads are a flag (engines.py)
        return [([], {}) for _ in range(spec.replicas)]
    kv = cpus.kv_cache_gib(spec.kv_cache_gib, spec.replicas)
    groups = cpus.split_cores(cpus.usable_cores(), spec.replicas, spec.threads)
    return [([], cpus.cpu_env(cores, kv)) for cores in groups]


def start_all(launches: list[LaunchSpec], timeout: float, tied: bool) -> list[ServerProcess]:
    """Start every server at once, then wait until each answers. If one dies or never answers,
    every server started here is stopped and the error carries its exit report: a death is
    seen at once, not after the others finished loading."""
    processes = [ServerProcess(launch, tied_to_parent=tied) for launch in launches]
    try:
        for process in processes:
            process.start()
        _wait_all_ready(processes, timeout)
    except BaseException:
        for process in processes:
            process.stop()
        raise
    return processes


def _wait_all_ready(processes: list[ServerProcess], timeout: float) -> None:
    pending = list(processes)
    deadline = time.monotonic() + timeout
    while pending:
        for process in list(pending):
            report = process.exited()
            if report is not None:
                raise ConfigError(
                    "a server died while starting: " + report.describe(), hint=report.fix
                )
            if process.answers():
                pending.remove(process)
        if pending and time.monotonic() > deadline:
            names = ", ".join(f"{p.spec.name} ({p.spec.url})" for p in pending)
            raise ConfigError(
                f"{names} did not answer a chat completion within {timeout:.0f}s",
                hint=f"see the logs in {pending[0].spec.log_path.parent}; a large model may "
                "need a longer --startup-timeout",
            )
        time.sleep(0.3)


def fleet_file(spec: ServeSpec, processes: list[ServerProcess]) -> FleetFile:
    servers = [
        FleetServer(
            p.spec.name,
            p.spec.url,
            port=p.spec.port,
            pid=p.pid,
            log=str(p.spec.log_path),
            command=p.spec.command,
            gpus=p.spec.gpus,
        )
        for p in processes
    ]
    key_env = serve_key(spec.engine, spec.extra, spec.api_key_env).env
    return FleetFile(
        spec.engine,
        spec.model,
        processes[0].spec.model_name,
        servers,
        api_key_env=key_env,
        speculative_config=speculative_config(spec.extra),
    )


def _model_path(spec: ServeSpec) -> str:
    """A local path must exist; a hub name (org/name, not a path here) is passed as it is."""
    path = Path(spec.model).expanduser()
    looks_local = path.exists() or spec.model.startswith(("/", ".", "~"))
    if not looks_local:
        return spec.model
    if not path.exists():
        raise ConfigError(f"--model {spec.model} does not exist", hint="check the path")
    if spec.copy_model_to is None:
        return str(path.resolve())
    return str(copy_model(path.resolve(), spec.copy_model_to))


def copy_model(source: Path, dest_dir: Path) -> Path:
    """Copy a model (file or folder) to a faster disk such as /dev/shm. Resumable: files that
    are already there with the same size are kept; each file is written under a temporary
    name and renamed, so an interrupted copy never leaves a short file that looks whole."""
    target = dest_dir / source.name
    files = [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())
    for file in files:
        out = target if source.is_file() else target / file.relative_to(source)
        if out.exists() and out.stat().st_size == file.stat().st_size:
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        try:
            shutil.copyfile(file, partial)
        except OSError as exc:
            raise ConfigError(
                f"cannot copy the model to {dest_dir}: {exc.strerror or exc}",
                hint="free space there, or drop --copy-model-to",
            ) from exc
        os.replace(partial, out)
    return target


def _gpu_groups(spec: ServeSpec) -> tuple[list[list[int]], Visible]:
    """The GPU group of each server, among those this job may use (a scheduler's
    CUDA_VISIBLE_DEVICES, else every GPU nvidia-smi lists)."""
    present = gpu_mod.discover()
    if not present:
        raise ConfigError("nvidia-smi sees no GPU", hint="check the driver and the container")
    visible = visible_gpus(present, os.environ)
    wanted = spec.gpus if spec.gpus is not None else [g.index for g in visible.gpus]
    not_visible(wanted, visible)
    gpu_mod.check_requested(wanted, present, spec.max_gpu_memory_used)
    return gpu_mod.split_groups(wanted, spec.gpus_per_server), visible


def _ports(base: int | None, count: int, host: str) -> list[int]:
    if base is None:
        return [free_port(host) for _ in range(count)]
    ports = list(range(base, base + count))
    taken = [p for p in ports if not port_is_free(host, p)]
    if taken:
        raise ConfigError(
            f"port(s) {taken} on {host} are in use",
            hint="stop what listens there (`regen serve --stop FLEET.json` for an old fleet), "
            "or choose another --port-base",
        )
    return ports


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_is_free(host: str, port: int) -> bool:
    """Free to listen on. SO_REUSEADDR as servers set it, so that connections of a server that
    just stopped (TIME_WAIT) do not count: only a listener does."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _default_served_name(model: str) -> str:
    """A hub name as it is (what clients of that model expect); a local model by its folder
    or file name, not the machine-specific path."""
    path = Path(model.rstrip("/"))
    if path.suffix == ".gguf":
        return path.stem
    return path.name if path.expanduser().exists() else model.rstrip("/")


def _url_host(bind_host: str) -> str:
    return "127.0.0.1" if bind_host in ("0.0.0.0", "::", "") else bind_host
