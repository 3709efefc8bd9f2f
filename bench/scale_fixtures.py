"""What the hidden-state checks score (bench_score.py hidden, scripts/gpu_check.py): held-out
answers of the embedded SmolLM2 (its own greedy decoding, token ids stored as `generate
--return-token-ids` keeps them) and drafters of the kinds a team trains, built small for it
by the test suite's builders (tests/drafter_helpers.py, tests/dflash_helpers.py): a draft
model (the target's first 24 of 30 blocks), an EAGLE-3 head and a DFlash drafter."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from score_rows import PROMPTS

TESTS = Path(__file__).resolve().parent.parent / "tests"
LAYERS = {"eagle3": (2, 15, 30), "dflash": (2, 15, 28)}  # input indices, of 30 blocks


def _helpers() -> None:
    for where in (TESTS, TESTS / "fixtures" / "check"):
        if str(where) not in sys.path:
            sys.path.insert(0, str(where))


def held_out_run(root: Path, per_category: int, max_new: int) -> Path:
    """A run of per_category prompts a category, answered greedily (cached in root)."""
    _helpers()
    import checkfix

    from regen.embedded_model import default_model_path
    from score_helpers import EOS, generator, greedy

    run = root / f"run-{per_category}x{max_new}"
    shard = run / "completions" / "00000.jsonl"
    if shard.is_file():
        return run
    tok = checkfix.load("smol")
    llm = generator(default_model_path())
    lines = []
    try:
        for category, prompts in PROMPTS.items():
            for n, prompt in enumerate(prompts[:per_category]):
                messages = [{"role": "user", "content": prompt}]
                text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
                ids = tok(text, add_special_tokens=False)["input_ids"]
                answer = greedy(llm, ids, tok.convert_tokens_to_ids(EOS), max_new=max_new)
                reply = {"role": "assistant", "content": tok.decode(answer)}
                lines.append(
                    {
                        "id": f"{category}{n}",
                        "sample": 0,
                        "category": category,
                        "messages": [*messages, reply],
                        "token_ids": {"prompt": ids, "completion": answer},
                    }
                )
    finally:
        llm.close()
    shard.parent.mkdir(parents=True, exist_ok=True)
    shard.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run


def drafters(root: Path, run: Path) -> dict[str, Path]:
    """The three drafters, fitted on the run's rows where a builder fits (cached in root)."""
    _helpers()
    from dflash_helpers import dflash_full_vocab
    from drafter_helpers import eagle3_head, stored_rows, target_dir, truncated_draft

    target, rows = target_dir(), [ids for _, ids, _ in stored_rows(run)]
    built = {
        "draft-24-blocks": lambda out: truncated_draft(target, out, blocks=24),
        "eagle3": lambda out: eagle3_head(target, out, LAYERS["eagle3"], rows),
        "dflash": lambda out: dflash_full_vocab(target, out, LAYERS["dflash"], rows),
    }
    out = {}
    for name, build in built.items():
        folder = root / f"{run.name}-{name}"
        if not (folder / "config.json").is_file():
            build(folder)
        out[name] = folder
    return out


def target() -> Path:
    _helpers()
    from drafter_helpers import target_dir

    return target_dir()
