"""What SpecForge's `data.prompts_path` loader holds in memory for a pre-tokenised JSONL file
(`--format specforge-tokenized`): bytes a token of the file, and of the process after
SpecForge 0.2.0's `prepare_prompt_tasks` read it (every row as Python lists of ints).

    .venv/bin/python bench/bench_specforge_memory.py [--rows 3000] [--json FILE]

Rows of 800 to 3,000 tokens, ids drawn from a 151K vocabulary, a fifth of each row
unsupervised; the resident set is read from /proc before and after, in this process.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import tempfile
from pathlib import Path


def resident_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096


def write_rows(path: Path, rows: int) -> int:
    rng, tokens = random.Random(0), 0
    with path.open("w") as f:
        for i in range(rows):
            n = rng.randint(800, 3000)
            ids = [rng.randrange(151_000) for _ in range(n)]
            mask = [0] * (n // 5) + [1] * (n - n // 5)
            f.write(json.dumps({"id": str(i), "sample": 0, "input_ids": ids, "loss_mask": mask}))
            f.write("\n")
            tokens += n
    return tokens


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from specforge.data.prompt_builder import prepare_prompt_tasks

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.jsonl"
        tokens = write_rows(path, args.rows)
        gc.collect()
        before = resident_bytes()
        tasks = prepare_prompt_tasks(
            path,
            None,
            chat_template=None,
            max_length=1 << 20,
            is_preformatted=False,
            train_only_last_turn=False,
            cache_dir=None,
            cache_key=None,
            num_proc=1,
        )
        gc.collect()
        held = resident_bytes() - before
        result = {
            "rows": len(tasks),
            "tokens": tokens,
            "file_bytes_per_token": path.stat().st_size / tokens,
            "held_bytes_per_token": held / tokens,
            "held_gb_at_1_6b_tokens": 1.6e9 * held / tokens / 1e9,
        }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
