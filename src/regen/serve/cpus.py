"""CPU servers of an engine that runs on CPU cores it is told (vLLM's CPU build): which cores
each replica gets, and how much memory its KV cache takes.

vLLM binds its OpenMP threads to the cores in VLLM_CPU_OMP_THREADS_BIND ("0-3", "0,2";
vllm/envs.py:894 in 0.32.0) and sizes its KV cache by VLLM_CPU_KVCACHE_SPACE, in GiB
(vllm/platforms/cpu.py:324-327). Left to itself each replica binds every core ("auto") and
takes a share of all memory, so N replicas on one machine would fight over the same cores:
regen gives each replica a disjoint range of the cores this process may run on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from regen.errors import ConfigError

THREADS_BIND = "VLLM_CPU_OMP_THREADS_BIND"
KV_CACHE = "VLLM_CPU_KVCACHE_SPACE"
DEFAULT_KV_GIB = 4  # vLLM's own default for the legacy variable (vllm/envs.py:886)


def usable_cores() -> list[int]:
    """The cores this process may run on (a container or `taskset` may allow fewer)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def split_cores(cores: list[int], replicas: int, threads: int) -> list[list[int]]:
    """`replicas` disjoint groups of `threads` cores, in order."""
    if replicas < 1 or threads < 1:
        raise ConfigError("--replicas and --threads must be at least 1")
    if replicas * threads > len(cores):
        raise ConfigError(
            f"{replicas} replica(s) of {threads} core(s) need {replicas * threads} cores; "
            f"regen may use {len(cores)} here ({bind_string(cores)})",
            hint="lower --replicas or --threads (the cores are split between the replicas)",
        )
    return [cores[k * threads : (k + 1) * threads] for k in range(replicas)]


def bind_string(cores: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2,5", as VLLM_CPU_OMP_THREADS_BIND reads it."""
    parts: list[str] = []
    start = prev = None
    for core in [*cores, None]:
        if core is not None and prev is not None and core == prev + 1:
            prev = core
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = core
    return ",".join(parts)


def kv_cache_gib(given: int | None, replicas: int, env: Mapping[str, str] | None = None) -> str:
    """--kv-cache-gib, else VLLM_CPU_KVCACHE_SPACE from regen's environment, else 4 GiB cut
    so that every replica's cache fits in half of the memory now available."""
    env = os.environ if env is None else env
    if given is not None:
        if given < 1:
            raise ConfigError("--kv-cache-gib must be at least 1")
        return str(given)
    if env.get(KV_CACHE):
        return env[KV_CACHE]
    available = _available_gib()
    fits = int(available / 2 / max(1, replicas)) if available else DEFAULT_KV_GIB
    return str(max(1, min(DEFAULT_KV_GIB, fits)))


def _available_gib() -> float | None:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / (1 << 20)
    except OSError:
        return None
    return None


def cpu_env(cores: list[int], kv_gib: str) -> dict[str, str]:
    return {THREADS_BIND: bind_string(cores), KV_CACHE: kv_gib}
