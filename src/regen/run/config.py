"""What a generation run is asked to do, resolved once, with no secrets in it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any, Literal, get_type_hints

from regen.errors import ConfigError
from regen.fleet.dispatch import HealthPolicy, RetryPolicy
from regen.fleet.openai_env import ApiKey, resolve_api_key
from regen.fleet.server import Timeouts
from regen.format.part import WHOLE, Part
from regen.run.input_gate import batch_models_in
from regen.run.quality import Thresholds
from regen.run.sampling import Sampling, choices
from regen.serve.fleetfile import FleetFile
from regen.serve.supervisor import RestartPolicy
from regen.storage import StoreOptions
from regen.storage.uploader import UploadPolicy


@dataclass(frozen=True)
class InputConfig:
    """What to make of the prompt file."""

    prompts: str | Path  # a local path or an fsspec URL such as s3://bucket/prompts.jsonl
    samples_per_prompt: int = 1
    regenerate_turns: Literal["last", "all"] = "last"
    allow_changed_input: bool = False
    allow_changed_sampling: bool = False
    retry_errors: bool = False  # what is in errors/ is pending again
    limit: int | None = None  # only the first N lines (a trial); the rest stay pending
    # A regenerated turn whose tool calls are not the dataset's: end the trace there, or
    # go on with the dataset's results under the new ids (run/tool_turns.py)
    tool_divergence: Literal["end", "splice"] = "end"
    tool_server: str | None = None  # where the calls of regenerated turns run (tool_server.py)

    def __post_init__(self) -> None:
        if self.tool_server is not None and not self.tool_server.startswith(
            ("http://", "https://")
        ):
            raise ConfigError(
                f"--tool-server {self.tool_server!r} has no scheme",
                hint=f"write it as http://{self.tool_server}",
            )
        if self.samples_per_prompt < 1:
            raise ConfigError("--samples-per-prompt must be at least 1")
        if self.limit is not None and self.limit < 1:
            raise ConfigError("--limit must be at least 1")


LIVE_CAP = 1024  # the default cap of live concurrency: a GPU server's knee can be this high


@dataclass(frozen=True)
class FleetConfig:
    """Which servers answer, and how they are talked to."""

    servers: tuple[str, ...] = ()  # empty (and no fleet_file): start the embedded server
    fleet_file: Path | None = None  # a FLEET.json written by `regen serve`, instead of servers
    local_model: Path | None = None
    model: str | None = None
    api_key_env: str | None = None
    # Per server: the cap of the live level, or the level itself with fixed_concurrency.
    # None: LIVE_CAP live, 64 fixed, 2 for the embedded server.
    concurrency: int | None = None
    fixed_concurrency: bool = False  # keep exactly `concurrency` in flight (no live control)
    dispatch: str = "affine"  # "affine": a prompt's prefix to the server that holds it
    # (within a load bound, fleet/affinity.py); "least-loaded": always the least-loaded
    timeouts: Timeouts = field(default_factory=Timeouts)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    health: HealthPolicy = field(default_factory=HealthPolicy)
    # How the embedded server is restarted (no flag; tests shorten the backoff). None: the
    # default policy, with the embedded server's own startup timeout (fleet/embedded.py).
    restart: RestartPolicy | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "servers", tuple(self.servers))
        if self.servers and self.fleet_file is not None:
            raise ConfigError(
                "--servers and --fleet both name the servers", hint="pass only one of them"
            )
        if self.concurrency is not None and self.concurrency < 1:
            raise ConfigError("--concurrency-per-server must be at least 1")
        for url in self.servers:
            check_base_url(url)

    def server_urls(self) -> list[str]:
        """--servers, or the servers of --fleet; empty means: start the embedded model."""
        if self.fleet_file is None:
            return list(self.servers)
        return FleetFile.read(self.fleet_file).urls

    @property
    def embedded(self) -> bool:
        return not self.servers and self.fleet_file is None

    @property
    def per_server_concurrency(self) -> int:
        if self.concurrency is not None:
            return self.concurrency
        if self.embedded:
            return 2
        return 64 if self.fixed_concurrency else LIVE_CAP

    def api_key_info(self) -> ApiKey:
        env_name = self.api_key_env
        if env_name is None and self.fleet_file is not None:  # the variable `regen serve` used
            env_name = FleetFile.read(self.fleet_file).api_key_env
        return resolve_api_key(env_name, embedded=self.embedded)


@dataclass(frozen=True)
class OutputConfig:
    """Where the records go and how they are written."""

    dir: str | Path  # a local directory or an fsspec URL such as s3://bucket/run
    compress: bool = False
    return_token_ids: bool = False
    logprobs: bool = False  # each answer token's logprob, for `score` at the run's temperature
    shard_max_records: int = 20_000
    shard_max_bytes: int = 256 << 20
    staging_dir: Path | None = None  # for a bucket dir; None: under ~/.cache/regen
    upload_interval: float = 300.0  # seconds: an open shard older than this is sealed, uploaded
    upload: UploadPolicy = field(default_factory=UploadPolicy)

    def __post_init__(self) -> None:
        if self.upload_interval <= 0:
            raise ConfigError("--upload-interval must be more than 0 seconds")

    def store_options(self, part: Part) -> StoreOptions:
        return StoreOptions(part, self.staging_dir, self.upload_interval, self.upload)


@dataclass(frozen=True)
class Limits:
    """When a run stops by itself, and how it ends."""

    quality: Thresholds = field(default_factory=Thresholds)
    abort_on_degenerate: bool = False
    drain_timeout: float = 60.0


@dataclass(frozen=True)
class DisplayConfig:
    mode: Literal["auto", "live", "plain", "none"] = "auto"
    log_interval: float = 30.0
    snapshot_interval: float = 2.0
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"


@dataclass(frozen=True)
class GenerateConfig:
    """What a generation run is asked to do, in groups; `part` is the one piece an executor
    sets (`--shard I/N`: this process does the prompts of part I only)."""

    input: InputConfig
    output: OutputConfig
    fleet: FleetConfig = field(default_factory=FleetConfig)
    sampling: Sampling = field(default_factory=Sampling)
    part: Part = WHOLE
    limits: Limits = field(default_factory=Limits)
    display: DisplayConfig = field(default_factory=DisplayConfig)
    # the command line that started this session (the CLI's words), kept in the manifest's
    # sessions so that `regen status` prints the exact command that resumes the run
    command: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if min(choices(self.sampling.max_tokens)) < 1:
            raise ConfigError("--max-output-tokens must be at least 1")

    def resolved(self, servers: list[str], model: str) -> dict[str, Any]:
        """The manifest's `config`: everything that shapes the output, and no secret."""
        fleet = self.fleet
        return {
            "prompts": str(self.input.prompts),
            "output_dir": str(self.output.dir),
            "servers": servers,
            "embedded": fleet.embedded,
            "model": model,
            "sampling": self.sampling.for_manifest(),
            "samples_per_prompt": self.input.samples_per_prompt,
            "regenerate_turns": self.input.regenerate_turns,
            "tool_divergence": self.input.tool_divergence,
            "tool_server": self.input.tool_server,
            "return_token_ids": self.output.return_token_ids,
            "logprobs": self.output.logprobs,
            "concurrency_per_server": fleet.per_server_concurrency,
            "concurrency_control": "fixed" if fleet.fixed_concurrency else "live",
            "dispatch": fleet.dispatch,
            "api_key_env": fleet.api_key_env,
            "api_key_from": fleet.api_key_info().source,
            "timeouts": asdict(fleet.timeouts),
            "max_retries": fleet.retry.max_retries,
            "give_up_after_s": fleet.health.give_up_after,
            "compress": self.output.compress,
            "shards": self.part.count,  # the same N on every resume (see manifest)
            # a batch file: sampling comes per record, and these are the models it names
            "batch_models": batch_models_in(self.input.prompts),
            # what `regen serve` started the fleet with: `score --draft ngram` reads it
            "speculative_config": (
                FleetFile.read(fleet.fleet_file).speculative_config
                if fleet.fleet_file is not None
                else None
            ),
        }


ENDPOINT_SUFFIXES = ("/chat/completions", "/completions", "/models")


def check_base_url(url: str) -> None:
    """A server is named by its base URL; regen appends /v1/chat/completions itself."""
    if "," in url:
        spaced = " ".join(part.strip() for part in url.split(",") if part.strip())
        raise ConfigError(
            f"--servers {url!r} is one argument holding a comma-separated list",
            hint=f"separate URLs with spaces: --servers {spaced}",
        )
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"server URL {url!r} has no scheme", hint=f"write it as http://{url}")
    trimmed = url.rstrip("/")
    for suffix in ENDPOINT_SUFFIXES:
        if trimmed.endswith(suffix):
            base = trimmed[: -len(suffix)]
            raise ConfigError(
                f"{url} is an endpoint, not a server: pass the base URL",
                hint=f"write it as {base} (regen adds {suffix} itself)",
            )


def build_config(values: Mapping[str, Any]) -> GenerateConfig:
    """A config from dotted paths, as the command-line options declare them:
    `{"input.prompts": p, "fleet.timeouts.request": 30.0, ...}`. Whatever is not named keeps
    its default, so every group is built directly and no option is mapped by hand twice."""
    return _build(GenerateConfig, values)


def _build(cls: type, values: Mapping[str, Any]) -> Any:
    nested: dict[str, dict[str, Any]] = {}
    kwargs: dict[str, Any] = {}
    for path, value in values.items():
        head, _, rest = path.partition(".")
        if rest:
            nested.setdefault(head, {})[rest] = value
        else:
            kwargs[head] = value
    hints = get_type_hints(cls)
    for name, inner in nested.items():
        if name not in hints or not is_dataclass(hints[name]):
            raise TypeError(f"{cls.__name__}.{name} is not a group of options")
        kwargs[name] = _build(hints[name], inner)
    return cls(**kwargs)
