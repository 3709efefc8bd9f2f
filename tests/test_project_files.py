"""The project's own entry points point at files that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_every_script_the_makefile_runs_exists():
    makefile = (ROOT / "Makefile").read_text()
    paths = re.findall(r"(?:python|^\t)\s*((?:bench|scripts)/[\w./-]+)", makefile, re.M)
    assert any(p.startswith("bench/") for p in paths), paths
    for path in paths:
        assert (ROOT / path).is_file(), f"the Makefile runs {path}, which does not exist"
