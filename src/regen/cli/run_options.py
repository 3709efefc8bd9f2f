"""Options that `regen generate` and `regen plan` share, declared once: plan calibrates on
exactly the servers, sampling and request shape that generate would use, so both must read
the same flags the same way."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from regen.cli.options import FLEET, INPUT, RELIABILITY, SAMPLING, option
from regen.fleet.openai_env import servers_from_env
from regen.run.config import Sampling

SERVER_DEFAULT = "Default: the server's generation config."

Decorator = Callable[[Any], Any]


def _all(*decorators: Decorator) -> Decorator:
    def apply(command: Any) -> Any:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return apply


work_shape_options = _all(
    option("--samples-per-prompt", type=int, default=1, show_default=True, group=INPUT,
           help="Completions per prompt (sample 0..K-1)."),
    option("--regenerate-turns", type=click.Choice(["last", "all"]), default="last",
           show_default=True, group=INPUT,
           help="Regenerate the last assistant turn, or every one in order."),
)  # fmt: skip

fleet_options = _all(
    option("--fleet", type=click.Path(path_type=Path), metavar="FLEET.json", group=FLEET,
           help="The servers `regen serve` started (not with --servers)."),
    option("--servers", multiple=True, multi_value=True, metavar="URL ...", group=FLEET,
           help="OpenAI-compatible base URLs [default: $OPENAI_BASE_URL, else the embedded "
           "model]."),
    option("--local-model", type=click.Path(path_type=Path), metavar="GGUF", group=FLEET,
           help="GGUF for the embedded llama.cpp server."),
    option("--model", group=FLEET, help="Model name to request [default: what the servers list]."),
    option("--api-key-env", metavar="VAR", group=FLEET,
           help="Read the API key from this variable [default: OPENAI_API_KEY when set]."),
    option("--concurrency-per-server", "concurrency", type=int, metavar="N", group=FLEET,
           aliases=["--concurrency"], help="Requests in flight per server [64; embedded: 2]."),
)  # fmt: skip

sampling_options = _all(
    option("--max-output-tokens", type=int, default=4096, show_default=True, group=SAMPLING,
           help="max_tokens per request."),
    option("--temperature", type=float, group=SAMPLING, help=SERVER_DEFAULT),
    option("--top-p", type=float, group=SAMPLING, help=SERVER_DEFAULT),
    option("--top-k", type=int, group=SAMPLING, help=SERVER_DEFAULT),
    option("--seed", type=int, group=SAMPLING, help="Base seed; sample k uses seed+k."),
    option("--thinking", type=click.Choice(["on", "off", "auto"]), default="auto",
           show_default=True, group=SAMPLING,
           help="Sent as chat_template_kwargs.enable_thinking; auto sends nothing."),
)  # fmt: skip

request_options = _all(
    option("--request-timeout", type=float, default=1800, show_default=True, group=RELIABILITY,
           help="Seconds for one whole request."),
    option("--stream", is_flag=True, group=RELIABILITY,
           help="Stream responses, so that a stalled one is noticed."),
)  # fmt: skip


def chosen_servers(opts: dict) -> list[str]:
    """--servers, else $OPENAI_BASE_URL unless --fleet or --local-model says otherwise."""
    servers = list(opts["servers"])
    if not servers and not opts["fleet"]:
        servers = servers_from_env(opts["local_model"])
    return servers


def sampling_from(opts: dict) -> Sampling:
    return Sampling(
        max_tokens=opts["max_output_tokens"], temperature=opts["temperature"],
        top_p=opts["top_p"], top_k=opts["top_k"], seed=opts["seed"], thinking=opts["thinking"],
    )  # fmt: skip
