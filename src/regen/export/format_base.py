"""What every output row shape shares: the reasoning placement and the warnings."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

from regen.errors import ConfigError
from regen.finished.mask import Encoded
from regen.finished.record import Completion, SampleKey, key_of

REASONING_MODES = ("inline", "field", "drop")
CUT_ANSWER = "cut_answer"  # what a conversation target leaves out (Format.leaves_out)
ONE_FILE = "train-00000-of-00001.jsonl"  # how a train split of one file is named


def inline_reasoning(m: dict, mode: str) -> tuple[str, str | None]:
    """(content, reasoning kept apart or None), with reasoning placed per `mode`."""
    content = m.get("content") or ""
    reasoning = (m.get("reasoning_content") or "").strip()
    if m.get("role") != "assistant" or not reasoning or mode == "drop":
        return content, None
    if mode == "inline":
        return f"<think>\n{reasoning}\n</think>\n\n{content}", None
    return content, reasoning


def named(completion: Completion) -> dict[str, Any]:
    """The fields that name a row: the prompt's id exactly as the prompt file gave it and the
    sample number apart (never glued into one string the user did not write)."""
    return {"id": completion.id, "sample": completion.sample}


class Format:
    name: ClassVar[str]
    needs_tokenizer: ClassVar[bool] = False
    file_types: ClassVar[tuple[str, ...]] = ("jsonl",)
    reads_reasoning_field: ClassVar[bool] = False  # does the consumer read reasoning_content?
    per_domain: ClassVar[bool] = True  # one config (folder) per domain; False: one file a split
    how_to_train: ClassVar[str] = ""
    snippet: ClassVar[str] = ""  # code the trainer needs, printed with how_to_train
    # what to set when rows hold assistant turns the target did not write (conversation targets)
    last_turn_only: ClassVar[str] = ""

    def __init__(self, reasoning: str = "inline", supervise: str = "regenerated") -> None:
        if reasoning not in REASONING_MODES:
            raise ConfigError(f"--reasoning must be one of {', '.join(REASONING_MODES)}")
        self.reasoning, self.supervise = reasoning, supervise

    def supervision_warning(self, rows_with_source_turns: int) -> str | None:
        """Conversation targets: the trainer renders and masks; say how to train only the
        turns the target wrote (tokenised targets carry regen's own mask)."""
        if self.needs_tokenizer or not rows_with_source_turns or self.supervise == "all":
            return None
        return (
            f"{rows_with_source_turns} rows hold earlier assistant turns that the source dataset "
            f"wrote, not the target: {self.last_turn_only}"
        )

    def row(self, completion: Completion, enc: Encoded | None) -> dict[str, Any]:
        raise NotImplementedError

    def key(self, row: dict[str, Any]) -> SampleKey:
        """The (prompt id, sample) a row of this format holds: what a merge dedups on."""
        return str(row["id"]), int(row["sample"])

    def upgrade(self, row: dict[str, Any]) -> dict[str, Any]:
        """A row of an earlier export in today's shape: exports written before the sample
        had its own field carry `"id": "ID#SAMPLE"`; a merge rewrites them as id + sample."""
        if "sample" in row:
            return row
        prompt_id, sample = key_of(row)
        return {"id": prompt_id, "sample": sample, **{k: v for k, v in row.items() if k != "id"}}

    def reasoning_warning(self, samples_with_reasoning: int) -> str | None:
        """Say so when this target would lose the reasoning some samples carry."""
        if not samples_with_reasoning or self.needs_tokenizer:
            return None  # tokenised targets hold what the template renders (check judges it)
        if self.reasoning == "drop":
            return f"{samples_with_reasoning} samples carry reasoning; --reasoning drop left it out"
        if self.reasoning == "field" and not self.reads_reasoning_field:
            return (
                f"{samples_with_reasoning} samples carry reasoning in reasoning_content, which "
                f"{self.name}'s reader ignores: use --reasoning inline to keep it"
            )
        return None

    def leaves_out(self, completion: Completion) -> str | None:
        """Why this target cannot carry the row, or None. A conversation target is rendered
        and masked by its trainer, which supervises an end-of-turn after every assistant
        turn: on a turn cut at the answer cap (Completion.cut) that trains a stop the
        target never drew. A tokenised target carries regen's mask, which ends such a turn
        where the model stopped (finished/mask.py)."""
        if completion.cut and self.is_training_set and not self.needs_tokenizer:
            return CUT_ANSWER
        return None

    def problem(self, row: dict[str, Any]) -> str | None:
        """Why this target's trainer would skip (or fail on) the row, or None: the rows are
        still written, and the summary names them (`trainer` is who would skip them)."""
        return None

    # what to do when the train split is several files (--max-file-mb); {n}: how many
    several_files: ClassVar[str] = ""

    def train_settings(self, train_files: int) -> str:
        """`how_to_train` for an export whose train split is `train_files` files: a trainer
        that opens one file is told the first one's name and what to do with the others."""
        if train_files <= 1 or not self.several_files:
            return self.how_to_train
        first = ONE_FILE.replace("00001", f"{train_files:05d}")
        more = self.several_files.format(n=train_files)
        return f"{self.how_to_train.replace(ONE_FILE, first)} {more}"

    trainer: ClassVar[str] = ""
    is_training_set: ClassVar[bool] = True  # False: one file, no validation split

    def extra_rows(self, runs: Iterable[str | Path]) -> Iterator[dict[str, Any]]:
        """Rows beyond the completions (the batch format's failed requests)."""
        return iter(())
