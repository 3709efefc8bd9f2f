"""An answer cut at --max-output-tokens (`finish_reason: length`) ends where the model stopped:
no verb supervises an end-of-turn it never drew, nor counts one as a miss (finished/render.py).
Both templates the suite has (SmolLM2's ChatML, a Qwen3-style thinking one), a thinking answer
cut inside its reasoning, a tool trace whose last turn was cut, an earlier turn cut under
--regenerate-turns all, the stored-ids path, check's masks and score's tokens. The trainers'
own loaders: test_export_cut.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from check_helpers import check
from regen.finished.encode import Encoder
from regen.finished.record import Completion
from regen.finished.stored import agrees
from regen.score.rows import groups_of
from regen.score.tokens import token_row

END = "<|im_end|>"
WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
CALL = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}


@pytest.fixture(params=["smol", "qwen"])
def tok(request):
    return checkfix.load(request.param)


def encode(tok, rec: dict):
    return Encoder.of(tok).encode(Completion.of(rec))


def spans_text(tok, enc) -> list[str]:
    return [tok.decode(enc.input_ids[start:end]) for start, end in enc.spans]


def cut_turns(rec: dict, *reasons: str) -> dict:
    """The row's requests, each with its own finish_reason (meta.turns, as generate records
    a row that took several)."""
    rec["meta"]["turns"] = [{"server": "s", "finish_reason": why} for why in reasons]
    return rec


def test_a_cut_answer_ends_on_the_last_token_the_model_drew(tok):
    end = tok.convert_tokens_to_ids(END)
    cut = encode(tok, checkfix.completion("c", "Paris is the", finish="length"))
    ended = encode(tok, checkfix.completion("d", "Paris is the"))
    [(start, stop)] = cut.spans
    assert stop == len(cut.input_ids) == cut.final_generated[1]  # nothing after the answer
    assert tok.decode(cut.input_ids[start:stop]).endswith("Paris is the")
    assert end not in cut.input_ids[start:] and not cut.flags  # not unterminated either
    # the same answer ended by the model: its end-of-turn is learned, the rest is the same
    assert list(ended.input_ids[:stop]) == list(cut.input_ids)
    assert ended.input_ids[ended.spans[-1][1] - 1] == end


def test_a_thinking_answer_cut_inside_its_reasoning_ends_before_the_think_close():
    tok = checkfix.load("qwen")
    reasoning = "The user asks for the capital of"
    rec = checkfix.completion("t", "", reasoning=reasoning, thinking="on", finish="length")
    enc = encode(tok, rec)
    [text] = spans_text(tok, enc)
    assert text.endswith(reasoning) and "</think>" not in text
    assert len(enc.input_ids) == enc.spans[-1][1]  # the template's `</think>` is not in it
    ended = encode(tok, checkfix.completion("t", "", reasoning=reasoning, thinking="on"))
    assert spans_text(tok, ended)[0].endswith(f"{reasoning}\n</think>\n\n{END}")


def test_a_tool_trace_whose_last_turn_was_cut(tok):
    history = [
        {"role": "user", "content": "weather in Berlin?"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny, 21C"},
    ]
    rec = checkfix.completion(
        "tr", "It is sunny and", history=history, tools=[WEATHER_TOOL], regenerated=2
    )
    rec["finish_reason"] = "length"
    cut_turns(rec, "tool_calls", "length")
    assert Completion.of(rec).cut == {3}
    enc = encode(tok, rec)
    calls, answer = spans_text(tok, enc)
    assert calls.endswith(END)  # the call turn ended: its end-of-turn is learned
    assert answer.endswith("It is sunny and") and enc.spans[-1][1] == len(enc.input_ids)


def test_an_earlier_turn_cut_keeps_its_end_of_turn_as_context_only(tok):
    """--regenerate-turns all: the first answer hit the cap, the conversation went on."""
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello, how can"},
        {"role": "user", "content": "capital of France?"},
    ]
    rec = cut_turns(
        checkfix.completion("e", "Paris.", history=history, regenerated=2), "length", "stop"
    )
    assert Completion.of(rec).cut == {1}
    enc = encode(tok, rec)
    first, final = spans_text(tok, enc)
    assert first.endswith("Hello, how can") and final.endswith(f"Paris.{END}")
    after = enc.input_ids[enc.spans[0][1]]  # the template's end-of-turn: context, not trained
    assert after == tok.convert_tokens_to_ids(END) and enc.loss_mask()[enc.spans[0][1]] == 0


def test_the_stored_ids_give_the_same_cut_sample(tok):
    """check's token_mismatch guard: built from the engine's ids (which hold no end-of-turn
    for a cut answer) and from the render, a cut sample is the same."""
    rec = checkfix.completion("s", "Paris is the", finish="length")
    rendered = encode(tok, rec)
    start = rendered.final_generated[0]
    ids = list(rendered.input_ids)
    rec["token_ids"] = {"prompt": ids[:start], "completion": ids[start:]}
    stored = Encoder.of(tok).from_ids(Completion.of(rec))
    assert stored is not None and agrees(stored, rendered) and not stored.flags


def test_check_masks_a_cut_answer_without_its_end_of_turn(tmp_path):
    cut = [
        checkfix.completion(f"c{i}", f"Paris is answer {i} and", finish="length") for i in (1, 2)
    ]
    ended = [checkfix.completion(f"d{i}", f"Paris is answer {i} and") for i in (1, 2)]
    per_sample = tmp_path / "samples.jsonl"
    result, report = check(
        tmp_path, checkfix.healthy() + cut + ended, "--per-sample", str(per_sample)
    )
    assert result.exit_code == 0 and not report["failed_rules"], result.output
    assert "unterminated_turn" not in report["overall"]["flags"]
    rows = {r["id"]: r for r in map(json.loads, per_sample.read_text().splitlines())}
    for i in (1, 2):  # `<|im_end|>` and the newline after it: not in the cut sample
        assert rows[f"d{i}"]["n_tokens"] - rows[f"c{i}"]["n_tokens"] == 2
        assert rows[f"d{i}"]["mask_sum"] - rows[f"c{i}"]["mask_sum"] == 1
        assert "truncated" in rows[f"c{i}"]["flags"]


def test_score_tokens_a_cut_answer_as_the_engine_counted_it(tok):
    """No forced miss on an end-of-turn the model never drew: a re-tokenised cut row has the
    engine's count of answer tokens, and the one it ended has one more (its stop)."""
    text = "Paris is the capital and"
    count = len(tok(text, add_special_tokens=False)["input_ids"])
    for finish, tokens in (("length", count), ("stop", count + 1)):
        rec = checkfix.completion(
            "r", text, finish=finish, completion_tokens=count, thinking="off"
        )  # thinking off: the empty think block is the generation prompt's, not the answer's
        completion = Completion.of(rec)
        row = token_row(completion, Encoder.of(tok), groups_of(completion))
        assert row.retokenized and row.answer_tokens == tokens, finish


def test_score_flags_a_row_whose_tokens_are_not_the_engines_count(tmp_path):
    """A re-tokenised answer of another length than usage.completion_tokens (its text splits
    into other tokens than the model drew) is counted, named, and marked in rows.jsonl."""
    from regen.score import ScoreSettings, score_run
    from regen.score.ngram import NgramDraft
    from regen.score.rows import Selection

    tok = checkfix.load("smol")
    text = "Paris is the capital and"
    n = len(tok(text, add_special_tokens=False)["input_ids"])
    records = [
        checkfix.completion("cut", text, finish="length", completion_tokens=n),
        checkfix.completion("ended", text, completion_tokens=n),  # its stop not counted
        checkfix.completion("other", text, finish="length", completion_tokens=n + 3),
    ]
    run = checkfix.write_run(tmp_path / "run", records)
    settings = ScoreSettings(Selection("category", None, 0), [3], "embedded")
    report = score_run(run, [NgramDraft()], Encoder.of(tok), settings, tmp_path / "score")
    [draft] = report.to_json()["drafts"]
    assert draft["length_differs_rows"] == 1 and draft["retokenized_rows"] == 3
    [note] = [x for x in report.notes if "another number of answer tokens" in x]
    assert "1 of 3 re-tokenised rows" in note and "other (sample 0)" in note
    assert str(report.drafts[0].rows_file) in note
    lines = [json.loads(x) for x in report.drafts[0].rows_file.read_text().splitlines()]
    assert {x["id"]: x.get("length_differs") for x in lines} == {
        "cut": None,
        "ended": None,
        "other": n + 3,
    }
