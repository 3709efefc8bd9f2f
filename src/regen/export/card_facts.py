"""What a dataset card says about how the data was made, gathered from the run's own files.

Everything comes from what regen wrote: each run's `manifest.json` (target model, sampling,
servers, the prompt file), the `prepare` report beside the prompt file (sources, blend,
composition), and the export's summary (configs, check verdict, draft vocabulary). The same
dict goes into the card's body and, machine-readable, into `regen.json`.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from regen import __version__
from regen.errors import ConfigError
from regen.finished.score_place import score_json_of
from regen.jsonio import is_file, read_json
from regen.storage import open_store

UNKNOWN = "unknown"
HUB_SUFFIXES = (".json", ".jsonl", ".parquet", ".csv", ".txt", ".gz", ".zst")


def parse_licenses(values: Iterable[str]) -> dict[str, str]:
    """`--license SPDX` (every source) or `--license SOURCE=SPDX`, into {source or "*": id}."""
    out: dict[str, str] = {}
    for value in values:
        source, sep, license_id = value.rpartition("=")
        if (sep and not source) or not license_id.strip():
            raise ConfigError(
                f"--license {value!r}: expected SPDX or SOURCE=SPDX",
                hint="for example --license apache-2.0 or --license metamath=mit",
            )
        out[source.strip() or "*"] = license_id.strip().lower()
    return out


def run_facts(location: str | Path) -> dict[str, Any]:
    """One run: what its manifest says, and the prepare report of its prompt file."""
    manifest = open_store(location).read_manifest() or {}
    config = manifest.get("config") or {}
    prompts = (manifest.get("input") or {}).get("path") or config.get("prompts")
    report = _prepare_report(prompts)
    return {
        "run": str(location),
        "regen_version": manifest.get("version", UNKNOWN),
        "created": manifest.get("created"),
        "model": config.get("model", UNKNOWN),
        "engine": "embedded llama.cpp (llama-cpp-python)"
        if config.get("embedded")
        else f"{len(config.get('servers') or [])} OpenAI-compatible server(s)",
        "sampling": config.get("sampling"),
        "samples_per_prompt": config.get("samples_per_prompt", 1),
        "regenerate_turns": config.get("regenerate_turns", "last"),
        "prompts": prompts,
        "prompts_xxh3_128": (manifest.get("input") or {}).get("xxh3_128"),
        "prompts_lines": (manifest.get("input") or {}).get("lines"),
        "prepare": report,
        "generate_command": _generate_command(config, prompts, location),
        "acceptance": acceptance_profile(location),
    }


def acceptance_profile(location: str | Path) -> dict[str, Any] | None:
    """What `regen score` measured (RUN/score/score.json, a bucket run's too), compacted: per
    draft and group, the rows, the top-1 match and tau at each k."""
    path = score_json_of(location)
    if path is None:
        return None
    report = read_json(path)
    drafts = []
    for draft in report.get("drafts") or []:
        groups = {}
        for name, tally in (draft.get("groups") or {}).items():
            taus = {
                str(at.get("k")): (at.get("tau") or {}).get("value")
                for at in tally.get("by_k") or []
            }
            groups[name] = {
                "rows": tally.get("rows"),
                "tau": taus,
                "top1_match": (tally.get("top1_match") or {}).get("value"),
            }
        drafts.append({"name": draft.get("name"), "groups": groups})
    return {"by": report.get("by"), "k": report.get("k") or [], "drafts": drafts}


def _prepare_report(prompts: str | None) -> dict[str, Any] | None:
    if not prompts or "://" in prompts:
        return None  # a prompt file in a bucket: its report is not read here
    path = Path(prompts)
    report = path.with_name(path.stem + ".report.json")
    return read_json(report) if is_file(report) else None


def _generate_command(config: dict, prompts: str | None, location: str | Path) -> str:
    """The `regen generate` line that reproduces the run's sampling and request shape."""
    words = [
        "regen",
        "generate",
        "--prompts",
        str(prompts or "PROMPTS.jsonl"),
        "--output-dir",
        str(location),
    ]
    if config.get("model") and not config.get("embedded"):
        words += ["--model", str(config["model"])]
    sampling = config.get("sampling") or {}
    flags = {
        "max_tokens": "--max-output-tokens",
        "temperature": "--temperature",
        "top_p": "--top-p",
        "top_k": "--top-k",
        "seed": "--seed",
        "thinking": "--thinking",
    }
    for key, flag in flags.items():
        if sampling.get(key) is not None:
            words += [flag, str(sampling[key])]
    for key, flag in (
        ("samples_per_prompt", "--samples-per-prompt"),
        ("regenerate_turns", "--regenerate-turns"),
    ):
        if key in config:
            words += [flag, str(config[key])]
    return shlex.join(words)


def source_licenses(runs: list[dict], given: dict[str, str]) -> dict[str, str]:
    """Each source's license: `--license SOURCE=` first, then the prepare report's, then the
    `--license` for every source, else unknown."""
    out: dict[str, str] = {}
    for run in runs:
        for source in (run.get("prepare") or {}).get("sources", []):
            name = source.get("name") or source.get("dataset") or UNKNOWN
            out[name] = (
                given.get(name)
                or given.get(str(source.get("dataset")))
                or source.get("license")
                or given.get("*")
                or UNKNOWN
            )
    for name, license_id in given.items():
        if name != "*" and name not in out:
            out[name] = license_id
    if not out and "*" in given:
        out["*"] = given["*"]
    return out


def hub_sources(runs: list[dict]) -> list[str]:
    """Sources that name a Hub dataset (`owner/name`), not a local file."""
    names = []
    for run in runs:
        for source in (run.get("prepare") or {}).get("sources", []):
            name = str(source.get("dataset") or "")
            if name.count("/") == 1 and not name.endswith(HUB_SUFFIXES) and not Path(name).exists():
                names.append(name)
    return sorted(set(names))


def template_sha256(tok: Any) -> str | None:
    """A hash of the chat template the masks were built with (None without a tokenizer)."""
    template = getattr(tok, "chat_template", None)
    if not isinstance(template, str):
        return None
    return hashlib.sha256(template.encode()).hexdigest()


def size_category(rows: int) -> str:
    bounds = [
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
        (10_000_000, "1M<n<10M"),
    ]
    return next((name for bound, name in bounds if rows < bound), "10M<n<100M")


def regen_version() -> str:
    return __version__
