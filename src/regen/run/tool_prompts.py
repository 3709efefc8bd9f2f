"""Prompts with tools on a fleet that cannot answer them.

A fleet that refuses tools (vLLM started without --enable-auto-tool-choice and a parser) or
cannot read the calls (SGLang without --tool-call-parser) would turn every prompt with tools
into an error record, or into an answer whose calls are text, thousands of them before anyone
looks. So before the first request with tools, the run asks each server once
(fleet/preflight.py `tools_refused`) and stops with the fix when one cannot answer: at start
when the file's first lines carry tools (the usual blend), else at the first prompt that does,
which stays unsent, like every prompt with tools after it. A file without tools is never read
for them and costs no request: a file of millions of prompts, from a bucket, is read once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from regen.errors import ConfigError, InputError
from regen.fleet.preflight import tools_refused
from regen.fleet.server import Server
from regen.inputs import parse_record
from regen.jsonio import iter_lines
from regen.records import Prompt

HEAD_LINES = 1000  # what the preflight reads for tools: a blend's first lines hold some
FIX = (
    "start the fleet with `regen serve ... --tool-call-parser NAME` (regen serve picks the "
    "model family's parser itself; a vLLM started by hand needs --enable-auto-tool-choice "
    "--tool-call-parser NAME, an SGLang --tool-call-parser NAME), or leave the prompts with "
    "tools out of the file"
)


def first_prompt_with_tools(path: str | Path, lines: int) -> int | None:
    """The line of the first prompt with tools among the first `lines` lines, or None. Only
    the lines that hold the key are parsed."""
    for line, raw in iter_lines(path):
        if line > lines:
            break
        if b'"tools"' not in raw:
            continue
        try:
            prompt = parse_record(raw, line)
        except InputError:
            continue  # the run records it as the bad line it is
        if isinstance(prompt, Prompt) and prompt.tools:
            return line
    return None


class ToolGate:
    """Asks the fleet once whether every server can answer tools; each prompt with tools
    waits for that answer, and none is sent when one server cannot."""

    def __init__(self, servers: list[Server], model: str) -> None:
        self.servers, self.model = servers, model
        self._asked: asyncio.Future[list[str]] | None = None

    async def check(self, line: int) -> None:
        """Raise ConfigError, with the fix, if the prompt at `line` (it carries tools) cannot
        be answered by every server that answers."""
        if self._asked is None:
            self._asked = asyncio.ensure_future(self._ask())
        refusing = await asyncio.shield(self._asked)
        if refusing:
            raise ConfigError(
                f"the prompts carry tools (line {line} holds one), and {len(refusing)} "
                "server(s) cannot answer them:\n  " + "\n  ".join(refusing),
                hint=FIX,
            )

    async def _ask(self) -> list[str]:
        answering = [s for s in self.servers if s.available]
        reasons = await asyncio.gather(*(tools_refused(s, self.model) for s in answering))
        return [f"{s.url}: {why}" for s, why in zip(answering, reasons, strict=True) if why]

    async def check_head(self, path: str | Path, limit: int | None) -> None:
        """The preflight's part: the file's first lines (the first `limit` with --limit)."""
        line = first_prompt_with_tools(path, min(limit or HEAD_LINES, HEAD_LINES))
        if line is not None:
            await self.check(line)
