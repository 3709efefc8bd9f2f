"""Before a run sends its first prompt: which model the fleet serves, which servers answer
at all (the others start out of rotation), which engine and version each one is, and, with
--return-token-ids, that every answering server returns token ids. (Whether they answer
prompts with tools is asked by the session, run/tool_prompts.py.)"""

from __future__ import annotations

from collections.abc import Callable

from regen.errors import ConfigError
from regen.fleet.dispatch import Fleet
from regen.fleet.engine_info import identify_fleet
from regen.fleet.preflight import check_token_ids, resolve_model
from regen.fleet.server import Server
from regen.run.config import GenerateConfig
from regen.serve.fleetfile import FleetFile

# score lines the logprobs up with the answer's tokens; without the engine's own ids it has
# only the text to re-tokenise, and a row that splits differently cannot be scored
LOGPROBS_WITHOUT_IDS = (
    "--logprobs without --return-token-ids: `regen score` re-tokenises each answer's text, and "
    "a GGUF draft skips a row whose tokens differ from the engine's (one logprob each) as "
    "logprobs_mismatch (14 of 96 rows of an embedded run at temperature 1); add "
    "--return-token-ids where the servers return ids (vLLM, SGLang; the embedded llama.cpp "
    "does not)"
)


async def preflight(
    config: GenerateConfig,
    servers: list[Server],
    fleet: Fleet,
    embedded: bool,
    event: Callable[[str], None],
) -> str:
    """The model to ask for."""
    model, down = await resolve_model(servers, config.fleet.model)
    fleet.model = model
    for server, why in down.items():
        fleet.take_out_at_start(server, why)
    warning = await identify_fleet(servers, _known_engine(config, embedded), config.sampling.seed)
    if warning:
        event(warning)
    if config.output.return_token_ids:
        await _check_token_ids(servers, model)
    elif config.output.logprobs:
        event(LOGPROBS_WITHOUT_IDS)
    return model


def _known_engine(config: GenerateConfig, embedded: bool) -> str | None:
    """The engine regen started (FLEET.json, or the embedded llama.cpp server)."""
    if embedded:
        return "llamacpp"
    fleet_file = config.fleet.fleet_file
    return FleetFile.read(fleet_file).engine if fleet_file else None


async def _check_token_ids(servers: list[Server], model: str) -> None:
    answering = [s for s in servers if s.available]
    unable = [s.url for s in answering if not await check_token_ids(s, model)]
    if unable:
        raise ConfigError(
            "--return-token-ids: these servers do not return token ids: " + ", ".join(unable),
            hint="use a server that supports `return_token_ids` (vLLM >= 0.10.2, SGLang), "
            "or drop --return-token-ids",
        )
