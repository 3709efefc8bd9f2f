"""A GGUF's tokenizer is converted once and loaded from the cache after: the same tokenizer,
the same ids and masks, a new folder when the GGUF changes, and a cache that cannot be
written costs nothing but the conversion."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from regen import tokenizer_cache
from regen.finished.encode import Encoder
from regen.finished.record import Completion
from regen.tokenizer import load_tokenizer

CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Berlin"}'},
}
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}


def test_the_second_load_comes_from_the_cache_and_encodes_the_same(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    saved = []
    real_save = tokenizer_cache.save
    monkeypatch.setattr(tokenizer_cache, "save", lambda g, t: saved.append(g) or real_save(g, t))
    gguf = checkfix.smollm2_gguf()
    converted = load_tokenizer(str(gguf))
    folder = tokenizer_cache.cached_folder(gguf)
    assert saved == [gguf] and (folder / "tokenizer.json").is_file()
    cached = load_tokenizer("embedded")
    assert saved == [gguf], "the second load converted the GGUF again"
    assert Path(cached.name_or_path) == folder
    assert tokenizer_cache.same_tokenizer(converted, cached)
    record = checkfix.completion(
        "t",
        "It is sunny.",
        reasoning="Call the tool first.",
        tools=[TOOL],
        tool_calls=[CALL],
        history=[{"role": "user", "content": "Weather in Berlin?"}],
    )
    a = Encoder.of(converted).encode(Completion.of(record))
    b = Encoder.of(cached).encode(Completion.of(record))
    assert (a.input_ids, a.spans, a.flags) == (b.input_ids, b.spans, b.flags)
    assert a.mask_sum > 0


def test_a_changed_gguf_gets_a_folder_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF v1")
    first = tokenizer_cache.cached_folder(gguf)
    assert first.parent == tmp_path / "cache" / "regen" / "tokenizers"
    assert tokenizer_cache.cached_folder(gguf) == first
    os.utime(gguf, ns=(0, gguf.stat().st_mtime_ns + 10**9))
    assert tokenizer_cache.cached_folder(gguf) != first


def test_a_cache_that_cannot_be_written_warns_and_keeps_nothing(tmp_path, monkeypatch, caplog):
    not_a_dir = tmp_path / "cache"
    not_a_dir.write_text("a file where the cache would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(not_a_dir))
    tok, gguf = checkfix.load("smol"), checkfix.smollm2_gguf()
    with caplog.at_level(logging.WARNING, logger="regen.tokenizer"):
        tokenizer_cache.save(gguf, tok)
    assert "is not cached" in caplog.text
    assert tokenizer_cache.load_cached(gguf) is None


def test_a_tokenizer_that_does_not_reload_the_same_is_not_kept(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(tokenizer_cache, "same_tokenizer", lambda a, b: False)
    tok, gguf = checkfix.load("smol"), checkfix.smollm2_gguf()
    with caplog.at_level(logging.WARNING, logger="regen.tokenizer"):
        tokenizer_cache.save(gguf, tok)
    assert "does not reload the same" in caplog.text
    assert tokenizer_cache.load_cached(gguf) is None
    assert list((tmp_path / "cache" / "regen" / "tokenizers").iterdir()) == []


@pytest.mark.parametrize("change", ["template", "special"])
def test_same_tokenizer_sees_what_the_masks_depend_on(change):
    a = checkfix.load("qwen")
    b = load_tokenizer(str(checkfix.qwen_style_dir()))
    assert tokenizer_cache.same_tokenizer(a, b)
    if change == "template":
        b.chat_template = a.chat_template + " "
    else:
        b.add_special_tokens({"additional_special_tokens": ["<|new|>"]})
    assert not tokenizer_cache.same_tokenizer(a, b)


def test_a_cached_folder_that_no_longer_loads_is_dropped_for_a_new_conversion(
    tmp_path, monkeypatch, caplog
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF v1")
    folder = tokenizer_cache.cached_folder(gguf)
    folder.mkdir(parents=True)
    (folder / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}')
    (folder / "tokenizer.json").write_text('{"truncated": ')
    with caplog.at_level(logging.WARNING, logger="regen.tokenizer"):
        assert tokenizer_cache.load_cached(gguf) is None
    assert str(folder) in caplog.text and "converting model.gguf again" in caplog.text
    assert not folder.exists()
