"""Options that `regen generate` and `regen plan` share, declared once: plan calibrates on
exactly the servers, sampling and request shape that generate would use, so both must read
the same flags the same way. Each option names the config field it sets (`to=`), and
`config_from` builds the config's groups from them directly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from regen.cli.options import FLEET, INPUT, RELIABILITY, SAMPLING, config_values, option
from regen.cli.paths import InputPath
from regen.cli.value_lists import OneOrList
from regen.fleet.openai_env import servers_from_env
from regen.inputs import SAMPLING_RANGES
from regen.run.config import GenerateConfig, build_config

SERVER_DEFAULT = "Default: the server's generation config."

Decorator = Callable[[Any], Any]


def _all(*decorators: Decorator) -> Decorator:
    def apply(command: Any) -> Any:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return apply


work_shape_options = _all(
    option(
        "--samples-per-prompt",
        type=int,
        default=1,
        show_default=True,
        group=INPUT,
        to="input.samples_per_prompt",
        help="Completions per prompt (sample 0..K-1).",
    ),
    option(
        "--regenerate-turns",
        type=click.Choice(["last", "all"]),
        default="last",
        show_default=True,
        group=INPUT,
        to="input.regenerate_turns",
        help="Regenerate the last assistant turn, or every one in order.",
    ),
    option(
        "--tool-divergence",
        type=click.Choice(["end", "splice"]),
        default="end",
        show_default=True,
        group=INPUT,
        to="input.tool_divergence",
        help="A regenerated turn whose tool calls differ from the dataset's: end the trace "
        "there, or go on with the dataset's results under the new call ids (off-policy).",
    ),
    option(
        "--tool-server",
        metavar="URL",
        group=INPUT,
        to="input.tool_server",
        help="Run the tool calls of regenerated turns here (POST per call; see the tool "
        "server contract in docs/generate.md).",
    ),
)

fleet_options = _all(
    option(
        "--fleet",
        type=InputPath(),
        metavar="FLEET.json",
        group=FLEET,
        to="fleet.fleet_file",
        help="The servers `regen serve` started (not with --servers).",
    ),
    option(
        "--servers",
        multiple=True,
        multi_value=True,
        metavar="URL ...",
        group=FLEET,
        help="OpenAI-compatible base URLs [default: $OPENAI_BASE_URL, else the embedded model].",
    ),
    option(
        "--local-model",
        type=InputPath(),
        metavar="GGUF",
        group=FLEET,
        to="fleet.local_model",
        help="GGUF for the embedded llama.cpp server.",
    ),
    option(
        "--model",
        group=FLEET,
        to="fleet.model",
        help="Model name to request [default: what the servers list].",
    ),
    option(
        "--api-key-env",
        metavar="VAR",
        group=FLEET,
        to="fleet.api_key_env",
        help="Read the API key from this variable [default: OPENAI_API_KEY when set].",
    ),
    option(
        "--concurrency-per-server",
        "concurrency",
        type=int,
        metavar="N",
        group=FLEET,
        aliases=["--concurrency"],
        to="fleet.concurrency",
        help="Most requests in flight per server; the level is found live below it "
        "[1024; embedded: 2]. With --fixed-concurrency: exactly N [64].",
    ),
    option(
        "--fixed-concurrency",
        is_flag=True,
        group=FLEET,
        to="fleet.fixed_concurrency",
        help="Keep exactly --concurrency-per-server in flight per server (no live control).",
    ),
    option(
        "--dispatch",
        type=click.Choice(["affine", "least-loaded"]),
        default="affine",
        show_default=True,
        group=FLEET,
        to="fleet.dispatch",
        help="affine: samples, later turns and shared prefixes go to the server that "
        "caches them, within a load bound; least-loaded: always the least-loaded.",
    ),
)

LIST = "A list (a,b,c) picks one per sample, seeded."


def in_range(key: str) -> click.ParamType:
    """The flag's values in the range a prompt line's own `sampling` takes (one source of
    truth: a flag refused there is refused here, with the range)."""
    lowest, highest, whole = SAMPLING_RANGES[key]
    if whole:
        return click.IntRange(min=lowest, max=highest)
    return click.FloatRange(min=lowest, max=highest)


sampling_options = _all(
    option(
        "--max-output-tokens",
        type=OneOrList(in_range("max_tokens")),
        default=4096,
        show_default=True,
        group=SAMPLING,
        to="sampling.max_tokens",
        help=f"max_tokens per request. {LIST}",
    ),
    option(
        "--temperature",
        type=OneOrList(in_range("temperature")),
        group=SAMPLING,
        to="sampling.temperature",
        help=f"{SERVER_DEFAULT} {LIST}",
    ),
    option(
        "--top-p",
        type=OneOrList(in_range("top_p")),
        group=SAMPLING,
        to="sampling.top_p",
        help=f"{SERVER_DEFAULT} {LIST}",
    ),
    option(
        "--top-k",
        type=OneOrList(in_range("top_k")),
        group=SAMPLING,
        to="sampling.top_k",
        help=f"{SERVER_DEFAULT} {LIST}",
    ),
    option(
        "--seed",
        type=int,
        group=SAMPLING,
        to="sampling.seed",
        help="Base seed; sample k uses seed+k.",
    ),
    option(
        "--thinking",
        type=OneOrList(click.Choice(["on", "off", "auto"])),
        default="auto",
        show_default=True,
        group=SAMPLING,
        to="sampling.thinking",
        help=f"Sent as chat_template_kwargs.enable_thinking; auto sends nothing. {LIST}",
    ),
)

request_options = _all(
    option(
        "--request-timeout",
        type=float,
        default=1800,
        show_default=True,
        group=RELIABILITY,
        to="fleet.timeouts.request",
        help="Seconds for one whole request.",
    ),
    option(
        "--stream",
        is_flag=True,
        group=RELIABILITY,
        to="fleet.timeouts.stream",
        help="Stream responses, so that a stalled one is noticed.",
    ),
)


def config_from(opts: dict[str, Any], fixed: dict[str, Any] | None = None) -> GenerateConfig:
    """The config that the current command's options declare, plus `fixed` paths (what the
    verb itself decides). --servers falls back to $OPENAI_BASE_URL unless --fleet or
    --local-model says otherwise."""
    command = click.get_current_context().command
    values = config_values(command, opts)
    servers = list(opts["servers"])
    if not servers and not opts["fleet"]:
        servers = servers_from_env(opts["local_model"])
    typed = click.get_current_context().meta.get("regen.argv")
    return build_config(
        {**values, "fleet.servers": servers, "command": typed and tuple(typed), **(fixed or {})}
    )
