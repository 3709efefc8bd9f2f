"""Everything a run writes about its work items: one line per finished (prompt, sample) in
completions/, one per failure or unusable input line in errors/, and the counts and quality
observations that go with each line. The run decides; the recorder writes and counts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from regen import redact
from regen.errors import OutputError
from regen.fleet.response import Generated
from regen.format.layout import OutputLayout
from regen.format.names import writer_tag
from regen.format.writer import ShardWriter
from regen.records import BadLine, Completion, ErrorRecord, Record, WorkItem, source_name
from regen.run.config import GenerateConfig
from regen.run.progress import RunStats
from regen.run.quality import QualityMonitor
from regen.run.sampling import setting_label


class Recorder:
    def __init__(
        self,
        layout: OutputLayout,
        config: GenerateConfig,
        stats: RunStats,
        quality: QualityMonitor,
        seal_after: float | None,
        already_recorded_lines: set[int] | frozenset[int],
        input_digest: str,
    ) -> None:
        self.stats = stats
        self.quality = quality
        self.mixed = config.sampling.mixed()  # fields given as lists: count what each got
        self._already_recorded = already_recorded_lines  # bad lines a previous run wrote
        tag = writer_tag(config.part.name, input_digest)  # names say what the lines mean
        limits: dict[str, Any] = {
            "max_records": config.output.shard_max_records,
            "max_bytes": config.output.shard_max_bytes,
            "max_age": seal_after,
        }
        self.completions = ShardWriter(
            layout.completions, tag, compress=config.output.compress, **limits
        )
        self.errors = ShardWriter(layout.errors, tag, **limits)

    def completion(self, record: Completion, generated: Generated) -> None:
        _write(self.completions, record, record.meta.line)
        self.stats.completed += 1
        self.stats.prompt_tokens += record.usage.prompt_tokens
        self.stats.completion_tokens += record.usage.completion_tokens
        if self.mixed:
            self.stats.settings[setting_label(record.meta.sampling, self.mixed)] += 1
        self._count_tool_calls(record)
        thinking = record.meta.sampling["thinking"] == "on"
        self.quality.observe(
            generated.content, generated.reasoning, generated.finish_reason, thinking
        )

    def _count_tool_calls(self, record: Completion) -> None:
        matches = [t.get("tool_calls_match") for t in record.meta.turns or []]
        if any(m is not None for m in matches):
            source = source_name(record.source)
            self.stats.tool_compared[source] += 1
            self.stats.tool_diverged[source] += False in matches

    def failure(self, item: WorkItem, error: dict, attempts: int, kind: str = "") -> None:
        """A (prompt, sample) that could not be completed. Server text is scrubbed of keys."""
        error = {**error, "message": redact.scrub(str(error.get("message", "")))}
        prompt = item.prompt
        record = ErrorRecord(
            id=prompt.id, sample=item.sample, line=prompt.line, error=error, attempts=attempts
        )
        _write(self.errors, record, prompt.line)
        self.stats.failed += 1
        self.stats.errors_by_type[kind or error["type"]] += 1

    def bad_line(self, bad: BadLine) -> None:
        """An input line that cannot be used; written once, however often the run resumes."""
        if bad.line in self._already_recorded:
            return
        error = {"type": bad.kind, "message": bad.message}
        record = ErrorRecord(id=bad.id, sample=None, line=bad.line, error=error, attempts=0)
        _write(self.errors, record, bad.line)
        self.stats.bad_lines += 1
        self.stats.errors_by_type[bad.kind] += 1

    def tick(self) -> None:
        """A slow run still seals (and so uploads) its shards by age."""
        self.completions.tick()
        self.errors.tick()

    def close(self, quiet: bool, on_event: Callable[[str], None]) -> None:
        """Seal the open shards. On a full disk sealing fails too; what is written is kept
        unsealed and the next run reads it, so with `quiet` (an error is already on its way
        out) this failure is only reported, never raised over the first one."""
        for writer in (self.completions, self.errors):
            try:
                writer.close()
            except OSError as exc:
                err = OutputError.writing(writer.folder, exc)
                if not quiet:
                    raise err from exc
                on_event(f"could not seal the last shard: {err.message}")


def _write(writer: ShardWriter, record: Record, line: int) -> None:
    try:
        writer.write(record, line)
    except OSError as exc:  # a full or vanished disk: stop, keep what is written
        raise OutputError.writing(writer.folder, exc) from exc
