"""Where the benchmarks write (`.bench/` at the root of this checkout) and what they record
of the machine that ran them."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / ".bench"


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
