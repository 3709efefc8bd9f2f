"""Which GPUs exist and how busy they are (from nvidia-smi), and how to split them into one
group per server. Nothing here guesses: no nvidia-smi means no GPU is assumed."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from regen.errors import ConfigError

QUERY = "index,uuid,memory.used,memory.total"


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    memory_used_mib: int
    memory_total_mib: int

    @property
    def used_fraction(self) -> float:
        return self.memory_used_mib / self.memory_total_mib if self.memory_total_mib else 0.0


def parse_gpu_list(text: str) -> list[int]:
    """`0-7`, `0,1,4-5` -> sorted indices; a clear error for anything else."""
    indices: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            start, end = int(lo), int(hi or lo)
            if end < start:
                raise ValueError
            indices.update(range(start, end + 1))
    except ValueError:
        raise ConfigError(
            f"--gpus {text!r} is not a GPU list", hint="write it like 0-7 or 0,1,2,3"
        ) from None
    return sorted(indices)


def discover() -> list[Gpu]:
    """The GPUs nvidia-smi reports. Raises ConfigError, with nvidia-smi's own words, when it is
    missing or fails (a driver that does not match the kernel module, no device visible)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise ConfigError(
            "nvidia-smi is not on PATH, so no GPU can be checked",
            hint="install the NVIDIA driver (or add it to PATH); for CPU servers use "
            "--engine llamacpp --replicas N",
        )
    try:
        done = subprocess.run(
            [exe, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(
            "nvidia-smi did not answer within 30 s", hint="check the driver"
        ) from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip() or f"exit code {done.returncode}"
        raise ConfigError(f"nvidia-smi failed: {said}", hint="check the NVIDIA driver")
    return [_parse_row(row) for row in done.stdout.splitlines() if row.strip()]


def _parse_row(row: str) -> Gpu:
    try:
        index, uuid, used, total = (field.strip() for field in row.split(","))
        return Gpu(int(index), uuid, int(float(used)), int(float(total)))
    except ValueError:
        raise ConfigError(f"cannot read nvidia-smi's line {row!r}") from None


def check_requested(
    wanted: list[int], present: list[Gpu], max_used_fraction: float
) -> dict[int, Gpu]:
    """The requested GPUs, each present and free enough, or one error that lists every
    problem at once."""
    by_index = {gpu.index: gpu for gpu in present}
    missing = [i for i in wanted if i not in by_index]
    if missing:
        raise ConfigError(
            f"GPU(s) {missing} do not exist; nvidia-smi sees {sorted(by_index) or 'none'}",
            hint="fix --gpus (a container may see fewer GPUs than the host: check "
            "CUDA_VISIBLE_DEVICES and the container's --gpus)",
        )
    busy = [by_index[i] for i in wanted if by_index[i].used_fraction > max_used_fraction]
    if busy:
        lines = ", ".join(
            f"GPU {g.index} ({g.memory_used_mib}/{g.memory_total_mib} MiB used)" for g in busy
        )
        raise ConfigError(
            f"busy: {lines}",
            hint="stop what runs there (nvidia-smi lists it), choose other --gpus, or raise "
            "--max-gpu-memory-used",
        )
    return {i: by_index[i] for i in wanted}


def split_groups(gpus: list[int], per_server: int) -> list[list[int]]:
    if per_server < 1 or len(gpus) % per_server:
        raise ConfigError(
            f"{len(gpus)} GPU(s) cannot be split into groups of {per_server}",
            hint="make --gpus a multiple of --gpus-per-server",
        )
    return [gpus[i : i + per_server] for i in range(0, len(gpus), per_server)]
