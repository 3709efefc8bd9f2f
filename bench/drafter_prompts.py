"""Prompts in three domains for bench_drafter.py, written offline from templates and a seed.

No dataset installs offline here, so the bench writes its own "public dataset": code, math and
chat prompts as ShareGPT-style message files, one per domain, and a `regen prepare` recipe that
blends them (balanced, or code-skewed as the seeds' team's blend came out). The same seed gives
the same files, byte for byte, so a rerun regenerates nothing that resume already holds.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

DOMAINS = ("code", "math", "chat")

LANGUAGES = ("Python", "JavaScript", "Go", "Rust", "Java", "C", "TypeScript", "Ruby")
CODE_TASKS = (
    "reverses a string",
    "checks whether a number is prime",
    "returns the n-th Fibonacci number",
    "merges two sorted lists",
    "counts the words in a sentence",
    "removes duplicates from a list while keeping the order",
    "finds the largest element of an array",
    "computes the factorial of n",
    "checks whether a string is a palindrome",
    "flattens a nested list",
    "converts Celsius to Fahrenheit",
    "sums the digits of an integer",
    "returns the greatest common divisor of two numbers",
    "sorts a list of records by a key",
    "parses a date in ISO format",
    "counts the vowels in a string",
    "implements binary search",
    "rotates an array by k positions",
    "finds the intersection of two lists",
    "capitalises every word in a sentence",
    "validates an email address",
    "computes the mean and the median of a list",
    "groups words that are anagrams",
    "reads a CSV file and sums one column",
    "implements a stack with push and pop",
    "checks that brackets in a string are balanced",
    "returns the k most frequent items",
    "converts a number to Roman numerals",
    "transposes a matrix",
    "generates all subsets of a set",
)
CODE_ASKS = (
    "Write a {lang} function that {task}.",
    "In {lang}, how do I write a function that {task}? Show the code.",
    "Show a short {lang} example of a function that {task}, with a comment.",
    "Implement a {lang} function that {task}, and explain it in one sentence.",
)

NAMES = ("Ana", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana", "Ivan", "Jade")
ITEMS = ("apples", "pencils", "books", "tickets", "cookies", "stamps", "marbles", "cups")
MATH_ASKS: tuple[Callable[[random.Random], str], ...] = (
    lambda r: (
        f"{r.choice(NAMES)} buys {r.randint(3, 19)} {r.choice(ITEMS)} at "
        f"${r.randint(2, 15)} each and pays with a ${r.choice((50, 100, 200))} bill. "
        "How much change is given back? Show your steps."
    ),
    lambda r: f"What is {r.randint(12, 99)} times {r.randint(12, 99)}? Explain step by step.",
    lambda r: (
        f"Solve for x: {r.randint(2, 9)}x + {r.randint(1, 40)} = {r.randint(41, 120)}. "
        "Show each step."
    ),
    lambda r: (
        f"A train travels {r.randint(60, 480)} km in {r.randint(2, 8)} hours. "
        "What is its average speed? Explain."
    ),
    lambda r: f"What is {r.randint(5, 60)}% of {r.randint(40, 900)}? Show the calculation.",
    lambda r: (
        f"A rectangle is {r.randint(3, 30)} cm long and {r.randint(2, 20)} cm wide. "
        "What are its area and perimeter?"
    ),
    lambda r: (
        f"{r.choice(NAMES)} has {r.randint(20, 90)} {r.choice(ITEMS)} and gives away "
        f"{r.randint(2, 9)} to each of {r.randint(2, 6)} friends. How many are left?"
    ),
    lambda r: f"Is {r.randint(100, 999)} divisible by {r.randint(3, 13)}? Explain how you know.",
)

TOPICS = (
    "learning a new language",
    "sleeping better",
    "saving money",
    "starting to run",
    "working from home",
    "cooking for one",
    "planting a vegetable garden",
    "preparing for a job interview",
    "reading more books",
    "keeping a houseplant alive",
    "travelling on a budget",
    "writing a good email",
    "staying focused while studying",
    "making friends in a new city",
    "reducing plastic waste",
    "taking better photos with a phone",
    "learning to play the guitar",
    "eating more vegetables",
    "organising a small kitchen",
    "speaking in public",
    "keeping a daily journal",
    "training a puppy",
    "moving to a new flat",
    "learning to swim as an adult",
)
THINGS = ("the sea", "autumn", "a city at night", "a cat", "the moon", "rain", "a library")
CONCEPTS = (
    "photosynthesis",
    "gravity",
    "inflation",
    "the water cycle",
    "vaccines",
    "electricity",
    "the internet",
    "climate",
    "democracy",
    "a rainbow",
    "tides",
    "volcanoes",
    "compound interest",
    "the seasons",
    "recycling",
)
STYLES = ("", " Keep it short.", " Use a numbered list.", " Be friendly.", " Give one example.")
CHAT_ASKS: tuple[Callable[[random.Random], str], ...] = (
    lambda r: f"Give me three tips for {r.choice(TOPICS)}.",
    lambda r: f"What are the pros and cons of {r.choice(TOPICS)}?",
    lambda r: f"Explain {r.choice(CONCEPTS)} to a ten-year-old.",
    lambda r: f"Write a short poem about {r.choice(THINGS)}.",
    lambda r: f"Describe {r.choice(THINGS)} in two sentences.",
    lambda r: f"Why is {r.choice(CONCEPTS)} important? Answer briefly.",
    lambda r: f"I want to get better at {r.choice(TOPICS)}. Where should I start?",
    lambda r: f"What mistakes do beginners make when {r.choice(TOPICS)}?",
)


def code_prompts(rng: random.Random) -> list[str]:
    every = [
        ask.format(lang=lang, task=task)
        for task in CODE_TASKS
        for lang in LANGUAGES
        for ask in CODE_ASKS
    ]
    rng.shuffle(every)
    return every


def drawn(ask: Callable[[random.Random], str], rng: random.Random, n: int) -> list[str]:
    """Up to n distinct prompts from a template (bounded tries: the templates give far more)."""
    seen: dict[str, None] = {}
    for _ in range(n * 20):
        seen.setdefault(ask(rng), None)
        if len(seen) == n:
            break
    return list(seen)


def write_sources(folder: Path, per_domain: int, seed: int) -> dict[str, Path]:
    """One message file per domain, each with `per_domain` distinct prompts."""
    rng = random.Random(seed)
    prompts = {
        "code": code_prompts(rng)[:per_domain],
        "math": drawn(lambda r: r.choice(MATH_ASKS)(r), rng, per_domain),
        "chat": drawn(lambda r: r.choice(CHAT_ASKS)(r) + r.choice(STYLES), rng, per_domain),
    }
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for domain, texts in prompts.items():
        paths[domain] = folder / f"{domain}.jsonl"
        with paths[domain].open("w") as out:
            for text in texts:
                out.write(json.dumps({"messages": [{"role": "user", "content": text}]}) + "\n")
    return paths


def user_sources(folder: Path) -> dict[str, Path]:
    """Your own prompt files: each `<domain>.jsonl` (or .json, .parquet) in the folder is
    one domain, in any format `regen prepare` reads."""
    found = {
        p.stem: p for p in sorted(folder.iterdir()) if p.suffix in (".jsonl", ".json", ".parquet")
    }
    if len(found) < 2:
        raise SystemExit(
            f"--sources {folder}: name one file per domain, e.g. code.jsonl, "
            f"math.jsonl and chat.jsonl (found {sorted(found)})"
        )
    return found


def write_recipe(
    path: Path, sources: dict[str, Path], weights: dict[str, float], total: int, seed: int
) -> Path:
    """A `regen prepare` recipe: each domain's file is one source, its category the domain."""
    lines = [f"total: {total}", f"seed: {seed}", "sources:"]
    for domain in sources:
        lines += [
            f"  - name: {domain}",
            f"    path: {sources[domain].resolve()}",
            f"    category: {domain}",
            f"    weight: {weights[domain]}",
        ]
    path.write_text("\n".join(lines) + "\n")
    return path
