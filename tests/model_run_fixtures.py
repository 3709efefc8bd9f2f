"""The fixtures of the score tests on the embedded model, one definition for every module
that asks: the SmolLM2 encoder; a run of score_helpers' prompts answered greedily by the
embedded model, built once per session (a minute or more of the suite's CPU) and copied for
each module (a test scores into the run's folder); and two drafts, the model itself and a
requantized copy of it (loaded once per module)."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from regen.check import Encoder
from regen.embedded_model import default_model_path
from regen.score.llama_draft import LlamaDraft
from score_helpers import generator, model_run, requantize

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    return Encoder.of(checkfix.load("smol"))


@pytest.fixture(scope="session")
def greedy_run(tmp_path_factory) -> Path:
    """The run every module's `run` copies: built once, as its greedy decoding is the same
    each time."""
    llm = generator(default_model_path())  # logits kept per token, for incremental decoding
    try:
        return model_run(tmp_path_factory.mktemp("greedy-run"), llm, checkfix.load("smol"))
    finally:
        llm.close()


@pytest.fixture(scope="module")
def run(tmp_path_factory, greedy_run: Path) -> Path:
    return shutil.copytree(greedy_run, tmp_path_factory.mktemp("run"), dirs_exist_ok=True)


@pytest.fixture(scope="module")
def identity() -> Iterator[LlamaDraft]:
    """The target as its own draft."""
    draft = LlamaDraft(default_model_path(), n_ctx=512)
    yield draft
    draft.close()


@pytest.fixture(scope="module")
def requantized(tmp_path_factory) -> Iterator[LlamaDraft]:
    """A Q2_K copy of the target: a draft that disagrees with it at some positions."""
    path = requantize(default_model_path(), tmp_path_factory.mktemp("draft") / "smol-q2k.gguf")
    draft = LlamaDraft(path, n_ctx=512)
    yield draft
    draft.close()
