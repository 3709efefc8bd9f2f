"""One source of a recipe read: its format detected (per row when rows differ), each row
converted, rejected or skipped with its reason, and deduplicated against every earlier source
before it is offered to the blend as a candidate.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import numpy as np

from regen.errors import ConfigError, InputError, InputFileError
from regen.jsonio import dumps_line
from regen.prepare.blend import Candidate, Candidates, rank
from regen.prepare.convert import Converter
from regen.prepare.dedup import HashIndex, key64
from regen.prepare.formats import Adapter, Options, detect, resolve
from regen.prepare.recipe import Recipe, SourceSpec
from regen.prepare.rejects import RejectsWriter
from regen.prepare.skip import Skip
from regen.prepare.sources import Row, read_rows
from regen.prepare.stats import SourceStats

BATCH = 4096  # prompts hashed and deduplicated together (vectorised index lookups)
Log = Callable[[str], None]


class SourceReader:
    """Reads one source: detects its format, converts, rejects, dedups, offers candidates."""

    def __init__(
        self,
        recipe: Recipe,
        spec: SourceSpec,
        earlier: list[HashIndex],
        earlier_names: list[str],
        rejects: RejectsWriter,
    ) -> None:
        self.recipe, self.spec, self.rejects = recipe, spec, rejects
        self.earlier, self.earlier_names = earlier, earlier_names
        self.index = HashIndex()
        self.stats = SourceStats(spec.name, spec.dataset)
        self.options = Options(
            role_map={**recipe.role_map, **spec.role_map},
            keep_multimodal=recipe.keep_multimodal,
            auxiliary=recipe.auxiliary,
        )

    def run(
        self, pool: Candidates, log: Log, on_row: Callable[[str], None] | None = None
    ) -> SourceStats:
        rows = read_rows(self.spec)
        adapter, rows = self.choose_adapter(rows)
        log(f"{self.spec.name}: format {adapter.name} ({self.stats.format_reason})")
        if adapter.needs_scan:
            adapter.scan(v for _, v, _ in read_rows(self.spec) if isinstance(v, dict))
        converter = Converter(self.spec, adapter)
        self.by_format = {adapter.name: converter}
        pending: list[tuple[int, Candidate | None]] = []
        for index, value, where in rows:
            self.stats.read += 1
            if on_row is not None:
                on_row(self.spec.name)
            candidate = self.convert(converter, pool, index, value, where)
            if candidate is not None:
                pending.append(candidate)
            if len(pending) >= BATCH:
                self.dedup(pending, pool)
                pending = []
        self.dedup(pending, pool)
        if self.stats.other_formats:
            mixed = ", ".join(f"{n} {c}" for n, c in self.stats.other_formats.items())
            log(f"{self.spec.name}: rows of another format, detected per row: {mixed}")
            self.stats.format_reason += f"; per row: {mixed}"
        log(f"{self.spec.name}: read {self.stats.read}, unique {self.stats.unique}")
        return self.stats

    def convert(
        self, converter: Converter, pool: Candidates, index: int, value: object, where: str
    ) -> tuple[int, Candidate | None] | None:
        """(dedup key, candidate), None when rejected; the candidate is None when its rank
        already keeps it out of the blend (it still counts for dedup)."""
        try:
            if isinstance(value, InputError):
                raise value
            converter = self.row_converter(converter, value)  # type: ignore[arg-type]
            converted, digest = converter.parse(value)  # type: ignore[arg-type]
        except InputError as err:
            counter = self.stats.skipped if isinstance(err, Skip) else self.stats.rejected
            counter[err.kind] += 1
            self.stats.examples.setdefault(err.kind, f"row {index}: {err.message}")
            self.rejects.write(self.spec, index, where, err)
            return None
        self.stats.converted += 1
        if converted.dropped:
            self.stats.dropped_blocks.update(converted.dropped)
        order = rank(digest, self.recipe.seed)
        if not pool.would_keep(order, index):
            return key64(digest), None
        prompt = converter.prompt(value, index, converted, digest)  # type: ignore[arg-type]
        line = dumps_line(prompt.to_dict())
        return key64(digest), Candidate(order, index, prompt.meta["category"], line)

    def row_converter(self, converter: Converter, row: dict) -> Converter:
        """With the format auto-detected, a row of another shape (OpenAI messages and
        ShareGPT lines in one file) is converted by its own adapter, not rejected."""
        if self.spec.format or converter.adapter.detect(row):
            return converter
        found = detect(row)
        if found is None or found[0].needs_scan:
            return converter  # its rejection says what is missing
        cls = found[0]
        if cls.name not in self.by_format:
            self.by_format[cls.name] = Converter(self.spec, cls(self.options))
        self.stats.other_formats[cls.name] += 1
        return self.by_format[cls.name]

    def dedup(self, pending: list[tuple[int, Candidate | None]], pool: Candidates) -> None:
        """Exact dedup of one batch against earlier sources, this source, and itself."""
        if not pending:
            return
        keys = np.fromiter((k for k, _ in pending), dtype=np.uint64, count=len(pending))
        owner = np.full(len(keys), -1, dtype=np.int64)
        for j in reversed(range(len(self.earlier))):  # the earliest source wins
            owner[self.earlier[j].contains(keys)] = j
        owner[(owner < 0) & self.index.contains(keys)] = len(self.earlier)
        seen: set[int] = set()
        fresh: list[int] = []
        names = [*self.earlier_names, self.spec.name]
        for (key, candidate), who in zip(pending, owner.tolist(), strict=True):
            if who < 0 and key in seen:
                who = len(self.earlier)
            if who >= 0:
                self.stats.deduplicated += 1
                self.stats.duplicate_of[names[who]] += 1
                continue
            seen.add(key)
            fresh.append(key)
            if candidate is not None:
                pool.offer(candidate)
        self.stats.unique += len(fresh)
        self.index.add(np.array(fresh, dtype=np.uint64))

    def choose_adapter(self, rows: Iterator[Row]) -> tuple[Adapter, Iterator[Row]]:
        """The recipe's format, or the first row's shape; the reason goes in the report."""
        flags = self.spec.from_flags
        if self.spec.format:
            cls = resolve(self.spec.format)
            reason = "given with --format" if flags else "set in the recipe"
        else:
            head = []
            first = None
            for item in rows:
                head.append(item)
                if isinstance(item[1], dict):
                    first = item[1]
                    break
            rows = itertools.chain(head, rows)
            if first is None:
                raise self._no_row_to_read(head)
            found = detect(first)
            if found is None:
                keys = sorted(first)[:12]
                raise ConfigError(
                    f"source {self.spec.name!r}: cannot tell the format from its first row "
                    f"(columns: {', '.join(keys) or 'none'})",
                    hint=("pass --format " if flags else "set format: ")
                    + "sharegpt|openai|pairs|function_calling|traces",
                )
            cls, reason = found
            reason = f"auto: {reason}"
        self.stats.format, self.stats.format_reason = cls.name, reason
        return cls(self.options), rows

    def _no_row_to_read(self, head: list[Row]) -> InputFileError:
        """No row is a JSON object: an empty file, or one that is not JSON (a CSV)."""
        name, dataset = self.spec.name, self.spec.dataset
        if not head:
            return InputFileError(
                f"source {name!r} has no rows: {dataset} is empty",
                hint="check the path (or the glob), or leave the source out",
            )
        row, err, where = head[0]
        return InputFileError(
            f"source {name!r}: none of its {len(head)} row(s) is a JSON object (the first, "
            f"{where or f'row {row}'}: {getattr(err, 'message', err)})",
            hint="prepare reads JSONL (one object a line), a JSON array, Parquet or a Hub "
            "dataset: convert the file to one of them",
        )
