"""What every executor offers: run a generation config, say how it went."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from regen.run.config import GenerateConfig


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    lines: list[str]  # what to tell the user, in order


class Executor(ABC):
    def __init__(self, *, shards: int | None = None, address: str | None = None) -> None:
        self.shards, self.address = shards, address

    @abstractmethod
    def run(self, config: GenerateConfig) -> Outcome: ...
