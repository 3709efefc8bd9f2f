"""Shared fixtures. Every network peer a test talks to is on 127.0.0.1."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests import their helper modules by name

from regen.testing.fake_server import Behaviour, FakeServer


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
