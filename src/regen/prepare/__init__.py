"""`regen prepare`: many datasets in, one clean, deduplicated, blended prompt file out.

recipe.py     the YAML recipe, validated: sources and the blend
sources.py    rows from local files (JSONL, JSON arrays, Parquet, globs) or HF `datasets`
formats/      one adapter per input format; `formats.detect` picks one and says why
convert.py    the base every row goes through: adapter, trailing-answer drop, checks
dedup.py      the canonical prompt hash and a compact exact index
blend.py      hash-ranked bounded candidates and the water-filling allocation
pipeline.py   the loop: read → convert → dedup → candidates → blend → write
report.py     per-source counts, warnings, composition, prompt lengths
"""

from regen.prepare.pipeline import prepare
from regen.prepare.recipe import Recipe, SourceSpec, load_recipe

__all__ = ["Recipe", "SourceSpec", "load_recipe", "prepare"]
