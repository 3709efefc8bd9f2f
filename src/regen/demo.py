"""The walkthrough's files, shipped in the package: `regen demo` writes them out, so that a
user with regen installed can follow the README from any fresh directory (the recipe, its seven
small sources, a prompt file and the Grafana dashboard)."""

from __future__ import annotations

from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

from regen.errors import ConfigError

SHIPPED = "demo_files"  # in the package: a link to the repository's examples/
# examples/ops/ (systemd units, a Slurm script, a Kubernetes Job) is for operators, not the
# walkthrough: not in the wheel (pyproject's package-data), and not written by `regen demo`
NOT_SHIPPED = {"ops"}


def shipped_files() -> list[tuple[str, Traversable]]:
    """(relative name, file) of every shipped example, in a stable order."""
    root = resources.files("regen") / SHIPPED
    found: list[tuple[str, Traversable]] = []
    pending: list[tuple[str, Traversable]] = [("", root)]
    while pending:
        prefix, folder = pending.pop()
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            name = f"{prefix}{entry.name}"
            if name in NOT_SHIPPED:
                continue
            if entry.is_dir():
                pending.append((f"{name}/", entry))
            else:
                found.append((name, entry))
    return sorted(found)


def write_examples(dest: Path) -> list[Path]:
    """Copy the examples into `dest` (created); a file already there is never overwritten."""
    files = shipped_files()
    clashing = [name for name, _ in files if (dest / name).exists()]
    if clashing:
        raise ConfigError(
            f"{dest} already holds {', '.join(clashing[:3])}",
            hint="give `regen demo` another directory, or remove those files",
        )
    written = []
    for name, source in files:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
        written.append(target)
    return written


def top_names(written: list[Path], dest: Path) -> list[str]:
    """What `dest` holds now, one name per file or folder (`prepare/`), in the order written."""
    names = []
    for path in written:
        first, *rest = path.relative_to(dest).parts
        names.append(f"{first}/" if rest else first)
    return list(dict.fromkeys(names))
