"""Whether a prompt file carries tools, and what a run does when its fleet cannot answer them.

A fleet that refuses tools (vLLM started without --enable-auto-tool-choice and a parser) or
cannot read the calls (SGLang without --tool-call-parser) would turn every prompt with tools
into an error record, or into an answer whose calls are text, thousands of them before anyone
looks. The run refuses at start instead, with the fix; a file without tools runs as ever.
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

FIX = (
    "start the fleet with `regen serve ... --tool-call-parser NAME` (regen serve picks the "
    "model family's parser itself; a vLLM started by hand needs --enable-auto-tool-choice "
    "--tool-call-parser NAME, an SGLang --tool-call-parser NAME), or leave the prompts with "
    "tools out of the file"
)


def first_prompt_with_tools(path: str | Path, limit: int | None = None) -> int | None:
    """The line of the first prompt with tools among the first `limit` lines (None: none
    has any). Only the lines that hold the key are parsed: a file without tools costs a read."""
    for line, raw in iter_lines(path):
        if limit is not None and line > limit:
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


async def check_tools_answered(
    path: str | Path, limit: int | None, servers: list[Server], model: str
) -> None:
    """Refuse the run when a server cannot answer tools and the prompts it would send (the
    first `limit` lines with --limit) carry some. The servers are asked first: that is free
    on SGLang and one one-token request on vLLM, where reading a file of millions of prompts
    (again, from a bucket) is not; the file is read only when a server cannot answer."""
    answering = [s for s in servers if s.available]
    reasons = await asyncio.gather(*(tools_refused(s, model) for s in answering))
    refusing = [f"{s.url}: {why}" for s, why in zip(answering, reasons, strict=True) if why]
    if not refusing:
        return
    line = first_prompt_with_tools(path, limit)
    if line is None:
        return
    raise ConfigError(
        f"the prompt file carries tools (line {line} is the first prompt with them), and "
        f"{len(refusing)} of {len(answering)} server(s) cannot answer them:\n  "
        + "\n  ".join(refusing),
        hint=FIX,
    )
