"""One quick question to the Hugging Face Hub before a long load.

Asked for a name that does not exist, or with no network, transformers and datasets retry
for about a minute and then print an error about something else. One `repo_info` call with
a short timeout answers "no such repo" or "the Hub cannot be reached" at once. With
HF_HUB_OFFLINE=1 nothing is asked: the local cache is all there is.
"""

from __future__ import annotations

import os
import re
from typing import Literal

from regen.errors import ConfigError

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
TIMEOUT_S = 10.0


def looks_like_path(spec: str) -> bool:
    """`/a/b`, `./x`, `~/m` or anything that cannot be a repo id is meant as a local path."""
    return spec.startswith(("/", ".", "~")) or not REPO_ID.match(spec)


def offline() -> bool:
    """HF_HUB_OFFLINE as huggingface_hub itself read it (one source of truth)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def check_repo(name: str, kind: Literal["model", "dataset"], what: str) -> None:
    """Raise a ConfigError naming the fix when the Hub has no `name` or cannot be reached."""
    if offline():
        return
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        HfApi(token=os.environ.get("HF_TOKEN") or None).repo_info(
            name, repo_type=kind, timeout=TIMEOUT_S
        )
    except GatedRepoError:
        return  # it exists; the load will say whether HF_TOKEN grants access
    except RepositoryNotFoundError as exc:
        raise ConfigError(
            f"{what} {name}: no such {kind} on the Hugging Face Hub",
            hint="check the spelling (owner/name); for a private or gated one set HF_TOKEN",
        ) from exc
    except Exception as exc:
        if not _is_transport_error(exc):
            raise
        raise ConfigError(
            f"{what} {name}: cannot reach the Hugging Face Hub ({type(exc).__name__}), "
            "and it is not in the local cache",
            hint="check the network, or use a local directory; with the files already "
            "cached, set HF_HUB_OFFLINE=1",
        ) from exc


def _is_transport_error(exc: BaseException) -> bool:
    """huggingface_hub raises its HTTP client's own errors (httpx's, or requests' in older
    versions) for a network that is down; they share these class names, not a base class."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"TransportError", "ConnectionError", "OfflineModeIsEnabled"})
