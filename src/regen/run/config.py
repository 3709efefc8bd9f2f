"""What a generation run is asked to do, resolved once, with no secrets in it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from regen.errors import ConfigError
from regen.fleet.dispatch import HealthPolicy, RetryPolicy
from regen.fleet.openai_env import ApiKey, resolve_api_key
from regen.fleet.server import Timeouts
from regen.run.quality import Thresholds
from regen.scale.partition import WHOLE, Part
from regen.serve.fleetfile import FleetFile
from regen.storage.uploader import UploadPolicy

Thinking = Literal["on", "off", "auto"]


@dataclass(frozen=True)
class Sampling:
    """None means "the server's default" (its generation config), recorded as such."""

    max_tokens: int = 4096
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    thinking: Thinking = "auto"
    extra: dict[str, Any] | None = None  # other request fields, as a batch file's body gave them

    def with_overrides(self, overrides: dict[str, Any] | None) -> Sampling:
        if not overrides:
            return self
        return replace(self, **overrides)

    def request_fields(self, sample: int) -> dict[str, Any]:
        """The sampling part of a chat completion request body."""
        body: dict[str, Any] = dict(self.extra or {})
        body["max_tokens"] = self.max_tokens
        for name in ("temperature", "top_p", "top_k"):
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        if self.seed is not None:
            body["seed"] = self.seed + sample  # K samples of one prompt must differ
        if self.thinking != "auto":
            # SGLang and vLLM pass these to the chat template (Qwen3-style enable_thinking).
            kwargs = {
                **body.get("chat_template_kwargs", {}),
                "enable_thinking": self.thinking == "on",
            }
            body["chat_template_kwargs"] = kwargs
        return body


@dataclass
class GenerateConfig:
    prompts: str | Path  # a local path or an fsspec URL such as s3://bucket/prompts.jsonl
    output_dir: str | Path  # a local directory or an fsspec URL such as s3://bucket/run
    servers: list[str] = field(default_factory=list)  # empty: start the embedded server
    fleet: Path | None = None  # a FLEET.json written by `regen serve`, instead of servers
    local_model: Path | None = None
    model: str | None = None
    sampling: Sampling = field(default_factory=Sampling)
    concurrency: int | None = None  # per server; None: 64, or 2 for the embedded server
    samples_per_prompt: int = 1
    regenerate_turns: Literal["last", "all"] = "last"
    return_token_ids: bool = False
    api_key_env: str | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    health: HealthPolicy = field(default_factory=HealthPolicy)
    quality: Thresholds = field(default_factory=Thresholds)
    abort_on_degenerate: bool = False
    retry_errors: bool = False
    allow_changed_input: bool = False
    allow_changed_sampling: bool = False
    compress: bool = False
    shard_max_records: int = 20_000
    shard_max_bytes: int = 256 << 20
    staging_dir: Path | None = None  # for a bucket --output-dir; None: under ~/.cache/regen
    upload_interval: float = 300.0  # seconds: an open shard older than this is sealed, uploaded
    upload: UploadPolicy = field(default_factory=UploadPolicy)
    part: Part = WHOLE  # --shard I/N: this process does the prompts of part I only
    drain_timeout: float = 60.0
    snapshot_interval: float = 2.0
    log_interval: float = 30.0
    display: Literal["auto", "live", "plain", "none"] = "auto"
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    # `regen plan`'s calibration: generate only these input lines (1-based), as the first
    # records of the run; the rest stays pending for `regen generate`. Not in the manifest.
    only_lines: frozenset[int] | None = None

    def __post_init__(self) -> None:
        if self.samples_per_prompt < 1:
            raise ConfigError("--samples-per-prompt must be at least 1")
        if self.servers and self.fleet is not None:
            raise ConfigError(
                "--servers and --fleet both name the servers", hint="pass only one of them"
            )
        if self.concurrency is not None and self.concurrency < 1:
            raise ConfigError("--concurrency-per-server must be at least 1")
        if self.sampling.max_tokens < 1:
            raise ConfigError("--max-output-tokens must be at least 1")
        if self.upload_interval <= 0:
            raise ConfigError("--upload-interval must be more than 0 seconds")
        for url in self.servers:
            check_base_url(url)

    def server_urls(self) -> list[str]:
        """--servers, or the servers of --fleet; empty means: start the embedded model."""
        if self.fleet is None:
            return list(self.servers)
        return FleetFile.read(self.fleet).urls

    @property
    def per_server_concurrency(self) -> int:
        if self.concurrency is not None:
            return self.concurrency
        return 64 if self.servers or self.fleet else 2

    def api_key(self) -> str | None:
        return self.api_key_info().value

    def api_key_info(self) -> ApiKey:
        env_name = self.api_key_env
        if env_name is None and self.fleet is not None:  # the variable `regen serve` used
            env_name = FleetFile.read(self.fleet).api_key_env
        return resolve_api_key(env_name, embedded=self.embedded)

    @property
    def embedded(self) -> bool:
        return not self.servers and self.fleet is None

    def resolved(self, servers: list[str], model: str) -> dict[str, Any]:
        """The manifest's `config`: everything that shapes the output, and no secret."""
        return {
            "prompts": str(self.prompts),
            "output_dir": str(self.output_dir),
            "servers": servers,
            "embedded": self.embedded,
            "model": model,
            "sampling": asdict(self.sampling),
            "samples_per_prompt": self.samples_per_prompt,
            "regenerate_turns": self.regenerate_turns,
            "return_token_ids": self.return_token_ids,
            "concurrency_per_server": self.per_server_concurrency,
            "api_key_env": self.api_key_env,
            "api_key_from": self.api_key_info().source,
            "timeouts": asdict(self.timeouts),
            "max_retries": self.retry.max_retries,
            "give_up_after_s": self.health.give_up_after,
            "compress": self.compress,
            "shards": self.part.count,  # the same N on every resume (see manifest)
        }


ENDPOINT_SUFFIXES = ("/chat/completions", "/completions", "/models")


def check_base_url(url: str) -> None:
    """A server is named by its base URL; regen appends /v1/chat/completions itself."""
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
