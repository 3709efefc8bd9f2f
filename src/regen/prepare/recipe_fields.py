"""The recipe's field checks: each error names the field and shows a valid value."""

from __future__ import annotations

import difflib
from typing import Any

from regen.chat import ROLES
from regen.errors import ConfigError


def check_keys(raw: dict, allowed: tuple[str, ...], where: str) -> None:
    for key in raw:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"allowed: {', '.join(allowed)}"
            raise ConfigError(f"{where}: unknown field {key!r}", hint=hint)


def check_unique(names: list[str]) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise ConfigError(
                f"two sources are named {name!r}", hint="give each source a distinct 'name'"
            )
        seen.add(name)


def opt_str(raw: dict, key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)  # config: 0625 comes out of YAML as a number
    if not isinstance(value, str):
        raise ConfigError(f"{where}.{key}: expected text, got {value!r}", hint=f"{key}: '...'")
    return value


def opt_int(raw: dict, key: str, where: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(
            f"{where}.{key}: expected a whole number, got {value!r}", hint=f"{key}: 1000"
        )
    return value


def rate(raw: dict, key: str, default: float | None) -> float | None:
    if key not in raw:
        return default
    value = raw[key]
    if value is None:
        return None
    if not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigError(
            f"recipe.{key}: expected a fraction between 0 and 1, got {value!r}",
            hint=f"{key}: 0.2 (or null to turn the warning off)",
        )
    return float(value)


def role_map(raw: Any, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{where}: expected a mapping of label: role", hint="role_map: {bot: assistant}"
        )
    return checked_roles({str(k).strip().lower(): str(v) for k, v in raw.items()}, where)


def checked_roles(mapping: dict[str, str], where: str) -> dict[str, str]:
    for label, role in mapping.items():
        if role not in ROLES:
            raise ConfigError(
                f"{where}: {label!r} maps to {role!r}, which is not a role",
                hint=f"map it to one of {', '.join(ROLES)}",
            )
    return mapping


def parse_role_map_flags(items: tuple[str, ...]) -> dict[str, str]:
    """`--role-map bot=assistant` flags as a mapping."""
    out = {}
    for item in items:
        label, sep, role = item.partition("=")
        if not sep or not label.strip() or not role.strip():
            raise ConfigError(
                f"--role-map {item!r}: expected LABEL=ROLE", hint="--role-map bot=assistant"
            )
        out[label.strip().lower()] = role.strip()
    return checked_roles(out, "--role-map")
