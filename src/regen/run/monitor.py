"""What a run shows of itself while it works: every few seconds the progress snapshot (for
`regen status`, the live display and metrics), sealing of shards by age, and the quality
alarms (each told once per episode; with --abort-on-degenerate, they stop the run)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regen.fleet.dispatch import Fleet
from regen.fleet.server import Server
from regen.run.progress import RunStats, snapshot, write_snapshot
from regen.run.quality import QualityMonitor
from regen.run.recorder import Recorder
from regen.run.stop import Stop, StopReason

log = logging.getLogger("regen.run")

Reporter = Callable[[dict[str, Any]], None]


@dataclass
class Watched:
    """What the monitor looks at, owned by the run."""

    stats: RunStats
    servers: list[Server]
    fleet: Fleet
    quality: QualityMonitor
    stop: Stop
    recorder: Recorder


class Monitor:
    def __init__(
        self,
        watched: Watched,
        progress_path: Path,
        where: str,
        report: Reporter,
        event: Callable[[str], None],
        request_stop: Callable[[StopReason, str], None],
        abort_on_degenerate: bool,
    ) -> None:
        self.w = watched
        self.progress_path, self.where = progress_path, where
        self.report, self.event, self.request_stop = report, event, request_stop
        self.abort_on_degenerate = abort_on_degenerate
        self.model = ""
        self.shard: dict[str, Any] | None = None  # the part this process does, and why
        self.limit: int | None = None  # --limit: a trial of the first N lines
        self._alarms_on: set[str] = set()

    async def loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.w.recorder.tick()
            self.w.stats.tick()
            self.check_quality()
            self.write_snapshot()

    def check_quality(self) -> None:
        """Warn once per alarm episode; with --abort-on-degenerate, stop dispatching."""
        alarms = self.w.quality.alarms()
        for alarm in alarms:
            if alarm.name not in self._alarms_on:
                self.event(f"QUALITY ALARM {alarm}")
        self._alarms_on = {a.name for a in alarms}
        if alarms and self.abort_on_degenerate:
            self.request_stop(StopReason.DEGENERATE, "--abort-on-degenerate: stopping the run")

    def write_snapshot(self) -> None:
        down_since = self.w.fleet.all_down_since
        reason = self.w.stop.reason
        extra = {
            "output_dir": self.where,
            "model": self.model,
            "shard": self.shard,
            "limit": self.limit,
            "all_servers_down_for_s": (
                round(time.monotonic() - down_since, 1) if down_since is not None else None
            ),
            "stopping": reason.label if reason else None,
            "end_game": self.w.fleet.endgame.snapshot(),  # the last one is the summary's
        }
        snap = snapshot(self.w.stats, self.w.servers, self.w.quality, extra)
        self.w.stats.end_game = snap["end_game"]
        try:
            write_snapshot(self.progress_path, snap)
        except OSError as exc:  # a full disk: the shard writes will stop the run and say so
            log.warning("cannot write %s: %s", self.progress_path, exc.strerror or exc)
        self.report(snap)
