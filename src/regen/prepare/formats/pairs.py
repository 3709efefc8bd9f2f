"""Instruction pairs: instruction/input/output (Alpaca), query/response (MetaMathQA),
query/answer (CodeFeedback), question/answer (WebInstructSub), prompt/response; and the
same prompt columns alone (`prompt`, `instruction`/`input`, `question`, `query`), a prompt
set without answers.

The answer column is the source's reference answer: it is not carried, since `generate`
replaces it with the target model's own."""

from __future__ import annotations

from regen.errors import InputError
from regen.prepare.formats.base import Adapter, Converted
from regen.prompt_fields import PLAIN_PROMPT_KEYS

PAIRS = (
    ("instruction", "output"),
    ("query", "response"),
    ("query", "answer"),
    ("question", "answer"),
    ("prompt", "response"),
    ("prompt", "completion"),
    ("instruction", "response"),
)
PROMPT_KEYS = tuple(dict.fromkeys(p for p, _ in PAIRS))


class InstructionPairs(Adapter):
    name = "pairs"

    @classmethod
    def detect(cls, row: dict) -> str | None:
        for prompt, answer in PAIRS:
            if isinstance(row.get(prompt), str) and answer in row:
                return f"'{prompt}'/'{answer}' columns"
        for prompt in PLAIN_PROMPT_KEYS:  # a prompt set without answers: generate writes them
            if isinstance(row.get(prompt), str):
                return f"the '{prompt}' column alone (prompts without answers)"
        return None

    def convert(self, row: dict) -> Converted:
        key = next((k for k in PROMPT_KEYS if isinstance(row.get(k), str)), None)
        if key is None:
            raise InputError(
                f"no prompt column (looked for {', '.join(PROMPT_KEYS)})",
                kind="missing_field",
                hint="rename the column, or choose the matching --format",
            )
        text = row[key]
        if key == "instruction" and isinstance(row.get("input"), str) and row["input"].strip():
            text = f"{text}\n\n{row['input']}"
        messages = []
        if isinstance(row.get("system"), str) and row["system"].strip():
            messages.append({"role": "system", "content": row["system"]})
        messages.append({"role": "user", "content": text})
        answers = {a for p, a in PAIRS if p == key}
        return Converted(messages, None, frozenset({key, "input", "system", *answers}))
