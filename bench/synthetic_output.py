"""A finished output dir written without a server: sealed shards of small records in regen's
own shard format, with their `.keys` sidecars and a manifest from regen's own
`check_and_record`, for the resume benchmarks (bench_generate.py's resume part, and
bench_scale.py, which runs it with a baseline tree's code)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson

from fleet_processes import MODEL


def completion_line(i: int, sampling: dict[str, Any], pad: int = 0) -> bytes:
    """A record in regen's format (`id` and `sample` first): ~330 bytes plus `pad`."""
    pid = f"p{i:07d}"
    question = f"question {pid}"
    record = {
        "id": pid,
        "sample": 0,
        "messages": [
            {"role": "user", "content": question},
            {"role": "assistant", "content": f"answer to: {question}" + " lorem" * (pad // 6)},
        ],
        "finish_reason": "stop",
        "usage": {"prompt_tokens": 10, "completion_tokens": 8},
        "meta": {
            "server": "127.0.0.1:1",
            "model": MODEL,
            "sampling": sampling,
            "attempts": 1,
            "latency_s": 0.01,
            "line": i + 1,
        },
    }
    return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)


def regen_api() -> SimpleNamespace:
    """The names the synthesis and the phases need, from this tree or from an older one
    (bench_scale runs a baseline tree beside this one, each with its own code)."""
    try:
        from regen.format.layout import OutputLayout
        from regen.format.manifest import check_and_record, fingerprint
        from regen.format.part import Part
        from regen.format.writer import seal_shard
        from regen.run.config import build_config

        def config(prompts: Path, out: Path, part: Any) -> Any:
            paths = {"input.prompts": prompts, "output.dir": out, "part": part}
            return build_config({**paths, "fleet.servers": ["http://127.0.0.1:1"]})
    except ImportError:  # before the output format had a package of its own
        from regen.run.layout import OutputLayout
        from regen.run.manifest import check_and_record, fingerprint
        from regen.run.writer import seal_shard
        from regen.scale.partition import Part

        from regen.run.config import GenerateConfig

        def config(prompts: Path, out: Path, part: Any) -> Any:
            servers = ["http://127.0.0.1:1"]
            return GenerateConfig(prompts=prompts, output_dir=out, servers=servers, part=part)

    return SimpleNamespace(
        OutputLayout=OutputLayout,
        check_and_record=check_and_record,
        fingerprint=fingerprint,
        Part=Part,
        seal_shard=seal_shard,
        config=config,
    )


def synthesize_output(
    prompts: Path, out: Path, finished: int, shard_records: int, pad: int = 0, parts: int = 1
) -> None:
    """An output dir holding prompts 0..finished-1 as sealed shards, and a manifest that
    matches `prompts` and regen's default sampling (what the resume run will use). With
    `parts` > 1, as N `--shard I/N` processes would have left it: each part's prompts in
    that part's own shards."""
    api = regen_api()
    OutputLayout, Part, check_and_record = api.OutputLayout, api.Part, api.check_and_record
    fingerprint, seal_shard = api.fingerprint, api.seal_shard

    layout = OutputLayout.at(out)
    layout.completions.mkdir(parents=True)
    config = api.config(prompts, out, Part(0, parts))
    sampling = asdict(config.sampling)
    input_fp = fingerprint(prompts)
    for index in range(parts):
        part = Part(index, parts)
        mine = [i for i in range(finished) if part.owns_id(f"p{i:07d}")]
        tag, shard_keys = _shard_format(input_fp.xxh3_128, part)
        for seq, start in enumerate(range(0, len(mine), shard_records), start=1):
            rows = mine[start : start + shard_records]
            shard = layout.completions / f"part-{tag}-{seq:05d}.jsonl"
            shard.write_bytes(b"".join(completion_line(i, sampling, pad) for i in rows))
            seal_shard(shard, shard_keys((f"p{i:07d}", 0, i + 1) for i in rows), False)
    resolved = config.resolved(["http://127.0.0.1:1"], MODEL)
    check_and_record(
        layout.manifest,
        config=resolved,
        input_fp=input_fp,
        allow_changed_input=False,
        allow_changed_sampling=False,
    )


def _shard_format(input_digest: str, part: Any) -> tuple[str, Callable[[Iterator[tuple]], Any]]:
    """Shard names and sidecar keys as the regen being benchmarked writes them: with the
    input's digest in the name and line numbers in the sidecar (regen.format.sidecar), or, for
    a baseline older than that, the plain `[(id, sample)]` sidecar."""
    try:
        from regen.format.names import INPUT_ID_CHARS
        from regen.format.sidecar import ShardKeys
    except ImportError:  # before the output format had a package of its own
        try:
            from regen.run.sidecar import ShardKeys  # type: ignore[no-redef]
            from regen.run.writer import INPUT_ID_CHARS  # type: ignore[no-redef]
        except ImportError:
            plain = f"19700101T000000-bench-{part.index}"
            return plain, lambda rows: [(i, s) for i, s, _ in rows]
    tag = f"19700101T000000-bench-{part.index}"
    if not part.whole:
        tag += "-s" + part.name.replace("-of-", "of")
    return f"{tag}-i{input_digest[:INPUT_ID_CHARS]}", ShardKeys.of
