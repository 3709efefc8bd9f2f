"""The fixtures of the score tests on the embedded model, one definition for every module
that asks: the SmolLM2 encoder, and a run of score_helpers' prompts answered greedily by the
embedded model (built once per module: a test scores into the run's folder)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from regen.check import Encoder
from regen.embedded_model import default_model_path
from score_helpers import generator, model_run

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "check"))
import checkfix


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    return Encoder.of(checkfix.load("smol"))


@pytest.fixture(scope="module")
def run(tmp_path_factory, encoder) -> Path:
    llm = generator(default_model_path())  # logits kept per token, for incremental decoding
    try:
        return model_run(tmp_path_factory.mktemp("run"), llm, encoder.tok)
    finally:
        llm.close()
