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


#: The largest values the engines take where a policy ends up: a LIMIT (Spark takes a 32-bit INT there), a timestamp
#: that many minutes before now (1000 years keeps it far inside every engine's range), a count of entries.
MAX_PRODUCERS = 2**31 - 1
MAX_MINUTES = 1000 * 365 * 24 * 60
MAX_ENTRIES = 2**63 - 1
#: The longest lease a producer may hold on its name (R14 across drivers): a driver that died keeps the name that long.
MAX_LEASE_SECONDS = 24 * 60 * 60


def _whole(minimum: int, maximum: int = MAX_ENTRIES) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text.strip())
        if value < minimum:
            raise ValueError(f"expected a whole number >= {minimum}")
        if value > maximum:
            raise OverflowError(f"{value} is above the largest value, {maximum}")
        return value

    return parse


def _or_unlimited(words: tuple[str, ...], minimum: int, maximum: int) -> Callable[[str], int | None]:
    """A whole number, or one of ``words`` for "no limit" (applied as None)."""
    whole = _whole(minimum, maximum)

    def parse(text: str) -> int | None:
        return None if text.strip().lower() in words else whole(text)

    return parse


#: What a statement keeps of the entries it drops (R16), least first.
DROPPED_ENTRIES = ("nothing", "counts", "keys", "rows")
#: What a statement does with an id that leaves a hole after its producer's mark (R17).
GAP_POLICIES = ("allow", "record", "refuse")
PAYLOAD_CONFLICTS = ("ignore", "record", "refuse")


def _one_of(words: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        word = text.strip().lower()
        if word not in words:
            raise ValueError(f"expected one of {', '.join(words)}")
        return word

    return parse


@dataclass(frozen=True)
class PolicyDefinition:
    name: str
    parse: Callable[[str], object]   # text as stored -> applied value; ValueError on a bad value, OverflowError on
                                     # one too large for the engines (set: refused; stored by an older seqdedup:
                                     # read as ``unlimited``, which is what such a value meant)
    help: str                        # what a valid value looks like, for error messages
    unlimited: object = None         # the applied value of a stored value above the maximum
    none: str = "none"               # how an applied None is spelled (no cap, never expire)


DEFINITIONS = {
    d.name: d
    for d in (
        PolicyDefinition("deduplication_enabled", _boolean, "true or false"),
        PolicyDefinition("snapshot_interval_entries", _whole(1),
                         f"a whole number of entries from 1 to {MAX_ENTRIES}", unlimited=MAX_ENTRIES),
        PolicyDefinition("snapshot_interval_seconds", _whole(0),
                         f"a whole number of seconds from 0 to {MAX_ENTRIES} (0 turns time-based snapshots off)",
                         unlimited=0),
        PolicyDefinition("producer_inactivity_timeout", _or_unlimited(("never",), 1, MAX_MINUTES),
                         f"a whole number of minutes from 1 to {MAX_MINUTES} (1000 years), or never for producers "
                         "that never expire", none="never"),
        PolicyDefinition("max_producers_in_snapshot", _or_unlimited(("none", "0", "unlimited"), 1, MAX_PRODUCERS),
                         f"a whole number from 1 to {MAX_PRODUCERS}, or none for no cap"),
        PolicyDefinition("full_snapshot_interval", _whole(1),
                         f"a whole number of snapshots from 1 to {MAX_ENTRIES} (1: every snapshot is full)",
                         unlimited=MAX_ENTRIES),
        PolicyDefinition("snapshot_retention_minutes", _whole(0, MAX_MINUTES),
                         f"a whole number of minutes from 0 to {MAX_MINUTES} (0: remove snapshots as soon as "
                         "recovery no longer needs them)", unlimited=MAX_MINUTES),
        PolicyDefinition("run_log_retention_minutes", _or_unlimited(("never",), 1, MAX_MINUTES),
                         f"a whole number of minutes from 1 to {MAX_MINUTES}, or never to keep the run log for ever",
                         none="never"),
        PolicyDefinition("compact_every_commits", _or_unlimited(("never",), 1, MAX_ENTRIES),
                         f"a whole number of commits from 1 to {MAX_ENTRIES}, or never to compact only on demand "
                         "(seqdedup compact TOPIC)", none="never"),
        PolicyDefinition("dropped_entries", _one_of(DROPPED_ENTRIES),
                         "nothing, counts (the run log's per-producer counts), keys (also a ledger row per dropped "
                         "entry, with its reason) or rows (the ledger rows with the entry's values)"),
        PolicyDefinition("dropped_retention_minutes", _or_unlimited(("never",), 1, MAX_MINUTES),
                         f"a whole number of minutes from 1 to {MAX_MINUTES}, or never to keep the ledger of dropped "
                         "entries for ever", none="never"),
        PolicyDefinition("gap_policy", _one_of(GAP_POLICIES),
                         "allow (any id above the mark, as Pulsar), record (each hole in seqdedup_gaps) or refuse "
                         "(a statement that leaves a hole writes nothing, as Kafka and Fluss)"),
        PolicyDefinition("payload_conflicts", _one_of(PAYLOAD_CONFLICTS),
                         "ignore (ids only, as Pulsar), record (a dropped entry whose id the topic holds with another "
                         "payload is a conflict in the ledger and the counts) or refuse (a statement that drops one "
                         "writes nothing)"),
        PolicyDefinition("conflict_window_minutes", _or_unlimited(("never",), 1, MAX_MINUTES),
                         f"a whole number of minutes from 1 to {MAX_MINUTES} (entries published longer ago are not "
                         "compared), or never for no bound", none="never"),
        PolicyDefinition("key_window_entries", _or_unlimited(("none",), 1, MAX_ENTRIES),
                         f"a whole number of entries from 1 to {MAX_ENTRIES} (a key of is_new leaves the window once "
                         "this many entries were written after it), or none for a window in time only "
                         "(producer_inactivity_timeout)"),
        # at least 3: its holder renews it every third of it, with two metastore calls (about 0.3 s)
        PolicyDefinition("producer_lease_seconds", _whole(3, MAX_LEASE_SECONDS),
                         f"a whole number of seconds from 3 to {MAX_LEASE_SECONDS} (a day)"),
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
        if name == "id_parts":
            raise PolicyError("id_parts is no policy: a topic's id shape (R19) is fixed when it is created "
                              "(create_topic(..., id_parts=2), CREATE TABLE ... TBLPROPERTIES "
                              "('seqdedup.id_parts' = '2'), or a dbt model's seqdedup_id_parts=2); to change it, "
                              "create a new topic and copy the entries")
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
    except (ValueError, OverflowError) as error:
        raise PolicyError(f"bad value {text!r} for policy {name}: {error}; give {DEFINITIONS[name].help}") from None
    return name, text


def resolve(settings: dict[str, dict[str, str | None]], topic: str | None = None) -> Policies:
    """The applied policies from the settings of each scope (``{"topic": {...}, "namespace": {...}, "global": {...}}``)
    of ``topic`` (its ``namespace.name``, for errors).

    Example:
        >>> resolve({"topic": {}, "namespace": {"deduplication_enabled": "false"},
        ...          "global": {"deduplication_enabled": "true"}}).deduplication_enabled
        False

    A value too large for the engines, stored before seqdedup refused them, applies as the policy's "no limit"
    (``never`` for the inactivity timeout): what it meant, and what keeps the topic usable.

        >>> resolve({"topic": {"producer_inactivity_timeout": "99999999999"}}).producer_inactivity_timeout is None
        True

    A value no seqdedup writes (a policy row written by hand) is a PolicyError that names the row and the command
    that sets it right; only the value that applies is read, so setting the policy at a narrower scope works too.

        >>> resolve({"global": {"snapshot_interval_entries": "abc"}}, "main.events")
        Traceback (most recent call last):
        ...
        seqdedup.errors.PolicyError: the global policy snapshot_interval_entries = 'abc' (a row of seqdedup_policies: \
scope 'global', target '', key 'snapshot_interval_entries') is not a value seqdedup can read: give a whole number \
of entries from 1 to 9223372036854775807. Nothing was written; set it right with \
`seqdedup sql "SET seqdedup.snapshot_interval_entries = VALUE"` (session.set_global_policy(...)), or set the policy \
on topic main.events alone with `seqdedup topic alter main.events -p snapshot_interval_entries=VALUE`
        >>> resolve({"topic": {"snapshot_interval_entries": "5"}, "global": {"snapshot_interval_entries": "abc"}},
        ...         "main.events").snapshot_interval_entries
        5
    """
    applied = Policies()
    for name, definition in DEFINITIONS.items():
        for scope in SCOPES:
            text = settings.get(scope, {}).get(name)
            if text is not None:
                try:
                    value = definition.parse(text)
                except OverflowError:
                    value = definition.unlimited
                except ValueError:
                    raise unreadable(scope, name, text, topic) from None
                setattr(applied, name, value)
                break
    return applied


def unreadable(scope: str, name: str, text: str, topic: str | None = None) -> PolicyError:
    """The error for the value ``text`` of the policy ``name`` set at ``scope`` (of ``topic``, ``namespace.name``)
    that does not parse: the row it is in, and the commands that set it right."""
    definition = DEFINITIONS[name]
    namespace = topic.rsplit(".", 1)[0] if topic else "NAMESPACE"
    target = {"topic": topic or "TOPIC", "namespace": namespace, "global": ""}[scope]
    alter = f"`seqdedup topic alter {topic or 'TOPIC'} -p {name}=VALUE`"
    fixes = {
        "topic": f"{alter} (an empty VALUE unsets it)",
        "namespace": f"`seqdedup sql \"ALTER DATABASE {namespace} SET DBPROPERTIES ('{PROPERTY_PREFIX}{name}' = "
                     f"'VALUE')\"` (session.set_namespace_policy(...)), or set the policy on topic {topic or 'TOPIC'} "
                     f"alone with {alter}",
        "global": f"`seqdedup sql \"SET {PROPERTY_PREFIX}{name} = VALUE\"` (session.set_global_policy(...)), or set "
                  f"the policy on topic {topic or 'TOPIC'} alone with {alter}",
    }
    return PolicyError(f"the {scope} policy {name} = {text!r} (a row of seqdedup_policies: scope {scope!r}, target "
                       f"{target!r}, key {name!r}) is not a value seqdedup can read: give {definition.help}. Nothing "
                       f"was written; set it right with {fixes[scope]}")


def spelled(name: str, value: object) -> str:
    """An applied value as a user writes it.

    Example:
        >>> spelled("producer_inactivity_timeout", None), spelled("max_producers_in_snapshot", 5)
        ('never', '5')
    """
    return DEFINITIONS[name].none if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def history(rows) -> list[Policies]:
    """The policies that applied after each change of a setting, from ``rows`` (scope, key, value) of the settings
    that apply to one topic in the order they were made, oldest first, the defaults first (recovery checks a snapshot
    against what the policies could have made it). A value that cannot be read never applied, and is left out."""
    settings: dict[str, dict[str, str]] = {scope: {} for scope in SCOPES}
    applied = [resolve(settings)]
    for scope, key, value in rows:
        if key not in DEFINITIONS:
            continue
        try:
            if value is not None:
                resolve({scope: {key: value}})
        except PolicyError:
            continue
        if value is None:
            settings[scope].pop(key, None)
        else:
            settings[scope][key] = value
        applied.append(resolve(settings))
    return applied


def check_change(rows, scope: str, target: str, values: dict[str, str | None],
                 topics: list[tuple[str, str]]) -> None:
    """Refuse a change of the settings at ``scope``/``target`` after which a topic it applies to would read a value
    that cannot be read (a row written by hand that the change leaves in force): a PolicyError naming that row.
    ``rows``: every setting (scope, target, key, value, version); ``topics``: (key, namespace) of each topic."""
    newest: dict[tuple[str, str, str], tuple[int, str | None]] = {}
    for row_scope, row_target, key, value, version in rows:
        version = -1 if version is None else version
        if (row_scope, row_target, key) not in newest or version > newest[row_scope, row_target, key][0]:
            newest[row_scope, row_target, key] = (version, value)
    for key, value in values.items():
        newest[scope, target, key] = (0, value)
    for topic, namespace in topics:
        targets = {"topic": topic, "namespace": namespace, "global": ""}
        if targets[scope] != target:
            continue
        settings: dict[str, dict[str, str]] = {s: {} for s in SCOPES}
        for (row_scope, row_target, key), (_, value) in newest.items():
            if targets.get(row_scope) == row_target and value is not None:
                settings[row_scope][key] = value
        resolve(settings, topic)
