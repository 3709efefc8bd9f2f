"""The sessions a run's manifest records, read: each server's last live level, a bucket's
copy merged with ours, the command that resumes the run, and what `regen status` shows.
"""

from __future__ import annotations

import shlex
from typing import Any

import orjson


def last_levels(manifest: dict[str, Any]) -> dict[str, int]:
    """Each server's live level (by URL) at the end of the latest earlier session that
    recorded its end; fixed levels are the user's, not found, and are left out."""
    for session in reversed(manifest.get("sessions", [])[:-1]):
        if servers := (session.get("ended") or {}).get("servers"):
            return {
                s["url"]: s["concurrency"]
                for s in servers
                if s.get("concurrency_why") != "fixed" and isinstance(s.get("concurrency"), int)
            }
    return {}


def with_sessions_of(ours: dict[str, Any], theirs: dict[str, Any] | None) -> dict[str, Any]:
    """`ours` with the sessions that `theirs` (the copy in a bucket, which another part of
    the run may have written since we read it) has and ours lacks, in the order they began.
    A session both have is ours, unless only theirs has what it added at its end."""
    mine = {session_key(s): s for s in ours.get("sessions", [])}
    merged = dict(mine)
    for session in (theirs or {}).get("sessions", []):
        key = session_key(session)
        if key not in mine or ("ended" in session and "ended" not in mine[key]):
            merged[key] = session
    if merged == mine:
        return ours
    sessions = sorted(merged.values(), key=lambda s: str(s.get("started")))
    return {**ours, "sessions": sessions}


def session_key(session: dict[str, Any]) -> str:
    """A session's identity: its id (older manifests: all it says, field for field)."""
    if "id" in session:
        return str(session["id"])
    return orjson.dumps(session, option=orjson.OPT_SORT_KEYS).decode()


def manifest_summary(manifest: dict[str, Any]) -> dict[str, Any]:
    """What `regen status` shows of a run's manifest (a local one or a bucket's)."""
    keep = {key: manifest[key] for key in ("created", "config", "input")}
    return {
        **keep,
        "sessions": len(manifest["sessions"]),
        "resume": resume_command(manifest),
        "resume_whole": resume_command(manifest, whole=True),
    }


def resume_command(manifest: dict[str, Any], whole: bool = False) -> str | None:
    """The command line of the last session started from the CLI, run where it ran; with
    `whole`, less its `--limit N` (what goes on after a trial that did its N)."""
    typed = [s for s in manifest.get("sessions", []) if s.get("command")]
    if not typed:
        return None
    command = typed[-1]["command"]
    command = _without_limit(command) if whole else command
    return f"cd {shlex.quote(typed[-1]['cwd'])} && {shlex.join(command)}"


def _without_limit(command: list[str]) -> list[str]:
    at = command.index("--limit") if "--limit" in command else None
    words = command if at is None else command[:at] + command[at + 2 :]
    return [word for word in words if not word.startswith("--limit=")]
