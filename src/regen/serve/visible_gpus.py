"""The GPUs this process may use: all that nvidia-smi lists, or those a scheduler gave it.

Slurm (`--gres=gpu:2`), a Kubernetes device plugin or a shared workstation's wrapper hands a
job its GPUs in CUDA_VISIBLE_DEVICES, as nvidia-smi indices or UUIDs. nvidia-smi itself
ignores the variable and lists every GPU of the machine, so the two are matched here: an
index by nvidia-smi's index, a `GPU-...` UUID (or a unique prefix of one, as CUDA takes it)
by nvidia-smi's uuid. Each server is then given its GPUs under the names the scheduler used:
a server's CUDA_VISIBLE_DEVICES replaces the inherited one, so it must name them the way the
machine does, never as positions in the inherited list.

CUDA reads the list up to the first entry that names no device; a negative index (`-1`, the
usual way to hide every GPU) ends it here as it does there. Any other entry that matches no
GPU nvidia-smi lists (a MIG instance, a GPU of another machine) is refused: regen cannot
place a server on what it cannot see.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from regen.errors import ConfigError
from regen.serve.gpus import Gpu

VARIABLE = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class Visible:
    gpus: list[Gpu]  # the GPUs this process may use, in the order the variable lists them
    names: dict[int, str]  # nvidia-smi index -> how a server's CUDA_VISIBLE_DEVICES names it
    inherited: str | None = None  # the variable as this process got it; None: unset

    def name_of(self, group: list[int]) -> str:
        """A server's CUDA_VISIBLE_DEVICES for its group of GPUs."""
        return ",".join(self.names[i] for i in group)


def visible_gpus(present: list[Gpu], env: Mapping[str, str]) -> Visible:
    """The GPUs of `present` (what nvidia-smi lists) that `env` lets this process use."""
    inherited = env.get(VARIABLE)
    if inherited is None:
        return Visible(present, {g.index: str(g.index) for g in present})
    chosen: list[Gpu] = []
    names: dict[int, str] = {}
    for entry in (e.strip() for e in inherited.split(",")):
        if _hides_the_rest(entry):
            break
        gpu = _match(entry, present, inherited)
        if gpu.index not in names:
            chosen.append(gpu)
            names[gpu.index] = entry
    if not chosen:
        raise ConfigError(
            f"{VARIABLE}={inherited!r} in the environment lets this job use no GPU",
            hint=f"ask the scheduler for GPUs (Slurm: --gres=gpu:N), or unset {VARIABLE}",
        )
    return Visible(chosen, names, inherited)


def _hides_the_rest(entry: str) -> bool:
    return entry == "" or (entry.startswith("-") and entry[1:].isdigit())


def _match(entry: str, present: list[Gpu], inherited: str) -> Gpu:
    if entry.isdigit():
        found = [g for g in present if g.index == int(entry)]
    elif entry.startswith("GPU-"):
        found = [g for g in present if g.uuid.startswith(entry)]
    else:
        found = []
    if len(found) == 1:
        return found[0]
    listed = ", ".join(f"{g.index} ({g.uuid})" for g in present) or "none"
    raise ConfigError(
        f"{VARIABLE}={inherited!r} in the environment names {entry!r}, which is no single "
        f"GPU nvidia-smi lists here (it lists {listed})",
        hint=f"fix {VARIABLE} (indices or GPU-... UUIDs of this machine; regen serve does "
        "not place servers on MIG instances), or unset it to use every GPU",
    )


def not_visible(wanted: list[int], visible: Visible) -> None:
    """Refuse --gpus that the inherited CUDA_VISIBLE_DEVICES does not let this job use."""
    allowed = {g.index for g in visible.gpus}
    outside = [i for i in wanted if i not in allowed]
    if outside and visible.inherited is not None:
        mine = ",".join(str(g.index) for g in visible.gpus)
        raise ConfigError(
            f"--gpus names GPU(s) {outside}, but {VARIABLE}={visible.inherited} in the "
            f"environment lets this job use only GPU(s) {mine} (nvidia-smi's numbers)",
            hint="drop --gpus to use every GPU the job was given, or choose among " + mine,
        )
