"""Deduplication policies and their precedence (rule R9): topic setting, then namespace, then global, then default."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Callable

from seqdedup.errors import PolicyError
from seqdedup.udfs import Policies

#: Scopes, narrowest first: a setting in an earlier scope wins.
SCOPES = ("topic", "namespace", "global")

#: Prefix of policy keys in TBLPROPERTIES, DBPROPERTIES and SET statements.
PROPERTY_PREFIX = "seqdedup."


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "on", "yes", "enabled"):
        return True
    if lowered in ("false", "0", "off", "no", "disabled"):
        return False
    raise ValueError("expected true or false")


def _whole(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text.strip())
        if value < minimum:
            raise ValueError(f"expected a whole number >= {minimum}")
        return value

    return parse


def _cap(text: str) -> int | None:
    if text.strip().lower() in ("none", "0", "unlimited"):
        return None
    return _whole(1)(text)


@dataclass(frozen=True)
class PolicyDefinition:
    name: str
    parse: Callable[[str], object]   # text as stored -> applied value; raises ValueError on a bad value
    help: str                        # what a valid value looks like, for error messages


DEFINITIONS = {
    d.name: d
    for d in (
        PolicyDefinition("deduplication_enabled", _boolean, "true or false"),
        PolicyDefinition("snapshot_interval_entries", _whole(1), "a whole number of entries >= 1"),
        PolicyDefinition("snapshot_interval_seconds", _whole(0), "a whole number of seconds >= 0 (0 turns time-based snapshots off)"),
        PolicyDefinition("producer_inactivity_timeout", _whole(1), "a whole number of minutes >= 1"),
        PolicyDefinition("max_producers_in_snapshot", _cap, "a whole number >= 1, or none for no cap"),
    )
}
assert set(DEFINITIONS) == {f.name for f in fields(Policies)}, "every applied policy has a definition"


def policy_key(key: str) -> str:
    """The policy name of a property key, with or without the ``seqdedup.`` prefix; raises on an unknown key.

    Example:
        >>> policy_key("seqdedup.snapshot_interval_entries")
        'snapshot_interval_entries'
    """
    name = key[len(PROPERTY_PREFIX):] if key.lower().startswith(PROPERTY_PREFIX) else key
    name = name.lower()
    if name not in DEFINITIONS:
        raise PolicyError(f"unknown policy {key!r}; the policies are: {', '.join(DEFINITIONS)}")
    return name


def normalize(key: str, value: object) -> tuple[str, str | None]:
    """(policy name, value as stored) for a setting; ``None`` unsets. Raises PolicyError on a bad value."""
    name = policy_key(key)
    if value is None:
        return name, None
    text = str(value).lower() if isinstance(value, bool) else str(value)
    try:
        DEFINITIONS[name].parse(text)
    except ValueError as error:
        raise PolicyError(f"bad value {text!r} for policy {name}: {error}; give {DEFINITIONS[name].help}") from None
    return name, text


def resolve(settings: dict[str, dict[str, str | None]]) -> Policies:
    """The applied policies from the settings of each scope (``{"topic": {...}, "namespace": {...}, "global": {...}}``).

    Example:
        >>> resolve({"topic": {}, "namespace": {"deduplication_enabled": "false"},
        ...          "global": {"deduplication_enabled": "true"}}).deduplication_enabled
        False
    """
    applied = Policies()
    for name, definition in DEFINITIONS.items():
        for scope in SCOPES:
            text = settings.get(scope, {}).get(name)
            if text is not None:
                setattr(applied, name, definition.parse(text))
                break
    return applied
