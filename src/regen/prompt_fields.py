"""The top-level fields of a prompt line beside its turns: which ones generate reads, and
what it does with the spellings people and datasets use for them.

- `system` (ShareGPT's column, or written beside `messages`) becomes the first message. A
  record that also has a system message of its own is refused unless the two say the same:
  regen cannot know which of two system prompts the user meant, and sending either one
  silently would change the answers.
- `category` is read as `meta.category` (the dataset's own label, as `prepare` keeps it).
- `prompt`, in a record without turns, is the prompt: a string is one user turn (the
  completions API's and many datasets' single-prompt shape, which a user expects to work as
  it is), a list the turns (TRL's prompt-only conversational shape). Other single-prompt
  columns (`instruction` with `input`, `question`, `query`) need a choice of how to join
  them, which `regen prepare` makes and reports: the error for such a line says so.
- A sampling field written at the top (`"temperature": 0.2` beside the turns) is read as
  that line's `sampling`: the user meant it for that line, and a note in the log while the
  line is sampled at the run's default would be a silent drop. One that `sampling` also
  sets to another value is refused, as two system prompts are.
- Any other field is not read; the run says so once (`ignored_note`), with where the field
  belongs, rather than dropping it without a word.
"""

from __future__ import annotations

from typing import Any

from regen.errors import InputError

READ = frozenset(
    {
        "id",
        "messages",
        "conversations",
        "prompt",
        "system",
        "tools",
        "sampling",
        "source",
        "meta",
        "category",
        "samples",
        "model",
    }
)
SAMPLING_SPELLINGS = frozenset({"temperature", "top_p", "top_k", "max_tokens", "seed", "thinking"})
# The single-prompt columns `regen prepare --source` recognises without --format.
PLAIN_PROMPT_KEYS = ("instruction", "query", "question", "prompt")
SYSTEM_ROLES = ("system", "developer")


def with_system(system: Any, messages: list[dict]) -> list[dict]:
    """`messages` with the record's top-level `system` as its first message."""
    if system is None or (isinstance(system, str) and not system.strip()):
        return messages
    if not isinstance(system, str):
        raise InputError(
            f"'system' must be a string, got {type(system).__name__}", kind="bad_system"
        )
    own = [m for m in messages if m["role"] in SYSTEM_ROLES]
    if not own:
        return [{"role": "system", "content": system}, *messages]
    if all(m["content"] == system for m in own):
        return messages  # the same prompt written twice: sent once
    raise InputError(
        "the record has a top-level 'system' and a different system message in its turns",
        kind="conflicting_system",
        hint="keep one: drop the 'system' field, or the system message from the turns",
    )


def sampling_of(record: dict[str, Any]) -> Any:
    """The record's `sampling` with its top-level sampling fields read into it (checked,
    like the rest of `sampling`, by the reader)."""
    top = {key: record[key] for key in SAMPLING_SPELLINGS if key in record}
    own = record.get("sampling")
    if not top or not isinstance(own, dict | None):
        return own  # nothing to add; or a `sampling` that is not an object, refused as such
    own = own or {}
    clash = sorted(k for k in top if k in own and own[k] != top[k])
    if clash:
        raise InputError(
            f"top-level {clash[0]!r} and sampling.{clash[0]} differ",
            kind="bad_sampling",
            hint=f"keep one: drop the top-level {clash[0]!r}, or the one under 'sampling'",
        )
    return {**top, **own}


def with_category(record: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """`meta` with a top-level `category` read into it (meta's own label wins)."""
    label = record.get("category")
    if label is None or "category" in meta or not isinstance(label, str | int):
        return meta
    return {**meta, "category": str(label)}


def turns_of(record: dict[str, Any]) -> Any:
    """The record's turns, unchecked: `messages`, else `conversations`, else a plain `prompt`
    (a string: one user turn); None when it has none of them."""
    turns = record.get("messages", record.get("conversations"))
    if turns is None and isinstance(record.get("prompt"), str):
        return [{"role": "user", "content": record["prompt"]}]
    return turns if turns is not None else record.get("prompt")


def no_turns_hint(record: dict[str, Any]) -> str:
    """The fix for a record without turns: a plain prompt field is what prepare converts."""
    plain = next((k for k in PLAIN_PROMPT_KEYS if isinstance(record.get(k), str)), None)
    if plain is not None:
        return (
            f"its '{plain}' is a plain prompt: convert the file with `regen prepare --source "
            "FILE -o prompts.jsonl`, which turns it into messages"
        )
    return "give it 'messages' (role/content), 'conversations' (from/value) or 'prompt' (text)"


def ignored_fields(record: dict[str, Any]) -> tuple[str, ...]:
    """The record's top-level fields that generate does not read."""
    return tuple(sorted(k for k in record if k not in READ and k not in SAMPLING_SPELLINGS))


def ignored_note(line: int, fields: tuple[str, ...]) -> str:
    """What the run says, once, about fields it does not read, and where each belongs."""
    names = ", ".join(f"'{f}'" for f in fields)
    where = 'labels to keep belong under "meta" ("category" is read as meta.category)'
    return (
        f"line {line}: top-level field(s) {names} are not read (generate reads id, messages, "
        "conversations or prompt, system, tools, sampling and its fields, source, meta, "
        f"category); {where} (said once per field name)"
    )
