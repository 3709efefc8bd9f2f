"""One exception tree for everything regen raises on purpose.

    RegenError                  has .hint: what the user should change, and .exit_code
    ├── ConfigError             bad flags, paths, recipes: fix the command or the file
    │   └── InputFileError      the input file as a whole is unusable (exit 3)
    ├── InputError              one input record cannot be used (the run goes on)
    ├── RunStateError           output dir in use, or resumed with a changed input/parameters
    ├── StorageError            the output bucket could not be read or written (exit 6)
    ├── OutputError             the output dir cannot be written: full, read-only (exit 6)
    ├── FleetUnavailable        no server can serve: none answers, or all refuse us (exit 5)
    └── ServerError             one request to an inference server failed
        ├── RetryableError      may succeed later or elsewhere
        │   ├── TransportError  connection refused/reset, DNS, broken response stream
        │   ├── RequestTimeout  no (complete) answer in time
        │   ├── Overloaded      429 / 503, with the server's Retry-After when it sent one
        │   └── ServerFault     500 / 502 / 504 / 408
        │       └── EngineAborted  HTTP 200, but the engine cut the answer short (abort)
        ├── PermanentError      will fail again anywhere (400-class, unusable response)
        │   └── PromptRejected  a 5xx that is this prompt's, not the server's: the engine
        │                       could not read the request, or the same 500 came again on
        │                       retry while the server answered other prompts
        └── ServerRefused       the server refuses every request alike (401/403/404, or a
                                200 login page): the fleet's fault, never the prompt's

HTTP-library errors are mapped to this tree in one place (`regen.fleet.http_errors`), so the
retry decision is a type check (`isinstance(err, RetryableError)`), never a string match.
The CLI turns a RegenError into a message plus hint and a non-zero exit; anything else is a
bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
import errno
from collections.abc import Iterable
from pathlib import Path

# What a full, read-only or forbidden output location answers a write with.
UNWRITABLE_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT}


class RegenError(Exception):
    """Base of every error regen raises on purpose. `exit_code` is what the CLI exits with:
    2 means "fix the command"; the others tell a supervisor (Slurm, systemd) what happened."""

    exit_code = 2

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class ConfigError(RegenError):
    """The command line, a path or a recipe is wrong."""


class InputFileError(ConfigError):
    """The input file as a whole cannot be used: empty, the wrong shape, mostly unusable
    lines, or a compressed stream that is truncated or corrupt."""

    exit_code = 3


RESUMES = "a run resumes where it stopped, nothing written is lost"


class OutputError(RegenError):
    """The output dir cannot be written (disk full, read-only): free space or fix the mount,
    then the same command resumes with nothing lost."""

    exit_code = 6

    @classmethod
    def writing(cls, folder: Path, exc: OSError, again: str = RESUMES) -> OutputError:
        """`again`: what running the same command again does (a run resumes)."""
        return cls(
            f"cannot write to {folder}: {exc.strerror or exc}",
            hint=f"free space (or make it writable, or fix the mount), then run the same "
            f"command again: {again}",
        )


class InputError(RegenError):
    """One input record cannot be used; `kind` is a short machine-readable reason."""

    def __init__(self, message: str, *, kind: str = "invalid_record", hint: str | None = None):
        super().__init__(message, hint=hint)
        self.kind = kind
        self.record_id: str | None = None  # the id the line gave, kept in errors/


class RunStateError(RegenError):
    """The output directory's state forbids this run (locked, or resumed with changes)."""


class StorageError(RegenError):
    """Object storage (the --output-dir bucket) failed a read or write. Mapped once, in
    `regen.storage.bucket`, from fsspec's and the cloud SDKs' errors; uploads retry it.
    Exit 6, as for a local output dir that cannot be written."""

    exit_code = 6


class ServerError(RegenError):
    """A request to an inference server failed."""

    def __init__(
        self,
        message: str,
        *,
        server: str | None = None,
        status: int | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.server = server
        self.status = status
        self.attempts = 1  # set by the dispatcher when it gives up
        # The answer had begun (tokens had come) when it failed: one failed request, never
        # a server refusing work (that refuses before the first token): set by the reader.
        self.after_tokens = False

    @property
    def kind(self) -> str:
        return type(self).__name__

    def to_record(self) -> dict:
        """The `error` field of an errors/ line."""
        out: dict = {"type": self.kind, "message": self.message}
        if self.status is not None:
            out["status"] = self.status
        if self.server is not None:
            out["server"] = self.server
        return out


class RetryableError(ServerError):
    """Worth trying again, possibly on another server."""


class TransportError(RetryableError):
    """The connection failed or broke before a whole response arrived."""


class Withdrawn(RetryableError):
    """Withdrawn before its first token: its server's level was lowered under what it held
    (fleet/waiting_streams.py). Sent again at once, wherever there is room: no failure."""


class RequestTimeout(RetryableError):
    """The server did not answer (or stopped answering) in time."""


class Overloaded(RetryableError):
    """429 or 503: the server asks us to slow down."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kw) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class ServerFault(RetryableError):
    """500, 502, 504 or 408: a server-side failure that may pass."""


class EngineAborted(ServerFault):
    """An answer sent with HTTP 200 that the engine cut short (finish_reason "abort", or
    vLLM's "error"): retried like a server fault, never stored as finished."""


class PermanentError(ServerError):
    """Will fail the same way anywhere: a 400-class answer or an unusable response body."""


class PromptRejected(PermanentError):
    """A server error (HTTP 500) that one prompt causes and retrying cannot mend:
    llama-cpp-python answers a request its schema refuses (a role it does not know) or its
    chat template raises on with 500, as it does for a real fault. One prompt's error
    record, never a strike against the server that said it."""


class ServerRefused(ServerError):
    """The server answers, but not as an inference API would, whatever the prompt: 401, 403,
    404, 405, 407, or a 2xx body that is not JSON (a login page, a proxy). The dispatcher
    takes such a server out of rotation rather than blame the prompts."""


class FleetUnavailable(RegenError):
    """No server can serve: none answers at start, every one has been down for longer than
    --give-up-after, or every one refuses our requests (401, a login page)."""

    exit_code = 5


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """The one choice `word` was meant to be: the same but for case, else the closest
    spelling (for messages that name the fix), else None."""
    options = list(choices)
    same = [c for c in options if c.lower() == word.lower()]
    if len(same) == 1:
        return same[0]
    close = difflib.get_close_matches(word.lower(), [c.lower() for c in options], n=1)
    return next((c for c in options if close and c.lower() == close[0]), None)
