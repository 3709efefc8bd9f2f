"""Only what the target wrote is supervised: the earlier assistant turns of a prompt came from
the source dataset (another model, a person), so by default they are context, in `check` and
in every export. `--supervise all` restores training on every assistant turn, and check's
`source_turns_supervised` rule counts the samples that then train on text the target did
not write."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import datasets  # offline, with a throwaway cache: see conftest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from regen.cli import main
from regen.finished.encode import Encoder
from regen.finished.record import Completion

SOURCE_1 = "Hello! How can I help?"
SOURCE_2 = "Berlin is the capital of Germany."
THREE_TURNS = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": SOURCE_1},
    {"role": "user", "content": "capital of Germany?"},
    {"role": "assistant", "content": SOURCE_2},
    {"role": "user", "content": "and of France?"},
]
ANSWER = "Paris is the capital of France."


def three_turn(regenerated: int = 1) -> dict:
    return checkfix.completion("three", ANSWER, history=THREE_TURNS, regenerated=regenerated)


def expected_mask(tok, messages: list[dict], trained: set[int]) -> list[int]:
    """Built independently of regen's encoder: for each trained assistant turn, the tokens
    from the end of the generation prompt before it to its <|im_end|>, inclusive."""
    full = tok.apply_chat_template(messages, tokenize=False)
    ids = tok(full, add_special_tokens=False)["input_ids"]
    end_of_turn = tok.convert_tokens_to_ids("<|im_end|>")
    mask = [0] * len(ids)
    for i in sorted(trained):
        prompt = tok.apply_chat_template(messages[:i], tokenize=False, add_generation_prompt=True)
        start = len(tok(prompt, add_special_tokens=False)["input_ids"])
        stop = ids.index(end_of_turn, start)
        mask[start : stop + 1] = [1] * (stop + 1 - start)
    return mask


def test_three_turn_prompt_supervises_only_the_regenerated_turn_token_by_token():
    tok = checkfix.load("qwen")
    rec = three_turn()
    enc = Encoder.of(tok).encode(Completion.of(rec))
    assert enc.loss_mask() == expected_mask(tok, rec["messages"], {5})
    supervised = tok.decode([t for t, m in zip(enc.input_ids, enc.loss_mask(), strict=True) if m])
    assert supervised.endswith(ANSWER + "<|im_end|>")
    assert SOURCE_1 not in supervised and SOURCE_2 not in supervised
    assert (enc.source_turns, enc.source_supervised, enc.flags) == (2, 0, ())


def test_supervise_all_trains_every_turn_and_is_flagged():
    tok = checkfix.load("qwen")
    rec = three_turn()
    enc = Encoder.of(tok, supervise="all").encode(Completion.of(rec))
    assert enc.loss_mask() == expected_mask(tok, rec["messages"], {1, 3, 5})
    assert enc.source_supervised == 2 and "source_turns_supervised" in enc.flags


def test_a_run_that_regenerated_every_turn_trains_every_turn():
    tok = checkfix.load("qwen")
    rec = three_turn(regenerated=3)  # --regenerate-turns all: meta.turns has 3 requests
    assert Completion.of(rec).regenerated == {1, 3, 5}
    enc = Encoder.of(tok).encode(Completion.of(rec))
    assert enc.loss_mask() == expected_mask(tok, rec["messages"], {1, 3, 5})
    assert (enc.source_turns, enc.flags) == (0, ())


def run_cli(*args) -> tuple[int, str]:
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


def test_check_counts_samples_that_supervise_source_text(tmp_path):
    run = checkfix.write_run(tmp_path / "run", [three_turn(), *checkfix.healthy(20)])
    tok = checkfix.qwen_style_dir()
    code, out = run_cli("check", run, "--tokenizer", tok, "--json", tmp_path / "a.json")
    rule = {r["rule"]: r for r in json.loads((tmp_path / "a.json").read_text())["rules"]}
    assert rule["source_turns_supervised"]["count"] == 0
    code, out = run_cli("check", run, "--tokenizer", tok, "--supervise", "all")
    assert code == 1 and "FAIL source_turns_supervised" in out and "1/21" in out


def test_every_tokenised_export_carries_the_choice(tmp_path):
    run = checkfix.write_run(tmp_path / "run", [three_turn()])
    tok = checkfix.load("qwen")
    want = expected_mask(tok, three_turn()["messages"], {5})
    for fmt in ("tokenized", "specforge-tokenized", "speculators"):
        out = tmp_path / fmt
        code, text = run_cli(
            "export", run, "-o", out, "--format", fmt, "--tokenizer", checkfix.qwen_style_dir()
        )
        assert code == 0, text
        [row] = datasets.load_dataset(str(out))["train"].to_list()
        assert row["loss_mask"] == want, fmt
    code, text = run_cli(
        "export",
        run,
        "-o",
        tmp_path / "all",
        "--format",
        "tokenized",
        "--tokenizer",
        checkfix.qwen_style_dir(),
        "--supervise",
        "all",
    )
    [row] = datasets.load_dataset(str(tmp_path / "all"))["train"].to_list()
    assert row["loss_mask"] == expected_mask(tok, three_turn()["messages"], {1, 3, 5})


def test_specforge_conversations_train_only_the_regenerated_turn_with_its_own_setting(tmp_path):
    """SpecForge renders conversation rows itself and trains every assistant turn; the export
    says to set train_only_last_turn, and with it SpecForge's own code gives regen's mask."""
    from specforge.data.preprocessing import build_eagle3_dataset
    from specforge.data.template import TEMPLATE_REGISTRY, ChatTemplate

    TEMPLATE_REGISTRY.register(
        "regen-chatml",
        ChatTemplate(
            assistant_header="<|im_start|>assistant\n",
            user_header="<|im_start|>user\n",
            system_prompt=None,
            end_of_turn_token="<|im_end|>",
        ),
        override=True,
    )
    run = checkfix.write_run(tmp_path / "run", [three_turn()])
    code, text = run_cli("export", run, "-o", tmp_path / "conv")
    assert code == 0, text
    assert "1 rows hold earlier assistant turns that the source dataset wrote" in text
    assert "data.train_only_last_turn: true" in text
    rows = datasets.load_dataset(str(tmp_path / "conv"))["train"]
    tok = checkfix.load("qwen")
    [theirs] = build_eagle3_dataset(
        rows,
        tok,
        chat_template="regen-chatml",
        max_length=4096,
        num_proc=None,
        shuffle_seed=None,
        train_only_last_turn=True,
    ).with_format(None)
    assert theirs["loss_mask"][0] == expected_mask(tok, three_turn()["messages"], {5})
