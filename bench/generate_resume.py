"""Parts 3 and 4 of bench_generate.py, memory and restart at 1M: a 1M-prompt input whose first
1M - N prompts are already finished (synthetic_output.py), the resume run's peak RSS and
time to its first request, and the start-up phases timed one by one with regen's own code
in a fresh child (`bench_generate.py --phases`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from fleet_processes import ServerSpec, fleet, fleet_stats
from generate_child import regen_cmd, run_regen, write_prompts
from generate_sizes import Sizes
from synthetic_output import regen_api, synthesize_output

GENERATE_BENCH = Path(__file__).with_name("bench_generate.py")  # its --phases runs the child


def disk_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def bench_resume(sz: Sizes, work: Path, timeout: float, keep: bool) -> dict[str, Any]:
    prompts, out = work / "resume-prompts.jsonl", work / "resume-out"
    shutil.rmtree(out, ignore_errors=True)
    finished = sz.resume_prompts - sz.resume_new
    t0 = time.monotonic()
    write_prompts(prompts, sz.resume_prompts)
    synthesize_output(prompts, out, finished, sz.shard_records, max(0, sz.record_bytes - 330))
    setup = {
        "synthesis_s": round(time.monotonic() - t0, 1),
        "prompt_file_mb": round(prompts.stat().st_size / 2**20, 1),
        "output_dir_mb": round(disk_mb(out), 1),
    }
    try:
        with fleet([ServerSpec(64, 0.0, 8)]) as urls:
            run = run_regen(regen_cmd(prompts, out, urls, 64), timeout, work / "regen.log")
            stats = fleet_stats(urls)
        phases = startup_phases(prompts, out, timeout)
    finally:
        if not keep:
            shutil.rmtree(out, ignore_errors=True)
            prompts.unlink(missing_ok=True)
    return {
        "prompts": sz.resume_prompts,
        "already_finished": finished,
        "new_generated": stats["served"],
        **setup,
        "peak_rss_mb": round(run.peak_rss_mb, 1),
        "first_request_s": round(stats["first_request_at"] - run.started_at, 2),
        "process_wall_s": round(run.wall_s, 2),
        "phases": phases,
    }


def startup_phases(prompts: Path, out: Path, timeout: float) -> dict[str, Any]:
    """Time regen's start-up steps one by one, in a fresh child (see `measure_phases`)."""
    cmd = [sys.executable, str(GENERATE_BENCH), "--phases", str(prompts), str(out)]
    done = subprocess.run(cmd, capture_output=True, timeout=timeout, check=True)
    return json.loads(done.stdout)


def measure_phases(prompts: Path, out: Path) -> dict[str, Any]:
    """Runs in the child: regen's own code for each step that precedes the first request.
    Every prompt is finished by now, so streaming covers the whole file."""
    peak = PeakRss()
    t0 = time.perf_counter()
    from regen.run import ledger
    from regen.run.intake import Intake
    from regen.run.progress import RunStats

    api = regen_api()
    OutputLayout, fingerprint = api.OutputLayout, api.fingerprint

    marks = {"import_s": time.perf_counter() - t0}
    digest = fingerprint(prompts).xxh3_128
    marks["fingerprint_s"] = time.perf_counter() - t0
    layout = OutputLayout.at(out)
    try:
        scanned = ledger.scan(layout, compress=False, input_digests=[digest])
    except TypeError:  # a baseline from before line maps
        scanned = ledger.scan(layout, compress=False)
    marks["ledger_scan_s"] = time.perf_counter() - t0
    rss_ledger = psutil.Process().memory_info().rss
    stats = RunStats(total=0, finished_before=0)
    config = api.config(prompts, out, api.Part(0, 1))
    try:  # this tree: the input group and the part
        intake = Intake(config.input, config.part, scanned, stats, on_bad_line=print)
    except AttributeError:  # a baseline from before config groups
        intake = Intake(config, scanned, stats, on_bad_line=print)
    pending = sum(1 for item in intake.items() if item is not None)
    marks["stream_s"] = time.perf_counter() - t0
    steps = dict(zip(marks, [0.0, *marks.values()], strict=False))  # start of each step
    result = {k: round(v - steps[k], 2) for k, v in marks.items()}
    result.update(
        keys_in_ledger=len(scanned.done),
        pending=pending,
        rss_after_scan_mb=round(rss_ledger / 2**20, 1),
        peak_rss_mb=round(peak.stop() / 2**20, 1),
    )
    return result


class PeakRss:
    """This process's peak RSS, sampled every 20 ms by a thread. (ru_maxrss will not do in a
    child: Linux carries the parent's figure across exec.)"""

    def __init__(self) -> None:
        self.peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._done.wait(0.02):
            self.peak = max(self.peak, me.memory_info().rss)

    def stop(self) -> int:
        self._done.set()
        self._thread.join(timeout=5)
        return max(self.peak, psutil.Process().memory_info().rss)
