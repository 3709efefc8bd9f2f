"""`regen generate`: every (prompt, sample) of the input ends in exactly one line across
completions/ and errors/, however often the run is killed and restarted.

Order of work: cheap checks (`startup`), the store (lock, a bucket's lease), the fleet
(embedded server if no --servers), preflight, manifest check, ledger scan (which repairs
what a killed run left), then streaming dispatch, never reading the whole prompt file. The
pieces: `dispatcher` (slots, drain), `monitor` (snapshots, alarms), `recorder` (what is
written), `outcome` (how it ended), `stop` (why it stops, and signals).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from regen import redact
from regen.errors import FleetUnavailable, OutputError, RegenError, ServerError
from regen.fleet.dispatch import AFFINE_SCAN, DispatchHalted, Fleet
from regen.fleet.embedded import EmbeddedFleet, default_model_path, embedded_spec
from regen.fleet.engine_info import fleet_engines
from regen.fleet.server import Server
from regen.fleet.tuning import LiveConcurrency
from regen.format.manifest import (
    InputFingerprint,
    check_and_record,
    last_levels,
    record_session_end,
    same_lines_inputs,
)
from regen.format.state import RunState
from regen.jsonio import compression
from regen.records import WorkItem
from regen.run import ledger as ledger_mod
from regen.run.config import GenerateConfig
from regen.run.conversation import RequestShape, completion_record, regenerate
from regen.run.dispatcher import Dispatcher
from regen.run.intake import Intake
from regen.run.monitor import Monitor, Watched
from regen.run.outcome import EXIT_OK, InputSeen, RunResult, run_result
from regen.run.preflight import preflight
from regen.run.progress import RunStats, concurrency_of
from regen.run.quality import QualityMonitor
from regen.run.recorder import Recorder
from regen.run.startup import check_output_matches, check_prompts, leave_nothing_behind
from regen.run.stop import Stop, StopReason, on_signals, signals_handled
from regen.storage import Store, open_store
from regen.storage.lease import LeaseLost

__all__ = ["EXIT_OK", "Reporter", "RunResult", "generate"]

log = logging.getLogger("regen.run")
ZIPPED = (".zst", ".gz")
Reporter = Callable[[dict[str, Any]], None]


def generate(
    config: GenerateConfig,
    report: Reporter | None = None,
    only_lines: frozenset[int] | None = None,
) -> RunResult:
    """Run (or resume) a generation; returns when it is finished, stopped, or gave up.
    `only_lines`: regen plan's calibration sample (these input lines, as the run's first
    records; the run ends CALIBRATED and `regen generate` goes on from there)."""
    input_fp = check_prompts(config)
    urls = config.fleet.server_urls()
    model_path = None if urls else (config.fleet.local_model or default_model_path())
    store = open_store(config.output.dir, config.output.store_options(config.part))
    with leave_nothing_behind(config.output.dir), store, contextlib.ExitStack() as stack:
        check_output_matches(store, config, input_fp)
        embedded: EmbeddedFleet | None = None
        if model_path is not None:  # after the cheap checks: a server start takes a while
            spec = embedded_spec(model_path, store.layout.root)
            embedded = stack.enter_context(EmbeddedFleet(spec))
            urls = embedded.urls
        run = Run(config, store, urls, report, embedded, only_lines, input_fp)
        return asyncio.run(run.execute())


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

    def _event(self, text: str) -> None:
        text = redact.scrub(text)
        log.warning(text)
        self.stats.event(text)

    def _request_stop(self, reason: StopReason, why: str | None = None) -> None:
        if self.stop.request(reason):
            self.fleet.halt()  # requests waiting for a slot or a backoff leave at once
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
            work = self.config.input
            out = self.config.output
            self.shape = RequestShape(self.model, work.regenerate_turns, out.return_token_ids,
                                      out.logprobs)  # fmt: skip
            return await self._run()
        finally:
            for server in self.servers:
                await server.close()

    async def _run(self) -> RunResult:
        work, part, input_fp = self.config.input, self.config.part, self.input_fp
        ledger = self._scan_ledger(input_fp, self._check_manifest(input_fp))
        lines = input_fp.lines if self.only_lines is None else len(self.only_lines)
        earlier = self.stats  # events so far (down servers, repairs) carry over
        self.stats = RunStats(
            total=lines * work.samples_per_prompt // part.count,  # till the input pass counts
            finished_before=ledger.completions + ledger.errors,
            events=earlier.events,
            events_total=earlier.events_total,
        )
        self.recorder = Recorder(
            self.layout, self.config, self.stats, self.quality, self.store.seal_after,
            ledger.bad_lines, input_fp.xxh3_128,
        )  # fmt: skip
        self.intake = Intake(
            work, part, ledger, self.stats, self.recorder.bad_line,
            stopped=lambda: bool(self.stop), only_lines=self.only_lines, on_event=self._event,
        )  # fmt: skip
        try:
            await self._dispatch_with_monitoring()
        except BaseException:
            self.recorder.close(quiet=True, on_event=self._event)  # show the error on its way
            raise
        self.recorder.close(quiet=False, on_event=self._event)
        intake = self.intake
        seen = InputSeen(
            work.prompts, intake.lines, intake.usable, intake.first_bad, intake.asked_models,
            self.model,
        )  # fmt: skip
        return run_result(
            self.store.where, self.stats, seen, self.stop.reason, self.fatal, ledger.repaired
        )

    def _check_manifest(self, input_fp) -> dict[str, Any]:
        """Refuse silent changes against an earlier session; record this one."""
        work = self.config.input
        resolved = self.config.resolved([s.url for s in self.servers], self.model)
        resolved["engines"] = fleet_engines(self.servers)
        try:
            manifest = check_and_record(
                self.layout.manifest, config=resolved, input_fp=input_fp,
                allow_changed_input=work.allow_changed_input,
                allow_changed_sampling=work.allow_changed_sampling, command=self.config.command,
            )  # fmt: skip
        except OSError as exc:
            raise OutputError.writing(self.layout.root, exc) from exc
        self.session = manifest["sessions"][-1]
        self.last_levels = last_levels(manifest)
        self.report({"config": resolved})
        if (packed := compression(work.prompts)) and not str(work.prompts).endswith(ZIPPED):
            self._event(f"{work.prompts} is {packed}-compressed; reading it decompressed")
        return manifest

    def _scan_ledger(self, input_fp, manifest: dict[str, Any]) -> ledger_mod.Ledger:
        if self.config.input.retry_errors:
            moved = self.store.set_errors_aside()
            if moved:
                self._event(f"--retry-errors: {moved} error shard(s) set aside for retrying")
        # Records read from this input, or from an earlier one this one only appends to,
        # name their input lines truly: a resume may skip those lines unread.
        prompts = self.config.input.prompts
        same_lines = {input_fp.xxh3_128} | same_lines_inputs(prompts, manifest["earlier_inputs"])
        ledger = ledger_mod.scan(
            self.layout, compress=self.config.output.compress, remote=self.store.committed(),
            part=self.config.part, input_digests=same_lines,
        )  # fmt: skip
        self.store.start(self._event, self._fail)
        for note in ledger.repaired:
            self._event(f"repaired {note}")
        if ledger.completions + ledger.errors and not ledger.lines.trusted:
            self._event(f"this resume reads every input line: {ledger.lines.why_not}")
        return ledger

    # -- dispatch ------------------------------------------------------------------------
    async def _dispatch_with_monitoring(self) -> None:
        watched = Watched(
            self.stats, self.servers, self.fleet, self.quality, self.stop, self.recorder
        )
        monitor = Monitor(
            watched, self.layout.progress, self.store.where, self.report, self._event,
            self._request_stop, self.config.limits.abort_on_degenerate,
        )  # fmt: skip
        monitor.model = self.model
        self.stats.state = self.stats.state.to(RunState.RUNNING)
        monitor.write_snapshot()  # `regen status` has something to show from the first second
        # The embedded llama.cpp server has a fixed number of slots: nothing to find there.
        fixed = self.config.fleet.fixed_concurrency or self.embedded is not None
        tuner = LiveConcurrency(self.servers, fixed, self.last_levels, self.fleet.made_room)
        await tuner.start()
        watchers = [
            asyncio.create_task(monitor.loop(self.config.display.snapshot_interval)),
            asyncio.create_task(self.fleet.watch_health()),
            asyncio.create_task(tuner.run()),
        ]
        if self.embedded is not None:
            watchers.append(
                asyncio.create_task(self.embedded.watch(self.fleet, self.servers, self._event))
            )
        try:
            leave = self.embedded.stop if self.embedded is not None else lambda: None
            handler = on_signals(self.stop, self._request_stop, leave)
            with signals_handled(asyncio.get_running_loop(), handler):
                await self._dispatch()
        finally:
            for task in watchers:
                task.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
        self.stats.state = self.stats.state.to(self._final_state())
        monitor.check_quality()
        monitor.write_snapshot()
        self._record_session_end()
        if self.fatal is not None and not isinstance(self.fatal, FleetUnavailable):
            raise self.fatal  # the CLI shows it and exits with its code

    def _record_session_end(self) -> None:
        """The levels each server ran at, in the manifest: what the next session (or the next
        run on this fleet) can start from, after progress.json is overwritten."""
        ended = {
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "state": str(self.stats.state),
            "completed": self.stats.completed,
            "servers": [{"url": s.url, **concurrency_of(s)} for s in self.servers],
        }
        try:
            record_session_end(self.layout.manifest, self.session, ended)
        except OSError as exc:  # the run's records are safe; only this summary is missing
            self._event(f"could not record the session's end in the manifest: {exc}")

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
        dispatcher = Dispatcher(capacity, self.stop, self._process, self._fail)
        if await dispatcher.send(self.intake.items()):
            await asyncio.sleep(0)  # the last items' tasks run up to their request
            self.fleet.endgame.begin()  # every item has a slot: the drain starts
            if self.intake.exact_total is not None:
                self.stats.total = self.intake.exact_total  # None: the input was left early
        await dispatcher.drain(self.config.limits.drain_timeout, self._draining)

    def _draining(self, in_flight: int) -> None:
        assert self.stop.reason is not None
        self._event(self.stop.reason.draining(in_flight, self.config.limits.drain_timeout))
        self.stats.state = self.stats.state.to(RunState.DRAINING)

    # -- one item ------------------------------------------------------------------------
    async def _process(self, item: WorkItem) -> None:
        """One (prompt, sample) to one line in completions/ or errors/. Nothing raised for
        one record stops the run; only a fleet or output fault does."""
        self.fleet.endgame.near_end(self.stats.remaining)
        try:
            await self.store.room()  # a bucket that cannot keep up pauses requests, not writes
            sampling = self.config.sampling.for_item(item).with_overrides(item.prompt.sampling)
            try:
                conv = await regenerate(self.fleet, item, self.shape, sampling)
            except ServerError as err:
                self._record_failure(item, err.to_record(), err.attempts, err.kind)
                return
            record = completion_record(item, conv, self.shape, sampling)
            assert conv.last is not None
            self.recorder.completion(record, conv.last)
        except DispatchHalted:
            return  # never sent: the next run sends it
        except (FleetUnavailable, OutputError, LeaseLost) as err:
            self._fail(err)
        except Exception as exc:  # a bug on one record: record it, keep its traceback in the log
            log.exception("prompt %s (line %d) failed", item.prompt.id, item.prompt.line)
            message = f"{type(exc).__name__}: {exc}"[:500]
            self._record_failure(item, {"type": "internal_error", "message": message}, 0)

    def _record_failure(self, item: WorkItem, error: dict, attempts: int, kind: str = "") -> None:
        try:
            self.recorder.failure(item, error, attempts, kind)
        except OutputError as err:
            self._fail(err)
