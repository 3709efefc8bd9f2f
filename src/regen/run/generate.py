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

from regen.fleet.embedded import EmbeddedFleet, default_model_path, embedded_spec
from regen.run.config import GenerateConfig
from regen.run.outcome import EXIT_OK, RunResult
from regen.run.session import Reporter, Run
from regen.run.startup import check_output_matches, check_prompts, leave_nothing_behind
from regen.storage import open_store

__all__ = ["EXIT_OK", "Reporter", "RunResult", "generate"]


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
    leaving = leave_nothing_behind(config.output.dir)
    with leaving as leftovers, store, contextlib.ExitStack() as stack:
        check_output_matches(store, config, input_fp)
        embedded: EmbeddedFleet | None = None
        if model_path is not None:  # after the cheap checks: a server start takes a while
            spec = embedded_spec(model_path, store.layout.root)
            embedded = stack.enter_context(EmbeddedFleet(spec, config.fleet.restart))
            leftovers.server_logs = True  # it started: its logs do not say why a run failed
            urls = embedded.urls
        run = Run(
            config,
            store,
            urls=urls,
            report=report,
            embedded=embedded,
            only_lines=only_lines,
            input_fp=input_fp,
        )
        return asyncio.run(run.execute())
