"""The recipe: sources and the blend, from YAML, checked field by field.

Every error names the field (`sources[2].weight`) and says what a valid value looks like.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from regen.errors import ConfigError
from regen.prepare.auxiliary import AuxRules, parse_rules
from regen.prepare.blend import Ask
from regen.prepare.recipe_fields import (
    check_keys,
    check_unique,
    opt_int,
    opt_str,
    rate,
    role_map,
)
from regen.urls import is_url

SOURCE_KEYS = (
    "name",
    "path",
    "hf",
    "config",
    "split",
    "revision",
    "streaming",
    "data_files",
    "format",
    "weight",
    "count",
    "role_map",
    "category",
    "category_field",
)
RECIPE_KEYS = (
    "sources",
    "total",
    "seed",
    "keep_multimodal",
    "role_map",
    "tokenizer",
    "dedup_warn_rate",
    "reject_warn_rate",
    "category_warn_share",
    "aux_max_tokens",
    "auxiliary",
)


@dataclass(frozen=True)
class SourceSpec:
    name: str
    path: str | None = None  # as the recipe gives it (it names the dataset in `source`)
    base_dir: str = "."  # a relative path is relative to the recipe, not the shell
    hf: str | None = None
    config: str | None = None
    split: str = "train"
    revision: str | None = None
    streaming: bool = True
    data_files: Any = None
    format: str | None = None
    ask: Ask = field(default_factory=lambda: Ask(take_all=True))
    role_map: dict[str, str] = field(default_factory=dict)
    category: str | None = None  # one fixed label for the whole source
    category_field: str | None = None  # dotted path of the dataset's own label
    from_flags: bool = False  # a --source of the command line, not a source of a recipe

    @property
    def local_pattern(self) -> str:
        path = os.path.expanduser(self.path or "")
        return path if is_url(path) else os.path.join(self.base_dir, path)

    @property
    def dataset(self) -> str:
        return self.hf or self.path or self.name


@dataclass(frozen=True)
class Recipe:
    sources: tuple[SourceSpec, ...]
    total: int | None = None
    seed: int = 0
    keep_multimodal: bool = False
    role_map: dict[str, str] = field(default_factory=dict)
    tokenizer: str | None = None
    dedup_warn_rate: float = 0.2
    reject_warn_rate: float = 0.2
    category_warn_share: float | None = 0.5
    auxiliary: AuxRules = field(default_factory=AuxRules)

    def with_overrides(self, **changes: Any) -> Recipe:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def load_recipe(path: str) -> Recipe:
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except OSError as exc:
        raise ConfigError(
            f"cannot read recipe {path}: {exc.strerror}", hint="check the path"
        ) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"recipe {path} is not valid YAML: {exc}",
            hint="fix the indentation or quoting at the line shown",
        ) from exc
    base = os.path.dirname(os.path.abspath(path))
    return parse_recipe(data, base_dir=base)


def parse_recipe(data: Any, base_dir: str = ".") -> Recipe:
    if not isinstance(data, dict):
        raise ConfigError(
            "a recipe is a mapping with a 'sources' list", hint="see examples/recipe.yaml"
        )
    check_keys(data, RECIPE_KEYS, "recipe")
    sources = data.get("sources")
    if not isinstance(sources, list) or not sources:
        raise ConfigError(
            "recipe: 'sources' must be a non-empty list",
            hint="add at least one source with a path or hf name",
        )
    specs = tuple(parse_source(s, f"sources[{i}]", base_dir) for i, s in enumerate(sources))
    check_unique([s.name for s in specs])
    recipe = Recipe(
        sources=specs,
        total=opt_int(data, "total", "recipe"),
        seed=opt_int(data, "seed", "recipe") or 0,
        keep_multimodal=bool(data.get("keep_multimodal", False)),
        role_map=role_map(data.get("role_map"), "recipe.role_map"),
        tokenizer=data.get("tokenizer"),
        dedup_warn_rate=rate(data, "dedup_warn_rate", 0.2),
        reject_warn_rate=rate(data, "reject_warn_rate", 0.2),
        category_warn_share=rate(data, "category_warn_share", 0.5),
        auxiliary=parse_rules(
            data.get("auxiliary"), opt_int(data, "aux_max_tokens", "recipe") or 16
        ),
    )
    check_blend(recipe)
    return recipe


def check_blend(recipe: Recipe) -> None:
    weighted = [s.name for s in recipe.sources if s.ask.weight is not None]
    if weighted and recipe.total is None:
        raise ConfigError(
            f"sources {', '.join(weighted)} have a weight but the recipe has no 'total'",
            hint="add total: N (or --total N) for weights to share",
        )
    fixed = sum(s.ask.count or 0 for s in recipe.sources)
    if recipe.total is not None and fixed > recipe.total:
        raise ConfigError(
            f"fixed counts add up to {fixed}, more than total {recipe.total}",
            hint="raise total or lower the counts",
        )


def parse_source(raw: Any, where: str, base_dir: str = ".") -> SourceSpec:
    if isinstance(raw, str):
        raw = {"path": raw}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a mapping", hint="give it a path or hf name")
    check_keys(raw, SOURCE_KEYS, where)
    if bool(raw.get("path")) == bool(raw.get("hf")):
        raise ConfigError(
            f"{where}: give exactly one of 'path' (local files) or 'hf' (dataset)",
            hint="path: data/train.jsonl   or   hf: owner/name",
        )
    name = raw.get("name") or _default_name(raw.get("hf") or raw["path"])
    return SourceSpec(
        name=str(name),
        path=raw.get("path"),
        base_dir=base_dir,
        hf=raw.get("hf"),
        config=opt_str(raw, "config", where),
        split=opt_str(raw, "split", where) or "train",
        revision=opt_str(raw, "revision", where),
        streaming=bool(raw.get("streaming", True)),
        data_files=raw.get("data_files"),
        format=opt_str(raw, "format", where),
        ask=_ask(raw, where),
        role_map=role_map(raw.get("role_map"), f"{where}.role_map"),
        category=opt_str(raw, "category", where),
        category_field=opt_str(raw, "category_field", where),
    )


def _ask(raw: dict, where: str) -> Ask:
    has_weight, has_count = "weight" in raw, "count" in raw
    if has_weight == has_count:
        raise ConfigError(
            f"{where}: give exactly one of 'weight' or 'count'",
            hint="weight: 0.3 (a share of total), count: 5000, or count: all",
        )
    if has_count:
        count = raw["count"]
        if count == "all":
            return Ask(take_all=True)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ConfigError(
                f"{where}.count: expected a whole number or 'all', got {count!r}",
                hint="count: 5000   or   count: all",
            )
        return Ask(count=count)
    weight = raw["weight"]
    if not isinstance(weight, (int, float)) or isinstance(weight, bool) or weight <= 0:
        raise ConfigError(
            f"{where}.weight: expected a positive number, got {weight!r}",
            hint="weight: 0.3 (weights are relative; they need not sum to 1)",
        )
    return Ask(weight=float(weight))


def _default_name(ref: str) -> str:
    tail = ref.rstrip("/").split("/")[-1]
    return tail.split(".")[0] or ref
