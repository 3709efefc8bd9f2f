"""Shared fixtures. Every network peer a test talks to is on 127.0.0.1."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests import their helper modules by name

# The test session never goes online, and keeps the Hugging Face caches out of $HOME. Set
# here, once, before anything imports `datasets` or `huggingface_hub` (they read these at
# import), rather than as a side effect of whichever test module is collected first.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
import session_tmp

os.environ.setdefault("HF_HOME", str(session_tmp.folder("hf-")))
os.environ.setdefault("HF_DATASETS_CACHE", str(session_tmp.folder("ds-cache-")))

import real_vllm as vllm_fleets
import warmups
from export_helpers import walkthrough  # noqa: F401  (the dataset-export tests' fixture)
from model_run_fixtures import (  # noqa: F401  (fixtures of the score tests)
    encoder,
    greedy_run,
    identity,
    requantized,
    run,
)
from real_vllm import (  # noqa: F401  (fixtures)
    real_vllm,
    real_vllm_fleets,
    real_vllm_pair,
    real_vllm_qwen3_style,
)
from regen.fleet.embedded import free_port
from regen.testing.fake_server import Behaviour, FakeServer
from regen.testing.moto_server import moto_server
from regen.testing.moto_server import reset as reset_moto


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected what they deselect
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The warm-ups the run will use start now, in the background, and the modules on the
    real vLLM fleets run last (tests/warmups.py, tests/real_vllm.py)."""
    vllm_fleets.real_vllm_modules_last(items)
    if not config.option.collectonly:
        warmups.start(vllm_fleets.fixtures_asked_for(items))


def pytest_sessionfinish() -> None:
    """Fleets started for tests that never ran (an interrupted or -x run) are stopped too;
    the fixture's own teardown stopped and reported the others. Then the session's
    temporary folder goes (tests/session_tmp.py)."""
    vllm_fleets.SESSION_FLEETS.stop_all()
    session_tmp.remove()


@pytest.fixture(autouse=True)
def no_openai_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's OPENAI_BASE_URL / OPENAI_API_KEY would point generate at their server
    (as it should for them); tests choose their servers and keys themselves."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture
def fake_server() -> Iterator[Callable[..., FakeServer]]:
    """Start fake OpenAI-compatible servers; all are stopped after the test."""
    started: list[FakeServer] = []

    def start(behaviour: Behaviour | None = None, **fields) -> FakeServer:
        server = FakeServer(behaviour or Behaviour(**fields)).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


STANDINS = Path(__file__).parent / "standins"
EIGHT_FREE_GPUS = "".join(f"{i}, GPU-{i:04x}, 3, 143771\\n" for i in range(8))


@pytest.fixture
def standin_env(tmp_path, monkeypatch) -> dict[str, str]:
    """For `regen serve` tests: PATH finds the stand-in nvidia-smi; a stand-in `python` runs
    the stand-in engine (tests/standins/engine.py), which records its argv and environment."""
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text(f'#!/bin/sh\nexec {sys.executable} {STANDINS / "engine.py"} "$@"\n')
    python.chmod(0o755)
    records = tmp_path / "records"
    records.mkdir()
    env = {
        "PATH": f"{STANDINS}{os.pathsep}{os.environ['PATH']}",
        "STANDIN_GPUS": EIGHT_FREE_GPUS,
        "STANDIN_RECORD_DIR": str(records),
        "STANDIN_PYTHON": str(python),
        "PYTHONPATH": os.pathsep.join([str(STANDINS), *sys.path]),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)  # a GPU machine's own: not here
    return env


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    """moto's standalone S3 server on loopback, started once for the session and stopped by
    its pid: its start was most of each bucket test's set-up (~0.8 s, some 30 tests)."""
    with moto_server(free_port()) as url:
        yield url


@pytest.fixture
def s3_endpoint(moto_url: str, monkeypatch) -> str:
    """The session's moto server, emptied first (no bucket or object of an earlier test is
    left: each test sees a fresh S3, as with a server of its own); the AWS_* variables point
    regen (and boto3) at it."""
    reset_moto(moto_url)
    for name, value in {
        "AWS_ENDPOINT_URL": moto_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    return moto_url
