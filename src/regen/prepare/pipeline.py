"""The loop that owns reading, counting, rejects and dedup; adapters only convert rows.

Sources are read in recipe order, which is the dedup priority: a prompt already seen in an
earlier source (or earlier in the same one) is counted as a duplicate and left out.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from regen.errors import UNWRITABLE_ERRNOS, ConfigError, InputError, OutputError
from regen.jsonio import atomic_write_bytes, atomic_write_json, dumps_line
from regen.prepare.blend import Candidate, Candidates, allocate, heap_limit, rank
from regen.prepare.convert import Converter
from regen.prepare.dedup import HashIndex, key64
from regen.prepare.formats import Adapter, Options, detect, resolve
from regen.prepare.recipe import Recipe, SourceSpec
from regen.prepare.rejects import RejectsWriter
from regen.prepare.report import Report, build_report
from regen.prepare.skip import Skip
from regen.prepare.sources import Row, check_sources, read_rows
from regen.prepare.stats import SourceStats
from regen.storage.publish import beside, staged

BATCH = 4096  # prompts hashed and deduplicated together (vectorised index lookups)
Log = Callable[[str], None]


@contextmanager
def few_collections(gen0: int = 50_000) -> Iterator[None]:
    """Run the cyclic garbage collector less often while reading sources.

    Every row makes a dozen short-lived dicts and lists that hold no cycles (reference counting
    frees them), yet they trigger a collection every 700 allocations; collecting every 50,000
    made prepare ~18% faster (bench/bench_prepare.py). The setting is restored afterwards.
    """
    old = gc.get_threshold()
    gc.set_threshold(gen0, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


def prepare(
    recipe: Recipe,
    output: str | Path,
    *,
    rejects: str | Path | None = None,
    report: str | Path | None = None,
    log: Log = lambda _: None,
    on_row: Callable[[str], None] | None = None,
) -> Report:
    """Write the blended prompt file, the rejects file and the report; return the report.
    Any of them may be a bucket URL (written locally, then uploaded whole)."""
    check_sources(recipe.sources)
    out = str(output)
    targets = (out, str(rejects or beside(out, ".rejects.jsonl")),
               str(report or beside(out, ".report.json")))  # fmt: skip
    with staged(*targets) as (output_path, rejects_path, report_path):
        return _prepare_checked(
            recipe, output_path, rejects_path=rejects_path, report_path=report_path, names=targets,
            log=log, on_row=on_row
        )


def _prepare_checked(
    recipe: Recipe, output: Path, rejects_path: Path, report_path: Path,
    names: tuple[str, str, str], log: Log, on_row: Callable[[str], None] | None,
) -> Report:  # fmt: skip
    for path in (output, rejects_path, report_path):
        _make_parent(path)
    with _writable({output.parent, rejects_path.parent, report_path.parent}):
        return _prepare(recipe, output, rejects_path=rejects_path, report_path=report_path,
                        names=names, log=log, on_row=on_row)


ANEW = "prepare writes its files anew from the sources (or give -o another folder)"


@contextmanager
def _writable(folders: set[Path]) -> Iterator[None]:
    """A read-only or full output folder is a message naming it, not a traceback."""
    try:
        yield
    except OSError as exc:
        folder = Path(exc.filename).parent if exc.filename else None
        if exc.errno not in UNWRITABLE_ERRNOS or folder not in folders:
            raise
        raise OutputError.writing(folder, exc, again=ANEW) from exc


def _prepare(
    recipe: Recipe,
    output: Path,
    rejects_path: Path,
    report_path: Path,
    names: tuple[str, str, str],  # as the user gave them: paths or bucket URLs
    log: Log,
    on_row: Callable[[str], None] | None,
) -> Report:
    fixed = sum(s.ask.count or 0 for s in recipe.sources)
    indexes: list[HashIndex] = []
    all_stats: list[SourceStats] = []
    pools: list[Candidates] = []
    with RejectsWriter(rejects_path) as writer, few_collections():
        for spec in recipe.sources:
            reader = SourceReader(recipe, spec, indexes, [s.name for s in all_stats], writer)
            pool = Candidates(heap_limit(spec.ask, fixed, recipe.total))
            all_stats.append(reader.run(pool, log, on_row))
            indexes.append(reader.index)
            pools.append(pool)
    chosen = select(recipe, all_stats, pools)
    atomic_write_bytes(output, b"".join(c.line for _, c in chosen))
    result = build_report(recipe, all_stats, chosen, names[0], names[1])
    atomic_write_json(report_path, result.data)
    return result


def _make_parent(path: Path) -> None:
    """Output folders are created, never assumed (a missing one failed a real launch)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create {path.parent}: {exc.strerror}") from exc


def select(
    recipe: Recipe, stats: list[SourceStats], pools: list[Candidates]
) -> list[tuple[str, Candidate]]:
    """Quotas per source, then one seeded shuffle of everything chosen (rank order)."""
    quotas = allocate([s.ask for s in recipe.sources], [s.unique for s in stats], recipe.total)
    chosen = []
    for k, (st, pool, quota) in enumerate(zip(stats, pools, quotas, strict=True)):
        st.requested = quota
        picked = pool.best(quota)
        st.selected = len(picked)
        chosen += [((c.rank, k, c.row), st.name, c) for c in picked]
    chosen.sort(key=lambda item: item[0])
    return [(name, c) for _, name, c in chosen]


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
            found = detect(first) if first is not None else None
            if found is None:
                keys = sorted(first)[:12] if first else []
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
