"""The project's own entry points point at files that exist."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_every_script_the_makefile_runs_exists():
    makefile = (ROOT / "Makefile").read_text()
    paths = re.findall(r"(?:python|^\t)\s*((?:bench|scripts)/[\w./-]+)", makefile, re.M)
    assert any(p.startswith("bench/") for p in paths), paths
    for path in paths:
        assert (ROOT / path).is_file(), f"the Makefile runs {path}, which does not exist"


def layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    # the house: the one layers contract over the whole package (others sit inside one)
    (house,) = [c for c in contracts if c["type"] == "layers" and "containers" not in c]
    return house["layers"]


def test_the_house_is_declared_top_down_and_make_test_checks_it():
    order = [
        next(i for i, layer in enumerate(layers()) if name in layer.split(" | "))
        for name in ("regen.cli", "regen.executors", "regen.run", "regen.storage", "regen.format")
    ]
    assert order == sorted(order) and len(set(order)) == len(order)
    assert "lint-imports" in (ROOT / "Makefile").read_text().split("test:")[1].split("\n\n")[0]


def test_every_package_of_regen_has_its_place_in_the_house():
    placed = {name for layer in layers() for name in layer.split(" | ")}
    src = ROOT / "src" / "regen"
    found = {f"regen.{p.stem}" for p in src.iterdir() if p.suffix == ".py" and p.stem[0] != "_"}
    found |= {f"regen.{p.name}" for p in src.iterdir() if (p / "__init__.py").is_file()}
    assert found - placed == set(), "add these to the layers in pyproject.toml"


def test_imports_run_only_downward():
    done = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:]
