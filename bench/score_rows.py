"""The prompts and the run shape the parts of bench_score.py share."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

PROMPTS = {
    "chat": [
        "Say hello to a new colleague.",
        "Give me a tip for sleeping better.",
        "What should I pack for a beach trip?",
        "Describe autumn in two sentences.",
        "How do I make a cup of tea?",
        "Suggest a name for a coffee shop.",
        "What is a good hobby for a rainy day?",
        "Write a short thank-you note.",
    ],
    "code": [
        "Write a Python function that reverses a string.",
        "Write a Python function that returns the largest number in a list.",
        "Write a for loop in Python that prints 1 to 10.",
        "Write a Python class for a bank account.",
        "Write a SQL query selecting all users.",
        "Write a JavaScript function that adds two numbers.",
        "Write a Python function that checks if a number is even.",
        "Write a bash command that counts lines in a file.",
    ],
    "math": [
        "What is 12 times 7?",
        "What is the square root of 81?",
        "What is 15% of 200?",
        "Solve for x: 2x + 6 = 14.",
        "What is the area of a circle of radius 3?",
        "What is 1001 minus 999?",
        "How many minutes are in 3 hours?",
        "What is the sum of the angles in a triangle?",
    ],
}


def write_run(root: Path, rows: Iterable[dict]) -> Path:
    (root / "completions").mkdir(parents=True, exist_ok=True)
    with open(root / "completions" / "00000.jsonl", "w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    return root


def record(rid: str, category: str, prompt: list[int], answer: list[int]) -> dict:
    return {
        "id": rid,
        "sample": 0,
        "category": category,
        "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
        "token_ids": {"prompt": prompt, "completion": answer},
    }
