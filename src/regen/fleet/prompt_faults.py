"""Tell a prompt the engine cannot take from a server at fault, when both answer HTTP 500.

An engine may answer 500 for a request it will never serve (a chat template that raises on
this conversation, a tokenizer that chokes on its text) in the words of any crash. One such
500 says nothing, and neither do two: a server that fails one request in three fails some
prompt twice in a row by chance. The prompt is blamed only when its request got the same
answer three times, and each server that gave it went on answering other prompts with no
other failure in between: the answer follows the prompt, not the server. The request then
ends as one PromptRejected error record instead of a server fault retried to the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from regen.errors import EngineAborted, PromptRejected, RetryableError, ServerFault

if TYPE_CHECKING:
    from regen.fleet.server import Server

EARLIER = 2  # the same answer this often before, each one clean, and this one blames the prompt


@dataclass(frozen=True)
class _Fault:
    server: Server
    message: str
    answered: int  # the server's answers and failures before this fault was counted
    failed: int


class RepeatedFaults:
    """The server faults of one request, in order."""

    def __init__(self) -> None:
        self._faults: list[_Fault] = []

    def rejected(self, server: Server, error: RetryableError) -> PromptRejected | None:
        """The error that ends the request as the prompt's, or None (a fault, as before).
        Asked before the dispatcher counts `error` against `server`."""
        if not isinstance(error, ServerFault) or isinstance(error, EngineAborted):
            return None
        same = [i for i, f in enumerate(self._faults) if f.message == error.message]
        blamed = len(same) >= EARLIER and all(self._clean(i) for i in same)
        self._faults.append(_Fault(server, error.message, server.answered, server.stats.failed))
        if not blamed:
            return None
        rejected = PromptRejected(
            f"{error.message} (the same answer {len(same) + 1} times, while the server(s) "
            "answered other prompts: this prompt is what fails, not the server)",
            server=error.server,
            status=error.status,
            hint="the engine cannot serve this prompt; its server log says why",
        )
        rejected.after_tokens = error.after_tokens
        return rejected

    def _clean(self, index: int) -> bool:
        """Since fault `index`, its server answered other prompts and failed nothing but
        this request's own attempts (each counted after it was seen here)."""
        fault = self._faults[index]
        ours = sum(f.server is fault.server for f in self._faults[index:])
        answered = fault.server.answered > fault.answered
        return answered and fault.server.stats.failed - fault.failed == ours
