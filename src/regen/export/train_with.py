"""The summary's `train with:` line, for an export in a bucket.

Trainers open local files (SpecForge's `prompts_path` and `train_data_path` with `open()`,
LLaMA-Factory's `file_name`, speculators' paths), and `datasets.load_dataset("s3://...")` of
a folder does not find its files. So a bucket export says what works as printed: for
`datasets`, the builder with the files of each split and the storage options of the
endpoint regen used; for the others, a copy to a local folder, then the trainer's settings
on that folder. Credentials are never printed: both read them from the environment, as regen
does.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import PurePosixPath

DATASETS_CALL = 'datasets.load_dataset("OUT")'  # what a format's how_to_train says for a folder
BUILDERS = {".jsonl": "json", ".parquet": "parquet"}


def bucket_train_with(how_to_train: str, url: str, files: list[str]) -> str:
    """What to print after `train with:` for an export written to `url`."""
    if DATASETS_CALL in how_to_train:
        return how_to_train.replace(DATASETS_CALL, datasets_call(url, files))
    local = url.rstrip("/").rsplit("/", 1)[-1]
    return (
        f"copy the export to a local folder first (trainers open local files):\n"
        f"  {copy_command(url, local)}\n"
        f"then {how_to_train.replace('OUT', local)}"
    )


def datasets_call(url: str, files: list[str]) -> str:
    """`datasets.load_dataset(BUILDER, data_files={split: glob}, storage_options=...)`: every
    domain's files of each split, read from the bucket."""
    root = url.rstrip("/")
    suffix = PurePosixPath(files[0]).suffix if files else ".jsonl"
    splits = dict.fromkeys(PurePosixPath(f).name.split("-")[0] for f in files)
    data_files = {s: f"{root}/data/*/{s}-*{suffix}" for s in splits}
    args = [_py(BUILDERS.get(suffix, "json")), f"data_files={_py(data_files)}"]
    options = storage_options(url)
    if options:
        args.append(f"storage_options={_py(options)}")
    return f"datasets.load_dataset({', '.join(args)})"


def storage_options(url: str) -> dict:
    """The endpoint of an S3-compatible store (AWS_ENDPOINT_URL, as regen read it), which
    older clients do not take from the environment; nothing for AWS itself."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if url.split("://", 1)[0] in ("s3", "s3a") and endpoint:
        return {"client_kwargs": {"endpoint_url": endpoint}}
    return {}


def copy_command(url: str, local: str) -> str:
    """A one-line copy of the bucket folder `url` into `local` with fsspec (which regen's
    bucket support installs), the same files wherever it is run again."""
    code = (
        f"import fsspec; fs, root = fsspec.core.url_to_fs({_py(url)}); "
        f'fs.get(root + "/", {_py(local + "/")}, recursive=True)'
    )
    return f"python -c {shlex.quote(code)}"


def _py(value: object) -> str:
    """A Python literal of strings and dicts of them (JSON is one, with double quotes)."""
    return json.dumps(value)
