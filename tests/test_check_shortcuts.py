"""The per-row shortcuts check and export take for speed give exactly what the plain
definitions give: character offsets read token by token, content rules that normalise only
the head of an answer, token columns held and hashed as int64 arrays."""

from __future__ import annotations

import pickle
import random
import sys
from bisect import bisect_left
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix

from regen.check.content import echo_prompt, echo_system, prefix_key, words_prefix
from regen.export.merge import content_key
from regen.export.work import as_arrays, int64_array
from regen.finished.mask import TokenOffsets, _Starts, tokenize_all
from regen.finished.record import Completion

PIECES = ["word", "naïve", "漢字", "😀", "a" * 40, " ", "  ", "\n", "\t", "\n\n ", "<|im_end|>"]


def norm(text: str) -> str:
    return " ".join(text.split())


def texts(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choices(PIECES, k=rng.randrange(0, 300))) for _ in range(count)]


def test_words_prefix_is_the_head_of_the_normalised_text():
    for text in texts(300):
        for n in (1, 5, 32, 80, 512, 10_000):
            assert words_prefix(text, n) == norm(text)[:n]


def completion(answer: str, user: str, system: str = "") -> Completion:
    messages = [{"role": "system", "content": system}] if system else []
    messages += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    return Completion.of({"id": "x", "messages": messages})


def test_echo_and_prefix_rules_equal_their_definitions():
    rng = random.Random(1)
    bodies = texts(200, seed=2)
    hits = {"echo_prompt": 0, "echo_system": 0, "prefix": 0}
    for body in bodies:
        quoted = "".join(rng.choices(PIECES, k=rng.randrange(8, 40)))
        answer = rng.choice([body, body + quoted + body, quoted.replace(" ", "\n ") + body])
        c = completion(answer * rng.choice([1, 3]), user=quoted, system=quoted)
        prompt, system = norm(quoted), norm(quoted)[:80]
        want_prompt = len(prompt) >= 32 and prompt in norm(c.answer)
        want_system = len(system) >= 32 and norm(c.answer).startswith(system)
        words = norm(c.answer)
        assert echo_prompt(c) == want_prompt
        assert echo_system(c) == want_system
        assert (prefix_key(c) is None) == (len(words) < 512)
        hits["echo_prompt"] += want_prompt
        hits["echo_system"] += want_system
        hits["prefix"] += prefix_key(c) is not None
    assert all(hits.values()), hits  # both outcomes of every rule were exercised


@pytest.mark.parametrize("name", ["qwen", "smol"])
def test_token_offsets_read_one_by_one_equal_the_tokenizers_list(name):
    tok = checkfix.load(name)
    tok.backend_tokenizer.no_truncation()  # another test may have set them on the shared one
    tok.backend_tokenizer.no_padding()
    samples = [*texts(20, seed=3), "", "<|im_start|>user\nHé 😀<|im_end|>\n"]
    for text, (ids, offsets) in zip(samples, tokenize_all(tok, samples), strict=True):
        assert isinstance(offsets, TokenOffsets)
        whole = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        assert ids == whole["input_ids"]
        expected = [tuple(o) for o in whole["offset_mapping"]]
        assert offsets == expected and list(offsets) == expected and len(offsets) == len(ids)
        assert [offsets[k] for k in range(len(ids))] == expected
        assert offsets[1:4] == expected[1:4]
        if ids:
            assert offsets[-1] == expected[-1]
        with pytest.raises(IndexError):
            offsets[len(ids)]
        starts = [o[0] for o in expected]
        for char in range(len(text) + 2):
            assert bisect_left(_Starts(offsets), char) == bisect_left(starts, char)
        assert pickle.loads(pickle.dumps(offsets)) == expected


def test_an_exported_rows_token_arrays_hash_and_hold_what_its_lists_do():
    row = {
        "id": "a",
        "sample": 0,
        "input_ids": [1, 70_000, 3, 2**40],
        "loss_mask": [0, 1, 1, 1],
        "attention_mask": [1, 1, 1, 1],
        "source": "s",
        "category": "c",
        "tools": [],
    }
    arrays = as_arrays(row)
    assert content_key(arrays) == content_key(row)  # dedup and --merge-into see one key
    for name in ("input_ids", "loss_mask", "attention_mask"):
        assert arrays[name].dtype == np.int64 and arrays[name].tolist() == row[name]
    assert int64_array([-1, 255, 256]).tolist() == [-1, 255, 256]  # outside a mask's bytes


def test_a_rows_content_key_reads_its_token_columns_as_values():
    row = {"id": "a", "input_ids": [5, 6, 7], "loss_mask": [0, 1, 1], "category": "c", "x": [1]}
    same = {
        "loss_mask": np.array([0, 1, 1]),
        "x": [1],
        "input_ids": np.array([5, 6, 7]),
        "id": "b",
        "category": "d",
    }
    assert content_key(same) == content_key(row)  # column order and labels are not content
    for changed in (
        {"input_ids": [5, 6, 8]},
        {"loss_mask": [0, 0, 1]},
        {"x": [2]},
        {"input_ids": [5, 6, 7, 0]},
        {"input_ids": [5.0, 6.0, 7.0]},
    ):
        assert content_key({**row, **changed}) != content_key(row), changed
