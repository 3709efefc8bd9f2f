"""Options that several verbs share, declared once: what a request looks like (sampling,
thinking, max tokens) and where it goes, so that `regen plan` calibrates exactly the run
that `regen generate` will do."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from regen.run.config import Sampling

SHARED_RUN_OPTIONS = [
    click.option(
        "--servers", multiple=True,
        help="OpenAI-compatible base URLs; omit to run the embedded model.",
    ),
    click.option(
        "--local-model", type=click.Path(path_type=Path), help="GGUF for the embedded server."
    ),
    click.option("--model", help="Model name to request (default: what the servers report)."),
    click.option(
        "--max-output-tokens", type=int, default=4096, show_default=True,
        help="max_tokens per request.",
    ),
    click.option(
        "--concurrency", type=int, help="Requests in flight per server [64; embedded: 2]."
    ),
    click.option("--temperature", type=float, help="Default: the server's generation config."),
    click.option("--top-p", type=float, help="Default: the server's generation config."),
    click.option("--top-k", type=int, help="Default: the server's generation config."),
    click.option("--seed", type=int, help="Base seed; sample k uses seed+k."),
    click.option(
        "--thinking", type=click.Choice(["on", "off", "auto"]), default="auto", show_default=True,
        help="Sent as chat_template_kwargs.enable_thinking; auto sends nothing.",
    ),
    click.option("--samples-per-prompt", type=int, default=1, show_default=True),
    click.option(
        "--regenerate-turns", type=click.Choice(["last", "all"]), default="last",
        show_default=True,
    ),
    click.option("--api-key-env", metavar="VAR", help="Read the API key from this variable."),
]  # fmt: skip


def shared_run_options(command: Callable) -> Callable:
    for option in reversed(SHARED_RUN_OPTIONS):
        command = option(command)
    return command


def sampling_from(opts: dict[str, Any]) -> Sampling:
    return Sampling(
        max_tokens=opts["max_output_tokens"], temperature=opts["temperature"],
        top_p=opts["top_p"], top_k=opts["top_k"], seed=opts["seed"], thinking=opts["thinking"],
    )  # fmt: skip
