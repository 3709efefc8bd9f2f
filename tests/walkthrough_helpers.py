"""Where the walkthrough is shown (the docs page in full, the README cut short), the
commands it replays, and how a shown block is matched against what regen printed: a
shown line `...` stands for lines left out, `...` in a line for text cut out of it, and
figures that differ per machine are normalised on both sides by the narrow patterns of
MACHINE."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]


README = ROOT / "README.md"


WALKTHROUGH = ROOT / "docs" / "walkthrough.md"  # every command, every line it prints


def readme_walkthrough() -> str:
    """The README's ten-minute walkthrough (the text between its two headings)."""
    text = README.read_text()
    return text[text.index("## Ten minutes on the embedded") : text.index("## On a real fleet")]


# Where the walkthrough is shown: the docs page in full, the README cut short.
SHOWN_IN = {"docs/walkthrough.md": WALKTHROUGH.read_text, "README.md": readme_walkthrough}


CONSOLE = re.compile(r"```console\n(.*?)```", re.S)


# The walkthrough's commands, in the order a user runs them.
REPLAYED = [
    "regen demo",
    "regen prepare examples/recipe.yaml --output work/prompts.jsonl",
    "regen plan --prompts work/prompts.jsonl --output-dir work/run --max-output-tokens 256"
    " --seed 7 --sample 8",
    "regen generate --prompts work/prompts.jsonl --output-dir work/run --max-output-tokens 256"
    " --seed 7",
    "regen status work/run",
    "regen check work/run --tokenizer embedded --html work/report.html",
    "regen export work/run --output-dir work/specforge --format specforge",
    "regen export work/run --output-dir work/tokenized --format tokenized --tokenizer embedded"
    " --drop-degenerate --license apache-2.0",
    "python -c \"import datasets; print(datasets.load_dataset('work/tokenized', 'math'))\"",
]


# Walkthrough commands not replayed, and why.
NOT_REPLAYED = {
    # Two more servers, that steps 3-7 do not use: tests/test_serve.py runs serve (on
    # stand-in engines).
    "regen serve --engine llamacpp": "a fleet beside the walkthrough's embedded runs",
    "regen serve --status": "that fleet's status",
    "regen serve --engine sglang": "needs GPUs and SGLang",
    "regen serve --engine vllm": "needs GPUs and vLLM",
    "regen plan --prompts /data/prompts.jsonl": "a fleet of GPUs",
    "regen generate --prompts work/prompts.jsonl --output-dir /data/run": "a fleet of GPUs",
    "setsid regen generate": "a multi-day run on a GPU node",
    "regen status /data/run": "that run's status",
    "tail -f": "that run's log",
}


TIME = r"\d+m\d\ds"  # a duration as regen prints one: 0m32s


MACHINE = [
    (r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] ", "[TIME] "),
    (r"127\.0\.0\.1:\d+", "127.0.0.1:PORT"),
    (r"\bpid \d+ on [\w.-]+;", "pid PID on HOST;"),
    (r"\b\d+\.\d\d( compl)?/s", r"RATE\1/s"),
    (r"\b\d+ (output )?tok/s", r"RATE \1tok/s"),
    (rf"\bETA {TIME}", "ETA TIME"),
    (rf"\b((?:in|about|P10|P90|estimate) +){TIME}", r"\1TIME"),
    (r"\blatency (mean )?\d+\.\ds( P90 \d+\.\ds)?", r"latency \1LATENCY"),
    (r"\bupdated \d+\.\ds ago", "updated SECONDS ago"),
    (r"\bdrain \d+(\.\d+s|ms), fleet idle \d+%", "drain SECONDS, fleet idle SHARE"),
]


# A progress line logged every --log-interval (30 s) while requests are in flight: how many
# print, and the counts at each, depend on the machine's speed (none on one that finishes in
# 30 s; no ETA yet on one that has not finished an answer by then).
PERIODIC = re.compile(
    r"^\[TIME\] (?P<done>\d+)/(?P<total>\d+) \(\d+\.\d%\) RATE compl/s RATE tok/s"
    r" ETA (TIME|\?) errors 0 servers 1/1 up, [1-9]\d* in flight$"
)


def shown(command: str, text: str) -> list[str] | None:
    """The lines TEXT shows under `$ <command>`, up to its next command (None: not shown)."""
    for block in CONSOLE.findall(text):
        lines = block.splitlines()
        if f"$ {command}" in lines:
            after = lines[lines.index(f"$ {command}") + 1 :]
            end = next((i for i, line in enumerate(after) if line.startswith("$ ")), len(after))
            return [line for line in after[:end] if line.strip()]
    return None


def normalise(line: str, work: str | None = None) -> str:
    if work is not None:
        line = line.replace(work, "$WORK")
    for pattern, replacement in MACHINE:
        line = re.sub(pattern, replacement, line)
    periodic = PERIODIC.match(line)
    if periodic and periodic["done"] != periodic["total"]:
        return f"[TIME] (every 30 s) N/{periodic['total']}, errors 0 servers 1/1 up"
    return line


def pattern(expected: list[str]) -> str:
    """A regex for the printed text (normalised lines, each ending in a newline)."""
    parts = []
    for line in expected:
        line = normalise(line)
        if line == "...":
            parts.append(r"(?:.*\n)*?")
        elif line.startswith("[TIME] (every 30 s)"):
            parts.append(rf"(?:{re.escape(line)}\n)*")
        else:  # text cut out of a long line
            parts.append(".*".join(re.escape(cut.rstrip()) for cut in line.split("...")) + r"\n")
    return "".join(parts)


def assert_prints(expected: list[str], printed: str, work: str) -> None:
    text = "".join(normalise(line, work) + "\n" for line in printed.splitlines() if line.strip())
    if re.fullmatch(pattern(expected), text):
        return
    shown_until = max(n for n in range(len(expected) + 1) if re.match(pattern(expected[:n]), text))
    want = expected[shown_until] if shown_until < len(expected) else "(nothing more)"
    raise AssertionError(f"shown line {want!r} is not what printed next:\n{text}")
