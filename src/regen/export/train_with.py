"""The summary's `train with:` line, for an export in a bucket.

Trainers open local files (SpecForge's `prompts_path` and `train_data_path` with `open()`,
LLaMA-Factory's `file_name`, speculators' paths), and `datasets.load_dataset("s3://...")` of
a folder does not find its files. So a bucket export says what works as printed: for
`datasets`, the builder with the files of each split and the storage options of the
endpoint regen used; for the others, a copy to a local folder, then the trainer's settings
on that folder. Credentials are never printed: both read them from the environment, as regen
does.

Under HF_HUB_OFFLINE=1 `datasets` reads no remote file at all, a bucket's included ("Offline
mode is enabled. Tried to reach s3://...": datasets/utils/file_utils.py fsspec_head and
fsspec_get in 5.2); its own HF_DATASETS_OFFLINE=0, read before HF_HUB_OFFLINE
(datasets/config.py), lets it read the bucket while the Hub stays offline. Where regen runs
offline, the line says so.
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
        line = how_to_train.replace(DATASETS_CALL, datasets_call(url, files))
        return line + OFFLINE_NOTE if datasets_offline() else line
    local = url.rstrip("/").rsplit("/", 1)[-1]
    return (
        f"copy the export to a local folder first (trainers open local files):\n"
        f"  {copy_command(url, local)}\n"
        f"then {how_to_train.replace('OUT', local)}"
    )


OFFLINE_NOTE = (
    "\n  HF_HUB_OFFLINE is set here, and under it `datasets` reads no remote file, a bucket's "
    'included ("Offline mode is enabled"): run that line with HF_DATASETS_OFFLINE=0 in '
    "the environment, which lets `datasets` read the bucket and keeps the Hub offline"
)


def datasets_offline() -> bool:
    """Whether `datasets` here would refuse the bucket: its own reading of the variables."""
    from datasets import config

    return bool(config.HF_HUB_OFFLINE)


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
