"""Refuse a prompt file that cannot be what `regen generate` reads, before anything is sent.

An empty file, or one of another shape (prompt/answer pairs, a prepare recipe), would
otherwise end "done" with exit 0 and every line in errors/. The first
lines decide: when most of them are unusable, the run stops with the reasons and the command
that converts the file. The same rule is applied to the whole file at the end of the run.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import orjson

from regen.batch_input import batch_models
from regen.errors import InputFileError
from regen.inputs import read_prompts
from regen.jsonio import iter_lines, open_binary
from regen.prompt_fields import PLAIN_PROMPT_KEYS
from regen.records import BadLine

HEAD_LINES = 1000  # enough to judge a file, quick to read even from object storage
MOSTLY = 0.5  # more unusable lines than this share: the file is not a prompt file
SHOWN = 3  # reasons quoted in the message

# Keys that give away what a record is, and what to call it in the message.
SHAPES = (
    ({"query", "response"}, "query/response pairs"),
    ({"instruction", "output"}, "instruction/output pairs"),
    ({"prompt", "completion"}, "prompt/completion pairs"),
    ({"prompt", "response"}, "prompt/response pairs"),
    ({"question", "answer"}, "question/answer pairs"),
)
YAML_KEY = re.compile(rb"^[A-Za-z_][\w-]*:(\s|$)")
YAML = " (it looks like YAML, such as a `regen prepare` recipe)"
PARQUET_MAGIC = b"PAR1"  # the first (and last) four bytes of every Parquet file
CONVERTED = {"messages", "conversations", "conversation", "body", "request"}  # prepare reads


def check_input(path: str | Path) -> None:
    """Raise InputFileError if the file is empty or most of its first lines are unusable."""
    lines = usable = 0
    bad: list[BadLine] = []
    for entry in itertools.islice(read_prompts(path), HEAD_LINES):
        lines += 1
        if isinstance(entry, BadLine):
            bad.append(entry)
        else:
            usable += 1
    if lines == 0:
        raise InputFileError(
            f"the prompt file {path} is empty: there is nothing to generate",
            hint="check --prompts; `regen prepare --source DATA.jsonl -o prompts.jsonl` builds "
            "a prompt file from a dataset",
        )
    if mostly_unusable(lines, usable):
        raise unusable_error(path, lines, usable, bad, f"of the first {lines}")


def batch_models_in(path: str | Path) -> list[str] | None:
    """The models a batch file's first lines ask for (None: not a batch file)."""
    heads = (raw for _, raw in itertools.islice(iter_lines(path), HEAD_LINES))
    return batch_models(heads)


def mostly_unusable(lines: int, usable: int) -> bool:
    return lines > 0 and lines - usable > MOSTLY * lines


def unusable_error(
    path: str | Path, lines: int, usable: int, bad: list[BadLine], which: str
) -> InputFileError:
    if _is_parquet(path):  # its bytes read as lines of broken JSON: say what it is instead
        return InputFileError(
            f"{path} is a Parquet file; --prompts reads JSONL (one prompt per line)",
            hint=_parquet_fix(path),
        )
    reasons = "; ".join(f"line {b.line}: {b.message}" for b in bad[:SHOWN])
    shape, fix = _shape(path)
    return InputFileError(
        f"{path} is not a prompt file{shape}: {lines - usable} {which} line(s) are "
        f"unusable ({reasons})",
        hint=fix,
    )


def convert_command(path: str | Path, recipe: bool = False) -> str:
    if recipe:
        return f"regen prepare {path} -o prompts.jsonl"
    return f"regen prepare --source {path} -o prompts.jsonl"


def _converted(command: str) -> str:
    return f"convert it with `{command}` and pass that file to --prompts"


def _parquet_fix(path: str | Path) -> str:
    """prepare reads a Parquet file by its name: one named otherwise is renamed first."""
    if str(path).endswith(".parquet"):
        return _converted(convert_command(path))
    return f"rename it to end in .parquet, then {_converted(convert_command('NAME.parquet'))}"


def _says_nothing(line: bytes) -> bool:
    text = line.strip()
    return not text or text.startswith(b"#") or text == b"---"


def _is_parquet(path: str | Path) -> bool:
    with open_binary(path) as fh:
        return fh.read(4) == PARQUET_MAGIC


def _shape(path: str | Path) -> tuple[str, str]:
    """(' (it looks like ...)' or '', the fix) from the first line that says something. A
    YAML file's comments and document start say nothing: a recipe opens with a comment as
    often as not. The fix names `regen prepare` only for a shape it converts."""
    first = next((line for _, line in iter_lines(path) if not _says_nothing(line)), b"")
    if YAML_KEY.match(first):
        return YAML, _converted(convert_command(path, recipe=True))
    try:
        record = orjson.loads(first)
    except orjson.JSONDecodeError:
        record = None
    if not isinstance(record, dict):
        return "", "--prompts takes JSONL: one JSON object a line, with its turns (see the reasons)"
    for keys, name in SHAPES:
        if keys <= record.keys():
            return f" (it looks like {name})", _converted(convert_command(path))
    if CONVERTED.intersection(record) or any(
        isinstance(record.get(k), str) for k in PLAIN_PROMPT_KEYS
    ):
        return "", _converted(convert_command(path))
    return "", "give each line 'messages' (role/content), 'conversations' (from/value) or 'prompt'"
