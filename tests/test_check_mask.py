"""Loss masks from token positions, with real tokenizers: SmolLM2 (GGUF) and a Qwen3-style one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from regen.errors import ConfigError, InputError
from regen.finished.encode import Encoder
from regen.finished.record import Completion

WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Berlin"}'},
}


def supervised_text(enc) -> list[str]:
    """The text of each supervised run, in order."""
    return [enc.text[enc.offsets[start][0] : enc.offsets[end - 1][1]] for start, end in enc.spans]


@pytest.fixture(params=["qwen", "smol"])
def encoder(request) -> Encoder:
    return Encoder.of(checkfix.load(request.param))


def test_single_turn_mask_is_the_answer_and_end_of_turn(encoder):
    enc = encoder.encode(Completion.of(checkfix.completion("a", "Paris is the capital.")))
    [run] = supervised_text(enc)
    assert run.endswith("Paris is the capital.<|im_end|>")
    assert "user" not in run and "France?" not in run
    assert enc.loss_mask().count(1) == enc.mask_sum > 5


def test_multi_turn_masks_only_assistant_turns(encoder):
    history = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello there", "reasoning_content": "greet"},
        {"role": "user", "content": "capital of France?"},
    ]
    rec = checkfix.completion("m", "Paris.", history=history, regenerated=2)
    runs = supervised_text(encoder.encode(Completion.of(rec)))
    assert len(runs) == 2
    assert runs[0].endswith("hello there<|im_end|>") and runs[1].endswith("Paris.<|im_end|>")
    assert not any("Be brief" in r or "hi<" in r or "France" in r for r in runs)


def test_tool_calls_supervised_and_tool_results_not(encoder):
    history = [
        {"role": "user", "content": "weather in Berlin?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny, 21C"},
    ]
    rec = checkfix.completion(
        "t", "It is sunny.", history=history, tools=[WEATHER_TOOL], regenerated=2
    )
    enc = encoder.encode(Completion.of(rec))
    joined = "".join(supervised_text(enc))
    assert "It is sunny." in joined and "sunny, 21C" not in joined
    if encoder.tok is checkfix.load("qwen"):  # SmolLM2's template does not render tool calls
        assert '"city": "Berlin"' in joined and "<tool_call>" in joined


def test_qwen_reasoning_rendered_in_the_final_turn_only():
    enc = Encoder.of(checkfix.load("qwen"))
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "reasoning_content": "OLD THOUGHT"},
        {"role": "user", "content": "capital?"},
    ]
    rec = checkfix.completion("r", "Paris.", reasoning="NEW THOUGHT", history=history)
    runs = supervised_text(enc.encode(Completion.of(rec)))
    assert "OLD THOUGHT" not in enc.encode(Completion.of(rec)).text
    assert runs[-1].startswith("<think>\nNEW THOUGHT\n</think>")


def test_template_tokens_flag_decides_about_the_empty_think_block():
    tok = checkfix.load("qwen")
    rec = Completion.of(checkfix.completion("e", "OK.", reasoning=""))
    trained = supervised_text(Encoder.of(tok, "train").encode(rec))
    context = supervised_text(Encoder.of(tok, "context").encode(rec))
    assert trained == ["<think>\n\n</think>\n\nOK.<|im_end|>"]
    assert context == ["OK.<|im_end|>"]


def test_generation_prompt_with_thinking_off_is_context():
    enc = Encoder.of(checkfix.load("qwen")).encode(
        Completion.of(checkfix.completion("o", "Paris.", thinking="off"))
    )
    assert supervised_text(enc) == ["Paris.<|im_end|>"]
    assert "<think>\n\n</think>\n\nParis." in enc.text


@pytest.mark.parametrize("thinking", ["on", "off"])
def test_mask_equals_the_server_token_id_span(thinking):
    tok = checkfix.load("qwen")
    generated = "<think>\nLet me think.\n</think>\n\nParis.<|im_end|>"
    if thinking == "off":
        generated = "Paris.<|im_end|>"
    ids = tok.encode(generated, add_special_tokens=False)
    rec = checkfix.completion(
        "i",
        "Paris.",
        reasoning="Let me think." if thinking == "on" else None,
        thinking=thinking,
        token_ids={"prompt": [], "completion": ids},
    )
    encoder = Encoder.of(tok)
    enc = encoder.encode(Completion.of(rec))
    start, end = enc.final_generated
    assert enc.input_ids[start:end] == ids
    mask = enc.loss_mask()
    assert [i for i, m in enumerate(mask) if m] == list(range(start, end))


def test_all_zero_mask_is_an_error_not_a_silent_zero():
    tok = checkfix.load("qwen")
    drops_assistant = (
        "{% for m in messages %}{% if m.role != 'assistant' %}<|im_start|>{{ m.role }}\n"
        "{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}"
    )
    original = tok.chat_template
    tok.chat_template = drops_assistant
    try:
        with pytest.raises(InputError) as err:
            Encoder.of(tok).encode(Completion.of(checkfix.completion("z", "Paris.")))
    finally:
        tok.chat_template = original
    assert err.value.kind == "empty_mask"


def test_tokenizer_errors_are_config_errors(tmp_path):
    from regen.tokenizer import load_tokenizer

    with pytest.raises(ConfigError):
        load_tokenizer(str(tmp_path / "missing.gguf"))
    (tmp_path / "x.txt").write_text("x")
    with pytest.raises(ConfigError):
        load_tokenizer(str(tmp_path / "x.txt"))


def test_a_gguf_tokenizer_without_the_gguf_extra_names_the_install(monkeypatch, tmp_path):
    """After `make demo` (the embedded extra only) torch and gguf are not there: the error
    says what to install, not "pass a local tokenizer directory" (when no earlier load has
    cached the converted tokenizer: tokenizer_cache)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    import importlib.util

    from regen.errors import ConfigError
    from regen.tokenizer import load_tokenizer

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    with pytest.raises(ConfigError, match="needs torch") as err:
        load_tokenizer("embedded")
    assert "regen[gguf]" in (err.value.hint or "")
