"""Ids and masks from the token ids an engine stored (`--return-token-ids`), beside the
re-tokenising path: with real templates (SmolLM2's ChatML from its GGUF, a Qwen3-style one
with thinking on and off) the two agree on every sample, an export from stored ids is the
same bytes as one that re-tokenises, and `check` names the samples where they differ."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from regen.check import Encoder, StatOptions, check_run
from regen.export import ExportRequest, Filters, export_run, make_format
from regen.finished.record import Completion
from regen.finished.render import template_kwargs
from regen.finished.stored import covered


def engine_ids(tok, rec: dict) -> dict:
    """The ids an engine stores: its prompt (rendered with the generation prompt) and what it
    generated, through its stop token (vLLM keeps the stop token in the ids); an answer cut
    at the cap has none: the engine stopped it before the model drew one."""
    kwargs = template_kwargs(Completion.of(rec))
    messages = rec["messages"]
    prompt = tok.apply_chat_template(
        messages[:-1], tokenize=False, add_generation_prompt=True, **kwargs
    )
    full = tok.apply_chat_template(messages, tokenize=False, **kwargs)
    assert full.startswith(prompt)
    end = full.rindex("<|im_end|>")  # the end of the final turn (both templates are ChatML)
    generated = tok(full[len(prompt) : end], add_special_tokens=False)["input_ids"]
    stop = tok.convert_tokens_to_ids("<|im_end|>")
    return {
        "prompt": tok(prompt, add_special_tokens=False)["input_ids"],
        "completion": [*generated, stop] if rec["finish_reason"] != "length" else generated,
    }


def records(kind: str) -> list[dict]:
    tok = checkfix.load(kind)
    out = []
    for i in range(12):
        thinking = ("on", "off", "auto")[i % 3] if kind == "qwen" else "auto"
        reasoning = f"Step {i}: the user asks; think." if thinking == "on" else None
        history = [{"role": "system", "content": "Be brief."}] if i % 4 == 0 else None
        rec = checkfix.completion(
            f"s{i}",
            f"Answer {i}: Paris, with {i * 7} words and symbols #$%.",
            reasoning=reasoning,
            thinking=thinking,
            history=[*(history or []), {"role": "user", "content": f"Question {i}?"}],
            finish="length" if i == 5 else "stop",
        )
        rec["token_ids"] = engine_ids(tok, rec)
        out.append(rec)
    return out


@pytest.mark.parametrize("kind", ["smol", "qwen"])
def test_stored_ids_and_retokenising_agree_on_every_sample(kind):
    tok = checkfix.load(kind)
    from_text, from_ids = Encoder.of(tok), Encoder.of(tok, stored_ids=True)
    for rec in records(kind):
        completion = Completion.of(rec)
        assert covered(completion, "train", "regenerated")
        ours, theirs = from_text.encode(completion), from_ids.encode(completion)
        assert theirs.offsets == []  # built from the ids: nothing was tokenised
        assert theirs.input_ids == ours.input_ids, completion.label
        assert theirs.loss_mask() == ours.loss_mask(), completion.label
        assert theirs.final_generated == ours.final_generated


def test_export_from_stored_ids_is_the_same_bytes_as_retokenising(tmp_path):
    recs = records("qwen")
    plain = [{k: v for k, v in r.items() if k != "token_ids"} for r in recs]
    tok = checkfix.load("qwen")
    outs = []
    for name, rows in (("ids", recs), ("text", plain)):
        run = checkfix.write_run(tmp_path / f"run-{name}", rows)
        out = tmp_path / f"out-{name}"
        export_run(
            ExportRequest(
                [run],
                out,
                make_format("tokenized"),
                encoder=Encoder.of(tok),
                filters=Filters(),
                file_type="parquet",
            )
        )
        outs.append(out)
    for ids_file, text_file in zip(
        *(sorted((o / "data").rglob("*.parquet")) for o in outs), strict=True
    ):
        a, b = pq.read_table(ids_file), pq.read_table(text_file)
        assert a.column("input_ids").to_pylist() == b.column("input_ids").to_pylist()
        assert a.column("loss_mask").to_pylist() == b.column("loss_mask").to_pylist()
        assert a.num_rows == 12 and ids_file.read_bytes() == text_file.read_bytes()


def test_check_names_the_samples_whose_stored_ids_disagree(tmp_path):
    recs = records("qwen")
    recs[3]["token_ids"]["completion"].insert(0, recs[3]["token_ids"]["completion"][0])
    recs[7]["token_ids"]["prompt"].pop()  # an engine that tokenised the prompt its own way
    run = checkfix.write_run(tmp_path / "run", recs)
    per_sample = tmp_path / "per-sample.jsonl"
    report = check_run(
        [run], Encoder.of(checkfix.load("qwen")), StatOptions(), {}, per_sample=per_sample
    )
    assert report.overall.to_json()["token_ids"] == {"checked": 12, "mismatched": 2}
    assert "token_mismatch" in report.to_json()["failed_rules"]
    lines = [json.loads(line) for line in per_sample.read_text().splitlines()]
    named = {line["id"] for line in lines if "token_mismatch" in line["flags"]}
    assert named == {"s3", "s7"}
    assert all(line["ids_match"] for line in lines if line["id"] not in named)
