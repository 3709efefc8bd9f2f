"""One session of a generation run: preflight against the fleet, the manifest and the ledger,
the dispatch with what watches it (snapshots, health, live concurrency, signals), and what
the session leaves when it ends. `regen.run.generate.generate` opens the output and the
embedded fleet and runs one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from regen import redact
from regen.errors import FleetUnavailable, RegenError
from regen.fleet.control.tuning import LiveConcurrency
from regen.fleet.dispatch import AFFINE_SCAN, Fleet
from regen.fleet.embedded import EmbeddedFleet
from regen.fleet.engine_info import fleet_engines
from regen.fleet.server import Server
from regen.format.manifest import InputFingerprint
from regen.format.sessions import last_levels
from regen.format.state import RunState
from regen.jsonio import compression
from regen.run import ledger as ledger_mod
from regen.run.config import GenerateConfig
from regen.run.conversation import RequestShape
from regen.run.dispatcher import Dispatcher
from regen.run.intake import Intake
from regen.run.monitor import Monitor, Watched
from regen.run.outcome import InputSeen, RunResult, run_result
from regen.run.preflight import preflight
from regen.run.progress import RunStats
from regen.run.quality import QualityMonitor
from regen.run.recorder import Recorder
from regen.run.session_end import record_end, running, session_end
from regen.run.session_start import check_manifest, scan_ledger
from regen.run.stop import Stop, StopReason, on_signals, signals_handled
from regen.run.tool_prompts import ToolGate
from regen.run.tool_server import ToolServer
from regen.run.worker import ItemWorker
from regen.storage import Store

log = logging.getLogger("regen.run")
ZIPPED = (".zst", ".gz")
Reporter = Callable[[dict[str, Any]], None]  # progress snapshots, to a display


class Run:
    def __init__(
        self,
        config: GenerateConfig,
        store: Store,
        urls: list[str],
        report: Reporter | None,
        embedded: EmbeddedFleet | None,
        only_lines: frozenset[int] | None,
        input_fp: InputFingerprint,
    ) -> None:
        self.config, self.only_lines, self.input_fp = config, only_lines, input_fp
        self.store = store  # where files go: a dir, or a bucket's staging
        self.layout = store.layout
        self.report = report or (lambda snap: None)
        self.embedded = embedded
        fleet = config.fleet
        key = fleet.api_key_info().value
        self.servers = [
            Server(url, fleet.per_server_concurrency, key, fleet.timeouts) for url in urls
        ]
        self.quality = QualityMonitor(config.limits.quality)
        self.stop = Stop()
        self.fatal: RegenError | None = None  # the error that stopped the run, if one did
        self.model = ""
        self.session: dict[str, Any] = {}  # this session's entry in the manifest
        self.last_levels: dict[str, int] = {}  # url -> where the last session left it
        self.stats = RunStats(total=0, finished_before=0)
        affine = fleet.dispatch == "affine"
        self.fleet = Fleet(self.servers, fleet.retry, fleet.health, self._event, affine)
        url = config.input.tool_server
        self.tool_gate: ToolGate | None = None  # made once the model is known (execute)
        self.tool_server = url and ToolServer(
            url, fleet.timeouts, fleet.retry, fleet.health.give_up_after, self._event
        )

    def _event(self, text: str) -> None:
        text = redact.scrub(text)
        log.warning(text)
        self.stats.event(text)

    def _request_stop(self, reason: StopReason, why: str | None = None) -> None:
        if self.stop.request(reason):
            self.fleet.halt()  # requests waiting for a slot or a backoff leave at once
            if self.tool_server is not None:
                self.tool_server.halt()
            if why:
                self._event(why)

    def _fail(self, err: RegenError) -> None:
        """An error that stops the whole run (not one record): keep the first, and stop."""
        self.fatal = self.fatal or err
        fleet = isinstance(err, FleetUnavailable)
        reason = StopReason.FLEET_DOWN if fleet else StopReason.FAILED
        self._request_stop(reason, err.message.splitlines()[0])

    # -- the whole run -------------------------------------------------------------------
    async def execute(self) -> RunResult:
        try:
            embedded = self.embedded is not None
            self.model = await preflight(
                self.config, self.servers, self.fleet, embedded, self._event
            )
            self.tool_gate = ToolGate(self.servers, self.model)  # before any prompt with tools
            await self.tool_gate.check_head(self.config.input.prompts, self.config.input.limit)
            work = self.config.input
            out = self.config.output
            self.shape = RequestShape(
                self.model,
                work.regenerate_turns,
                out.return_token_ids,
                work.tool_divergence,
                out.logprobs,
            )
            return await self._run()
        finally:
            for server in self.servers:
                await server.close()
            if self.tool_server is not None:
                await self.tool_server.close()

    async def _run(self) -> RunResult:
        work, part, input_fp = self.config.input, self.config.part, self.input_fp
        ledger = self._start_session(input_fp)
        lines = input_fp.lines if self.only_lines is None else len(self.only_lines)
        earlier = self.stats  # events so far (down servers, repairs) carry over
        self.stats = RunStats(
            total=lines * work.samples_per_prompt // part.count,  # till the input pass counts
            finished_before=ledger.completions + ledger.errors,
            events=earlier.events,
            events_total=earlier.events_total,
        )
        self.recorder = Recorder(
            self.layout,
            self.config,
            stats=self.stats,
            quality=self.quality,
            seal_after=self.store.seal_after,
            already_recorded_lines=ledger.bad_lines,
            input_digest=input_fp.xxh3_128,
        )
        self.worker = ItemWorker(
            self.fleet,
            self.store,
            recorder=self.recorder,
            stats=self.stats,
            sampling=self.config.sampling,
            shape=self.shape,
            tool_server=self.tool_server,
            tool_gate=self.tool_gate,
            fail=self._fail,
        )
        self.intake = Intake(
            work,
            part,
            ledger,
            self.stats,
            self.recorder.bad_line,
            stopped=lambda: bool(self.stop),
            only_lines=self.only_lines,
            on_event=self._event,
        )
        try:
            await self._dispatch_with_monitoring()
        except BaseException:
            self.recorder.close(quiet=True, on_event=self._event)  # show the error on its way
            raise
        self.recorder.close(quiet=False, on_event=self._event)
        intake = self.intake
        seen = InputSeen(
            work.prompts,
            intake.lines,
            usable=intake.usable,
            first_bad=intake.first_bad,
            asked_models=intake.asked_models,
            model=self.model,
        )
        return run_result(
            self.store.where,
            self.stats,
            seen=seen,
            stopped=self.stop.reason,
            fatal=self.fatal,
            repaired=ledger.repaired,
        )

    def _start_session(self, input_fp: InputFingerprint) -> ledger_mod.Ledger:
        work = self.config.input
        resolved = self.config.resolved([s.url for s in self.servers], self.model)
        resolved["engines"] = fleet_engines(self.servers)
        manifest = check_manifest(self.config, self.layout.manifest, resolved, input_fp)
        self.session = manifest["sessions"][-1]
        self.last_levels = last_levels(manifest)
        self.report({"config": {**resolved, "shard": self.config.part.described()}})
        if (packed := compression(work.prompts)) and not str(work.prompts).endswith(ZIPPED):
            self._event(f"{work.prompts} is {packed}-compressed; reading it decompressed")
        return scan_ledger(
            self.config,
            self.store,
            input_fp=input_fp,
            manifest=manifest,
            on_event=self._event,
            on_fail=self._fail,
        )

    # -- dispatch ------------------------------------------------------------------------
    async def _dispatch_with_monitoring(self) -> None:
        watched = Watched(
            self.stats,
            self.servers,
            fleet=self.fleet,
            quality=self.quality,
            stop=self.stop,
            recorder=self.recorder,
        )
        monitor = Monitor(
            watched,
            self.layout.progress,
            where=self.store.where,
            report=self.report,
            event=self._event,
            request_stop=self._request_stop,
            abort_on_degenerate=self.config.limits.abort_on_degenerate,
        )
        monitor.model, monitor.shard = self.model, self.config.part.described()
        monitor.limit = self.config.input.limit
        self.stats.state = self.stats.state.to(RunState.RUNNING)
        monitor.write_snapshot()  # `regen status` has something to show from the first second
        # The embedded llama.cpp server has a fixed number of slots: nothing to find there.
        fixed = self.config.fleet.fixed_concurrency or self.embedded is not None
        tuner = LiveConcurrency(self.servers, fixed, self.last_levels, self.fleet.made_room)
        await tuner.start()
        watchers = [
            monitor.loop(self.config.display.snapshot_interval),
            self.fleet.watch_health(),
            tuner.run(),
        ]
        if self.embedded is not None:
            watchers.append(self.embedded.watch(self.fleet, self.servers, self._event))
        leave = self.embedded.stop if self.embedded is not None else lambda: None
        handler = on_signals(self.stop, self._request_stop, leave)
        async with running(watchers):
            with signals_handled(asyncio.get_running_loop(), handler):
                await self._dispatch()
        self.stats.state = self.stats.state.to(self._final_state())
        monitor.check_quality()
        monitor.write_snapshot()
        ended = session_end(self.stats, self.servers, self.config.part, self.input_fp.xxh3_128)
        record_end(self.layout.manifest, self.session, ended, self._event)
        if self.fatal is not None and not isinstance(self.fatal, FleetUnavailable):
            raise self.fatal  # the CLI shows it and exits with its code

    def _final_state(self) -> RunState:
        if self.stop.reason is not None:
            return RunState.STOPPED
        if self.only_lines is not None:
            return RunState.CALIBRATED  # the sample is in; the run itself has not started
        return RunState.FINISHED

    async def _dispatch(self) -> None:
        capacity = sum(s.concurrency for s in self.servers)
        if self.fleet.affine and len(self.servers) > 1:  # a few more waiting for a slot:
            # one whose prefix a freed server holds can be picked (fleet/dispatch.py); on
            # one server there is nothing to choose.
            capacity += AFFINE_SCAN
        dispatcher = Dispatcher(capacity, self.stop, self.worker.process, self._fail)
        if await dispatcher.send(self.intake.items()):
            await asyncio.sleep(0)  # the last items' tasks run up to their request
            self.fleet.all_sent()  # the drain starts once every request has a server slot
            self.intake.count_into(self.stats)
        await dispatcher.drain(self.config.limits.drain_timeout, self._draining)

    def _draining(self, in_flight: int) -> None:
        assert self.stop.reason is not None
        self._event(self.stop.reason.draining(in_flight, self.config.limits.drain_timeout))
        self.stats.state = self.stats.state.to(RunState.DRAINING)
