"""`regen generate`: every (prompt, sample) of the input ends in exactly one line across
completions/ and errors/, however often the run is killed and restarted.

Order of work: paths and lock, the fleet (embedded server if no --servers), preflight,
manifest check, ledger scan (which also repairs what a killed run left), then streaming
dispatch. Nothing reads the whole prompt file into memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from regen import redact
from regen.errors import (
    ConfigError,
    FleetUnavailable,
    OutputError,
    RegenError,
    ServerError,
)
from regen.fleet.dispatch import DispatchHalted, Fleet
from regen.fleet.embedded import EmbeddedFleet, default_model_path, embedded_spec
from regen.fleet.engine_info import fleet_engines, identify_fleet
from regen.fleet.preflight import check_token_ids, resolve_model
from regen.fleet.server import Server
from regen.jsonio import compression
from regen.records import WorkItem
from regen.run import ledger as ledger_mod
from regen.run.config import GenerateConfig
from regen.run.conversation import RequestShape, completion_record, regenerate
from regen.run.input_gate import check_input, mostly_unusable, unusable_error
from regen.run.intake import Intake
from regen.run.layout import OutputLayout, iter_shard
from regen.run.lock import RunLock
from regen.run.manifest import check_and_record, fingerprint, same_lines_inputs
from regen.run.progress import RunStats, snapshot, write_snapshot
from regen.run.quality import QualityMonitor
from regen.run.recorder import Recorder
from regen.run.sidecar import sidecar_path
from regen.run.stop import Stop, StopReason, signals_handled
from regen.run.writer import written_by
from regen.serve.fleetfile import FleetFile
from regen.storage.lease import LeaseLost
from regen.storage.store import LocalStore, Store, open_store

log = logging.getLogger("regen.run")

EXIT_OK = 0
EXIT_DEGENERATE = StopReason.DEGENERATE.exit_code
EXIT_FLEET_DOWN = StopReason.FLEET_DOWN.exit_code


@dataclass
class RunResult:
    output_dir: str
    exit_code: int
    stats: RunStats
    message: str
    already_done: bool = False
    repaired: list[str] = field(default_factory=list)


Reporter = Callable[[dict[str, Any]], None]


def generate(config: GenerateConfig, report: Reporter | None = None) -> RunResult:
    """Run (or resume) a generation; returns when it is finished, stopped, or gave up."""
    check_input(config.prompts)
    store = open_store(
        config.output_dir, staging_dir=config.staging_dir, upload_interval=config.upload_interval,
        policy=config.upload, retry_errors=config.retry_errors, part=config.part.name,
    )  # fmt: skip
    layout = store.layout
    api_key = config.api_key()
    with RunLock(layout.lock), store, contextlib.ExitStack() as stack:
        urls = config.server_urls()
        embedded: EmbeddedFleet | None = None
        if not urls:
            model_path = config.local_model or default_model_path()
            embedded = stack.enter_context(EmbeddedFleet(embedded_spec(model_path, layout.root)))
            urls = embedded.urls
        run = Run(config, layout, urls, api_key, report, embedded, store)
        return asyncio.run(run.execute())


class Run:
    def __init__(
        self,
        config: GenerateConfig,
        layout: OutputLayout,
        urls: list[str],
        api_key: str | None,
        report: Reporter | None,
        embedded: EmbeddedFleet | None,
        store: Store | None = None,
    ) -> None:
        self.config = config
        self.store = store or LocalStore(layout.root)  # where files go: a dir, or a bucket
        self.layout = layout
        self.report = report or (lambda snap: None)
        self.embedded = embedded
        self.servers = [
            Server(url, config.per_server_concurrency, api_key, config.timeouts) for url in urls
        ]
        self.quality = QualityMonitor(config.quality)
        self.stop = Stop()
        self.fatal: RegenError | None = None  # the error that stopped the run, if one did
        self._alarms_on: set[str] = set()
        self.model = ""
        self.stats = RunStats(total=0, finished_before=0)
        self.fleet = Fleet(self.servers, config.retry, config.health, self._event)

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
            self.model, down = await resolve_model(self.servers, self.config.model)
            self.fleet.model = self.model
            for server, why in down.items():
                self.fleet.take_out_at_start(server, why)
            warning = await identify_fleet(
                self.servers, self._known_engine(), self.config.sampling.seed
            )
            if warning:
                self._event(warning)
            self.shape = RequestShape(
                self.model, self.config.regenerate_turns, self.config.return_token_ids
            )
            await self._check_token_ids()
            return await self._run()
        finally:
            for server in self.servers:
                await server.close()

    def _known_engine(self) -> str | None:
        """The engine regen started (FLEET.json, or the embedded llama.cpp server)."""
        if self.embedded is not None:
            return "llamacpp"
        return FleetFile.read(self.config.fleet).engine if self.config.fleet else None

    async def _check_token_ids(self) -> None:
        if not self.config.return_token_ids:
            return
        answering = [s for s in self.servers if s.available]
        unable = [s.url for s in answering if not await check_token_ids(s, self.model)]
        if unable:
            raise ConfigError(
                "--return-token-ids: these servers do not return token ids: " + ", ".join(unable),
                hint="use a server that supports `return_token_ids` (vLLM >= 0.10.2, SGLang), "
                "or drop --return-token-ids",
            )

    async def _run(self) -> RunResult:
        config = self.config
        input_fp = fingerprint(config.prompts)
        resolved = config.resolved([s.url for s in self.servers], self.model)
        resolved["engines"] = fleet_engines(self.servers)
        try:
            manifest = check_and_record(
                self.layout.manifest,
                config=resolved,
                input_fp=input_fp,
                allow_changed_input=config.allow_changed_input,
                allow_changed_sampling=config.allow_changed_sampling,
            )
        except OSError as exc:
            raise OutputError.writing(self.layout.root, exc) from exc
        self.report({"config": resolved})
        packed = compression(config.prompts)
        if packed and not str(config.prompts).endswith((".zst", ".gz")):
            self._event(f"{config.prompts} is {packed}-compressed; reading it decompressed")
        if config.retry_errors:
            self._set_errors_aside()
        # Records read from this input, or from an earlier one this one only appends to,
        # name their input lines truly: a resume may skip those lines unread.
        same_lines = {input_fp.xxh3_128} | same_lines_inputs(
            config.prompts, manifest["earlier_inputs"]
        )
        ledger = ledger_mod.scan(
            self.layout, compress=config.compress, remote=self.store.committed(),
            part=config.part, input_digests=same_lines,
        )  # fmt: skip
        self.store.start(self._event)
        for note in ledger.repaired:
            self._event(f"repaired {note}")
        if ledger.completions + ledger.errors and not ledger.lines.trusted:
            self._event(f"this resume reads every input line: {ledger.lines.why_not}")
        lines = input_fp.lines if config.only_lines is None else len(config.only_lines)
        earlier = self.stats  # events so far (down servers, repairs) carry over
        self.stats = RunStats(
            total=lines * config.samples_per_prompt // config.part.count,  # till exact
            finished_before=ledger.completions + ledger.errors,
            events=earlier.events,
            events_total=earlier.events_total,
        )
        self.recorder = Recorder(
            self.layout, config, self.stats, self.quality, self.store.seal_after,
            ledger.bad_lines, input_fp.xxh3_128,
        )  # fmt: skip
        self.intake = Intake(
            config, ledger, self.stats, self.recorder.bad_line, stopped=lambda: bool(self.stop)
        )
        try:
            exit_code = await self._dispatch_with_monitoring()
        except BaseException:
            self.recorder.close(quiet=True, on_event=self._event)  # show the error on its way
            raise
        self.recorder.close(quiet=False, on_event=self._event)
        return self._result(exit_code, ledger.repaired)

    def _set_errors_aside(self) -> None:
        """--retry-errors: error shards move out of the ledger, so their keys are pending again.
        They are kept (not deleted) in errors-retried/ for the record. With --shard, only this
        part's: the others are other processes' to retry."""
        part = self.config.part
        shards = [
            shard
            for shard in self.layout.shard_files("errors")
            if written_by(shard.name, part, lambda shard=shard: iter_shard(shard))
        ]
        if not shards:
            return
        self.layout.retried_errors.mkdir(exist_ok=True)
        for shard in shards:
            os.replace(shard, self.layout.retried_errors / shard.name)
            sidecar = sidecar_path(shard)
            if sidecar.exists():
                os.replace(sidecar, self.layout.retried_errors / sidecar.name)
        self._event(f"--retry-errors: {len(shards)} error shard(s) set aside for retrying")

    # -- dispatch ------------------------------------------------------------------------
    async def _dispatch_with_monitoring(self) -> int:
        self.stats.state = "running"
        self._write_snapshot()  # `regen status` has something to show from the first second
        watchers = [
            asyncio.create_task(self._monitor()),
            asyncio.create_task(self.fleet.watch_health()),
        ]
        if self.embedded is not None:
            watchers.append(
                asyncio.create_task(self.embedded.watch(self.fleet, self.servers, self._event))
            )
        try:
            with signals_handled(asyncio.get_running_loop(), self._on_signal):
                await self._dispatch()
        finally:
            for task in watchers:
                task.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
        exit_code = EXIT_OK if self.stop.reason is None else self.stop.reason.exit_code
        self.stats.state = "finished" if exit_code == EXIT_OK else "stopped"
        if exit_code == EXIT_OK and self.config.only_lines is not None:
            self.stats.state = "calibrated"  # the sample is in; the run itself has not started
        self._check_quality()
        self._write_snapshot()
        if self.fatal is not None and not isinstance(self.fatal, FleetUnavailable):
            raise self.fatal  # the CLI shows it and exits with its code
        return exit_code

    async def _dispatch(self) -> None:
        capacity = asyncio.Semaphore(sum(s.concurrency for s in self.servers))
        tasks: set[asyncio.Task] = set()

        def done(task: asyncio.Task) -> None:
            tasks.discard(task)
            capacity.release()
            if not task.cancelled() and task.exception() is not None:  # a bug in _process
                exc = task.exception()
                log.error("a request task failed", exc_info=exc)
                self._fail(RegenError(f"internal error: {type(exc).__name__}: {exc}"))

        try:
            for n, item in enumerate(self.intake.items()):
                if item is None or n % 1000 == 0:
                    await asyncio.sleep(0)  # let finished requests be written meanwhile
                if item is None:
                    continue
                if not await self._free_slot(capacity):
                    break
                task = asyncio.create_task(self._process(item))
                tasks.add(task)
                task.add_done_callback(done)
            else:
                if self.intake.exact_total is not None:  # None: the input was left early
                    self.stats.total = self.intake.exact_total
        except RegenError as err:  # the input broke off, or recording a bad line failed
            self._fail(err)
        await self._drain(tasks)

    async def _free_slot(self, capacity: asyncio.Semaphore) -> bool:
        """Wait for a free request slot, or for the stop (when every server is down, no slot
        frees up, and a SIGTERM must still be seen). True if a slot was taken."""
        if self.stop:
            return False
        if not capacity.locked():
            await capacity.acquire()
            return True
        acquire = asyncio.ensure_future(capacity.acquire())
        stopped = asyncio.ensure_future(self.stop.event.wait())
        await asyncio.wait({acquire, stopped}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        acquire.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await acquire
        taken = not acquire.cancelled()
        if taken and self.stop:
            capacity.release()
            return False
        return taken

    async def _drain(self, tasks: set[asyncio.Task]) -> None:
        """Wait for what is in flight: all of it normally, up to --drain-timeout once stopping
        (a signal may arrive while we wait, so keep looking)."""
        while tasks and not self.stop:
            await asyncio.wait(set(tasks), timeout=0.5)
        if not tasks:
            return
        assert self.stop.reason is not None
        self._event(
            f"stopping ({self.stop.reason.label}): waiting up to "
            f"{self.config.drain_timeout:.0f}s for {len(tasks)} request(s) in flight"
        )
        self.stats.state = "draining"
        _, pending = await asyncio.wait(set(tasks), timeout=self.config.drain_timeout)
        for task in pending:
            task.cancel()  # not written: the next run redoes exactly these
        await asyncio.gather(*pending, return_exceptions=True)

    def _on_signal(self, sig: signal.Signals) -> None:
        if self.stop.reason is not None and self.stop.reason.is_signal:
            # Second signal: leave now. Every record is one write() of a whole line, so
            # exiting here cannot leave a half-written record behind.
            if self.embedded is not None:
                self.embedded.stop()
            os._exit(StopReason.from_signal(sig).exit_code)
        self._request_stop(
            StopReason.from_signal(sig),
            f"{sig.name} received: no new requests; finishing those in flight",
        )

    # -- one item ------------------------------------------------------------------------
    async def _process(self, item: WorkItem) -> None:
        """One (prompt, sample) to one line in completions/ or errors/. Nothing raised for
        one record stops the run; only a fleet or output fault does."""
        try:
            await self.store.room()  # a bucket that cannot keep up pauses requests, not writes
            sampling = self.config.sampling.with_overrides(item.prompt.sampling)
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

    # -- watching ------------------------------------------------------------------------
    async def _monitor(self) -> None:
        while True:
            await asyncio.sleep(self.config.snapshot_interval)
            self.recorder.tick()
            self.stats.tick()
            self._check_quality()
            self._write_snapshot()

    def _check_quality(self) -> None:
        """Warn once per alarm episode; with --abort-on-degenerate, stop dispatching."""
        alarms = self.quality.alarms()
        for alarm in alarms:
            if alarm.name not in self._alarms_on:
                self._event(f"QUALITY ALARM {alarm}")
        self._alarms_on = {a.name for a in alarms}
        if alarms and self.config.abort_on_degenerate:
            self._request_stop(StopReason.DEGENERATE, "--abort-on-degenerate: stopping the run")

    def _write_snapshot(self) -> None:
        extra = {
            "output_dir": self.layout.where,
            "model": self.model,
            "all_servers_down_for_s": (
                round(time.monotonic() - self.fleet.all_down_since, 1)
                if self.fleet.all_down_since is not None
                else None
            ),
            "stopping": self.stop.reason.label if self.stop.reason else None,
        }
        snap = snapshot(self.stats, self.servers, self.quality, extra)
        try:
            write_snapshot(self.layout.progress, snap)
        except OSError as exc:  # a full disk: the shard writes will stop the run and say so
            log.warning("cannot write %s: %s", self.layout.progress, exc.strerror or exc)
        self.report(snap)

    def _result(self, exit_code: int, repaired: list[str]) -> RunResult:
        stats = self.stats
        new_work = stats.completed + stats.failed + stats.bad_lines
        lines, usable = self.intake.lines, self.intake.usable
        already = exit_code == EXIT_OK and new_work == 0
        if exit_code == EXIT_OK and mostly_unusable(lines, usable):
            # Recorded in errors/ and kept, but a run that made little of its input is no
            # success: say so with a non-zero exit.
            first_bad = self.intake.first_bad
            err = unusable_error(self.config.prompts, lines, usable, first_bad, f"of {lines}")
            return RunResult(self.layout.where, err.exit_code, stats, str(err), False, repaired)
        if already:
            message = (
                f"nothing to do: all {stats.finished} items are already in {self.layout.where}"
            )
        elif exit_code == EXIT_OK:
            message = (
                f"done: {stats.completed} new completions, {stats.failed} errors, "
                f"{stats.bad_lines} unusable input lines; output in {self.layout.where}"
            )
        else:
            assert self.stop.reason is not None
            message = (
                f"stopped ({self.stop.reason.label}) after {stats.completed} new completions; "
                "run the same command again to resume (finished work is kept)"
            )
            if self.fatal is not None:
                message = f"{self.fatal}\n{message}"
        return RunResult(self.layout.where, exit_code, stats, message, already, repaired)
