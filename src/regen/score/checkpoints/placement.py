"""Where the target and a checkpoint run, and at which precision (`score --device --dtype
--max-batch-tokens`), with transformers' own mechanisms: one device by `.to()`, several GPUs
by `device_map="auto"` (accelerate's split of the layers, no hand-written sharding).

    device  cpu | cuda (every GPU: one, or the layers split over several) | cuda:N | auto
            (cuda when torch sees a GPU, else cpu)
    dtype   float32 | bfloat16 | float16 | auto (bfloat16 on a GPU, float32 on the CPU)

A 27B target is ~54 GB in bf16 (one 80 GB GPU) and ~108 GB in float32 (docs/score.md has the
arithmetic). The batch bound counts padded tokens: rows are sorted by length so that a batch
pads little, and a row longer than the bound runs alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from regen.errors import ConfigError

DEVICES = ("auto", "cpu", "cuda")  # and cuda:N
DTYPES = ("auto", "float32", "bfloat16", "float16")
MAX_BATCH_TOKENS = 8192  # padded tokens per forward of the target


@dataclass(frozen=True)
class Placement:
    device: str = "cpu"
    dtype: str = "float32"
    max_batch_tokens: int = MAX_BATCH_TOKENS

    def __post_init__(self) -> None:
        if self.device not in DEVICES and not _cuda_index(self.device):
            raise ConfigError(
                f"--device {self.device}: expected cpu, cuda, cuda:N or auto",
                hint="--device auto takes the GPU when torch sees one",
            )
        if self.dtype not in DTYPES:
            raise ConfigError(f"--dtype {self.dtype}: expected one of {', '.join(DTYPES)}")
        if self.max_batch_tokens < 1:
            raise ConfigError(f"--max-batch-tokens {self.max_batch_tokens}: expected 1 or more")

    def resolved(self) -> Placement:
        """`auto` made concrete, and a GPU asked for checked to be there."""
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        device = ("cuda" if gpus else "cpu") if self.device == "auto" else self.device
        if device.startswith("cuda") and not gpus:
            raise ConfigError(
                f"--device {self.device}: torch sees no CUDA GPU here "
                f"(torch {torch.__version__}, built {'with' if torch.version.cuda else 'without'}"
                " CUDA)",
                hint="pass --device cpu (and --dtype bfloat16 to halve the memory), or install "
                "a CUDA build of torch on a machine with a GPU",
            )
        index = _cuda_index(device)
        if index is not None and index >= gpus:
            raise ConfigError(f"--device {device}: torch sees {gpus} GPU(s), cuda:0..{gpus - 1}")
        dtype = self.dtype
        if dtype == "auto":
            dtype = "float32" if device == "cpu" else "bfloat16"
        return Placement(device, dtype, self.max_batch_tokens)

    @property
    def torch_dtype(self) -> Any:
        """Of a resolved placement (`auto` is made concrete by `resolved`)."""
        import torch

        return getattr(torch, self.dtype)

    def split(self) -> bool:
        """Whether the layers are spread over several GPUs (`--device cuda` on a multi-GPU box)."""
        import torch

        return self.device == "cuda" and torch.cuda.device_count() > 1

    def load_kwargs(self, what: str) -> dict[str, Any]:
        """from_pretrained's arguments: the dtype, and accelerate's split over several GPUs."""
        kwargs: dict[str, Any] = {"dtype": self.torch_dtype}
        if self.split():
            try:
                import accelerate  # noqa: F401  (transformers' device_map needs it)
            except ImportError as exc:
                raise ConfigError(
                    f"{what}: spreading the target over several GPUs needs accelerate",
                    hint="pip install accelerate, or pass --device cuda:0 for one GPU",
                ) from exc
            kwargs["device_map"] = "auto"
        return kwargs

    @property
    def label(self) -> str:
        return f"{self.device}, {self.dtype}"


def _cuda_index(device: str) -> int | None:
    head, _, tail = device.partition(":")
    return int(tail) if head == "cuda" and tail.isdigit() else None


ON_CPU = Placement()  # transformers' CPU default: float32
