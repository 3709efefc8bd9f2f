"""Whether a run a verb reads is whole, and where its unreadable lines are: what a report
must say before its figures, since a figure over half a run reads like one over all of it.

`not_finished`: a run still running, with items left, or with --shard parts never started
(from the same count `regen status` prints). `lines_not_json`: the shard and line of each line
that is not JSON (a torn write in the middle of a shard, an edit); a second pass, taken only
when the first (which hands unparsed lines to workers, so cannot say where each came from)
counted some.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from regen.finished.read import open_run
from regen.run.status import read_status
from regen.storage import open_store

NOT_JSON = "bad_json"
FIRST = 20  # lines named in a report; the count says how many more


def not_finished(output_dir: str | Path) -> dict[str, Any] | None:
    """What is missing from the run, or None when it is finished (or has no manifest of
    `regen generate`'s: a folder of completions alone says nothing about what was asked)."""
    manifest = open_store(output_dir).read_manifest()
    if not isinstance(manifest, dict) or "config" not in manifest:
        return None
    info = read_status(output_dir)
    count = info["count"]
    missing = (info.get("shards") or {}).get("not_started") or []
    running = bool(info["alive"]["alive"])
    if not (count["left"] or missing or running):
        return None
    done = count["completions"] + count["errors"]
    items = done + count["left"]
    parts = f"; --shard {', '.join(missing)} never ran" if missing else ""
    state = "still running" if running else "NOT FINISHED"
    return {
        "run": info["output_dir"],
        "running": running,
        "done": done,
        "items": items,
        "left": count["left"],
        "not_started": missing,
        "message": f"{info['output_dir']} is {state}: {done} of {items} items done "
        f"({count['left']} left{parts}); these figures judge only what is there",
        "fix": "finish the run (`regen status` says how), then check it again",
    }


def lines_not_json(output_dirs: Iterable[str | Path], first: int = FIRST) -> list[dict]:
    """The shard and line number of the first `first` lines that are not JSON."""
    found: list[dict] = []
    for output_dir in output_dirs:
        for shard, number, line in open_run(output_dir).iter_numbered_lines("completions"):
            try:
                orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                found.append({"file": shard, "line": number, "error": f"not JSON: {exc}"})
                if len(found) >= first:
                    return found
    return found
