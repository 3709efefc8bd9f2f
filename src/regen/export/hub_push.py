"""`--push-to-hub ORG/NAME`: publish an export as one Hub commit, or nothing at all.

`huggingface_hub` does the work (`HfApi.create_repo`, `upload_folder`: the Hub decides which
files go to large-file storage). The token is `HF_TOKEN` or the standard login; it is only
ever handed to `HfApi`, never printed or written. Before anything is created the token is
checked (`whoami`) and so is what the repo already holds: a repo with files that an earlier
regen export did not write is refused, so someone else's dataset is never overwritten. The
upload is a single commit (data, card, regen.json, draft vocabulary), replacing the data of
an earlier regen export; transient faults (5xx, 429, connection) are retried a few times,
and since a commit applies whole or not at all, a retry cannot leave half a dataset.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from huggingface_hub import HfApi, get_token
from huggingface_hub.errors import (
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.errors import HTTPError as HubTransportError

from regen.errors import ConfigError, RegenError

ATTEMPTS = 4
BACKOFF_S = 1.0
TRANSIENT = {408, 429, 500, 502, 503, 504}
OURS = ("README.md", "regen.json", ".gitattributes")  # what an earlier regen export wrote
OUR_FOLDERS = ("data/", "draft_vocab/")


class HubError(RegenError):
    """The Hub refused the push, or could not be reached (exit 7)."""

    exit_code = 7


@dataclass(frozen=True)
class Push:
    repo_id: str
    private: bool = False
    revision: str | None = None
    allow_failed_check: bool = False


def refuse_unchecked(verdict: str, allow: bool) -> None:
    """A failed (or never checked) dataset is not published unless asked for explicitly."""
    if verdict == "pass" or allow:
        return
    what = "failed `regen check`" if verdict == "fail" else "was not checked"
    raise ConfigError(
        f"refusing to push: this export {what} (its card says so at the top)",
        hint="fix the run or its filters (--drop-degenerate, ...), give --tokenizer so export "
        "checks it, or pass --allow-failed-check to publish it anyway",
    )


def push(out_dir: Path, spec: Push, verdict: str, commit_message: str) -> str:
    """Upload `out_dir`; return the commit URL."""
    refuse_unchecked(verdict, spec.allow_failed_check)
    if "/" not in spec.repo_id:
        raise ConfigError(f"--push-to-hub {spec.repo_id}: expected ORG/NAME")
    token = get_token()
    if not token:
        raise ConfigError(
            "--push-to-hub needs a Hugging Face token",
            hint="set HF_TOKEN, or log in once with `hf auth login`",
        )
    api = HfApi(token=token)
    _hub(lambda: api.whoami(), "check the token")
    existing = _existing_files(api, spec)
    _refuse_foreign(spec.repo_id, existing or [])
    _hub(
        lambda: api.create_repo(
            spec.repo_id, repo_type="dataset", private=spec.private, exist_ok=True
        ),
        "create the repo",
    )
    try:
        if spec.revision:
            _hub(
                lambda: api.create_branch(
                    spec.repo_id, branch=spec.revision, repo_type="dataset", exist_ok=True
                ),
                "create the branch",
            )
        info = _hub(
            lambda: api.upload_folder(
                repo_id=spec.repo_id,
                repo_type="dataset",
                folder_path=out_dir,
                revision=spec.revision,
                commit_message=commit_message,
                ignore_patterns=[".*", "**/.*"],
                delete_patterns=[f"{d}**" for d in OUR_FOLDERS],
            ),
            "upload the export",
        )
    except HubError:
        if existing is None:  # we created it: leave no empty repo behind
            _hub(
                lambda: api.delete_repo(spec.repo_id, repo_type="dataset", missing_ok=True),
                "remove the empty repo this push created",
            )
        raise
    return str(info.commit_url)


def _refuse_foreign(repo_id: str, existing: list[str]) -> None:
    """Never overwrite a dataset that a regen export did not write."""
    foreign = [f for f in existing if f not in OURS and not f.startswith(OUR_FOLDERS)]
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise ConfigError(
            f"{repo_id} already holds files that a regen export did not write ({shown})",
            hint="push to a new repo or branch (--revision), or clear that repo first",
        )


def _existing_files(api: HfApi, spec: Push) -> list[str] | None:
    """The repo's files at the revision (its main branch when the revision is new); None
    when there is no such repo."""
    for revision in dict.fromkeys([spec.revision, None]):
        try:
            return _hub(
                lambda r=revision: api.list_repo_files(
                    spec.repo_id, repo_type="dataset", revision=r
                ),
                "list the repo",
            )
        except RevisionNotFoundError:
            continue
        except RepositoryNotFoundError:
            return None
    return []


def _hub(call: Any, doing: str) -> Any:
    """Run one Hub call with bounded retries on transient faults; map the rest to HubError."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return call()
        except (RepositoryNotFoundError, RevisionNotFoundError):
            raise  # answers, not faults: the caller decides
        except OfflineModeIsEnabled as exc:
            raise ConfigError(
                f"cannot {doing}: HF_HUB_OFFLINE is set",
                hint="unset HF_HUB_OFFLINE to push, or drop --push-to-hub",
            ) from exc
        except HfHubHTTPError as exc:
            status = exc.response.status_code if exc.response is not None else None
            if status in (401, 403):
                raise HubError(
                    f"the Hub refused the token ({status}) when trying to {doing}",
                    hint="check HF_TOKEN (or `hf auth login`): it needs write access to the org",
                ) from exc
            if status not in TRANSIENT or attempt == ATTEMPTS:
                raise HubError(
                    f"the Hub answered {status} when trying to {doing}: {_first_line(exc)}"
                ) from exc
        except HubTransportError as exc:
            if attempt == ATTEMPTS:
                raise HubError(
                    f"cannot reach the Hub to {doing}: {_first_line(exc)}",
                    hint="check the network (or HF_ENDPOINT)",
                ) from exc
        time.sleep(BACKOFF_S * 2 ** (attempt - 1))
    raise AssertionError("unreachable")  # the loop returns or raises


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
