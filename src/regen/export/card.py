"""The dataset card (README.md with the Hub's YAML) and regen.json, written with every export.

The YAML is built by `huggingface_hub`'s `DatasetCardData`, so the Hub reads what we mean;
`configs` are derived from the files on disk after they are published (one config per
domain plus `default`, each split listing its shards), so they match the files exactly.
A run that failed `regen check` says so in the card's first lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import xxhash
from datasets import DatasetInfo, Features, Json
from huggingface_hub import DatasetCard, DatasetCardData

from regen.export import card_facts as facts
from regen.export.card_body import BODY
from regen.export.files import DEFAULT, layout
from regen.jsonio import atomic_write_bytes, atomic_write_json

CARD, FACTS = "README.md", "regen.json"


@dataclass
class CardInputs:
    """What the CLI knows beyond the summary: the runs, the command, the licenses."""

    runs: list[str]
    command: str = ""
    licenses: dict[str, str] = field(default_factory=dict)  # source or "*" -> SPDX id
    language: list[str] = field(default_factory=list)
    pretty_name: str | None = None
    chat_template_sha256: str | None = None
    tokenizer: str | None = None
    draft_vocab: dict[str, Any] | None = None  # coverage figures (export/draft_vocab.py)


def features_of(schema: pa.Schema) -> Features:
    """The rows' features, with free-form JSON (tool schemas, whose keys differ from tool to
    tool) declared as `Json`: a unified struct would give every row every other row's keys."""
    features = Features.from_arrow_schema(schema)
    for name in schema.names:
        kind = schema.field(name).type
        if pa.types.is_string(kind):
            continue  # JSON kept as a string (LLaMA-Factory's tools) stays a string
        if name in JSON_COLUMNS or "struct<>" in str(kind):
            features[name] = Json()
    return features


JSON_COLUMNS = ("tools",)


def card_configs(out_dir: Path) -> list[dict[str, Any]]:
    """`configs:` for the Hub and `datasets`: every domain folder, and `default` over all.

    Each config's `description` names this export's files by a digest. `datasets` keys its
    cache of a local folder by the folder's name and a hash of these configs, not by the
    files: without the digest, `load_dataset(OUT)` after a re-export (or of another export
    with the same folder name and domains) returns the rows cached from the first one."""
    files = layout(out_dir)
    label = f"regen export {files_digest(out_dir, files)}"
    everything: dict[str, list[str]] = {}
    configs = []
    for name, splits in sorted(files.items()):
        for split, paths in splits.items():
            everything.setdefault(split, []).extend(paths)
        if name != DEFAULT:  # DEFAULT: the format keeps one file a split, with no domains
            configs.append(
                {"config_name": name, "data_files": _data_files(splits), "description": label}
            )
    default = {
        "config_name": DEFAULT,
        "data_files": _data_files(everything),
        "description": label,
        "default": True,
    }
    return [default, *configs]


def files_digest(out_dir: Path, files: dict[str, dict[str, list[str]]]) -> str:
    """Of every data file's path, size and modification time: a new one for every write."""
    digest = xxhash.xxh3_64()
    for rel in sorted(p for splits in files.values() for paths in splits.values() for p in paths):
        stat = (out_dir / rel).stat()
        digest.update(f"{rel}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _data_files(splits: dict[str, list[str]]) -> list[dict[str, Any]]:
    order = {"train": 0, "validation": 1, "holdout": 2}
    return [
        {"split": s, "path": sorted(p)}
        for s, p in sorted(splits.items(), key=lambda kv: order[kv[0]])
    ]


def gather(out_dir: Path, summary: Any, inputs: CardInputs) -> dict[str, Any]:
    """The machine-readable facts: regen.json, and what the card's body shows."""
    runs = [facts.run_facts(run) for run in inputs.runs]
    licenses = facts.source_licenses(runs, inputs.licenses)
    kinds = sorted(set(licenses.values()))
    rows = sum(summary.written.values())
    return {
        "regen_version": facts.regen_version(),
        "format": summary.format,
        "rows": summary.written,
        "domains": summary.configs,
        "supervise": summary.supervise,
        "rows_with_source_turns": summary.with_source_turns,
        "check": summary.check,
        "check_verdict": (summary.check or {}).get("verdict", "not checked"),
        "sampling_mix": summary.to_json()["sampling"],
        "thinking": dict(summary.thinking),
        "chat_template_sha256": inputs.chat_template_sha256,
        "tokenizer": inputs.tokenizer,
        "licenses": licenses,
        "license": kinds[0] if len(kinds) == 1 else "other" if kinds else facts.UNKNOWN,
        "size_category": facts.size_category(rows),
        "source_datasets": facts.hub_sources(runs),
        "runs": runs,
        "export_command": inputs.command,
        "draft_vocab": inputs.draft_vocab,
        "holdout": summary.holdout,
        "warnings": summary.warnings,
        "how_to_train": summary.how_to_train,
        "snippet": summary.snippet,
    }


def build_card(
    out_dir: Path, data: dict[str, Any], inputs: CardInputs, summary_schema: Any = None
) -> DatasetCard:
    extra: dict[str, Any] = {}
    if data["license"] == "other":
        extra["license_name"] = "mixed"
        extra["license_details"] = "the sources are under different licenses: see the card"
    model = {run["model"] for run in data["runs"]}
    configs = card_configs(out_dir)
    if summary_schema is not None:
        features = DatasetInfo(features=features_of(summary_schema))
        extra["dataset_info"] = [
            {"config_name": c["config_name"], **features._to_yaml_dict()} for c in configs
        ]
    card_data = DatasetCardData(
        license=data["license"],
        language=inputs.language or None,
        task_categories=["text-generation"],
        size_categories=[data["size_category"]],
        source_datasets=data["source_datasets"] or None,
        annotations_creators=["machine-generated"],
        pretty_name=inputs.pretty_name,
        tags=["regen", "synthetic", "speculative-decoding", "drafter-training", data["format"]],
        configs=configs,
        **extra,
    )
    return DatasetCard.from_template(card_data, template_str=BODY, d=data, models=sorted(model))


def write_card(out_dir: Path, summary: Any, inputs: CardInputs) -> dict[str, Any]:
    """Write README.md and regen.json beside the data; return the facts."""
    data = gather(out_dir, summary, inputs)
    card = build_card(out_dir, data, inputs, summary.schema)
    atomic_write_json(out_dir / FACTS, data)
    atomic_write_bytes(out_dir / CARD, str(card).encode())
    return data
