"""The local executor: the config's part (the whole input, or `--shard I/N` from the flag or
a scheduler's environment) in this process, with the live display and metrics."""

from __future__ import annotations

from regen.display import make_reporter
from regen.errors import ConfigError
from regen.executors.base import Executor, Outcome
from regen.metrics import serve_metrics
from regen.run.config import GenerateConfig
from regen.run.generate import generate


class LocalExecutor(Executor):
    def __init__(self, *, shards: int | None = None, address: str | None = None) -> None:
        if shards is not None or address is not None:
            raise ConfigError(
                "--shards and --ray-address are for --executor ray",
                hint="run one part here with --shard I/N, or add --executor ray",
            )
        super().__init__()

    def run(self, config: GenerateConfig) -> Outcome:
        shown = config.display
        reporter = make_reporter(shown.mode, shown.log_interval)
        with serve_metrics(shown.metrics_host, shown.metrics_port) as metrics:
            try:
                result = generate(config, report=metrics.wrap(reporter))
            finally:
                reporter.close()  # a live display must give the terminal back, even on error
        lines = [result.message]  # it says how to resume, once
        if config.input.limit is not None and result.exit_code == 0:
            lines.append(
                f"--limit {config.input.limit}: only the first {config.input.limit} prompt lines; "
                "the same command without --limit does the rest"
            )
        return Outcome(result.exit_code, lines)
