"""Creating a topic (``Session.create_topic``, ``CREATE TABLE``): its table, its first commit and its registry row,
where another driver on the same metastore may be creating it at the same moment.

The table comes first, then the first commit (its policies, its first snapshot), then the registry row: a crash
before the end leaves an unregistered table that the next create takes over. A create that meets another driver's
table waits for that driver's registry row (at most ``wait`` seconds: a driver that died before registering it
never writes one), then tries again.
"""
from __future__ import annotations

import time
from typing import Iterable

import sqlglot
from sqlglot import exp

from seqdedup.catalog import ids, policies as policy
from seqdedup.catalog.catalog import Creation, Topic, TopicRef
from seqdedup.errors import CommitConflict, EngineError, TopicError, already_exists

from ..failpoints import failpoint
from .broker import Broker
from .topic_state import created


def create_topic(broker: Broker, ref: TopicRef, columns: dict[str, str] | Iterable[tuple[str, str]], *,
                 if_not_exists: bool, policies: dict[str, object], wait: float, id_parts: int | None = None) -> Topic:
    """Create the topic ``ref`` with the user's columns (name -> Spark SQL type) and topic-level policies; ``wait``:
    the seconds to wait for the registry row of a table another driver created first (see
    ``Session.create_topic``); ``id_parts``: the parts of its composite ids (R19; None: integer ids)."""
    id_parts = ids.check_parts(id_parts)
    if "." in ref.namespace:    # its key, namespace.name, would be that of a topic with a dot in its name
        raise TopicError(f"namespace {ref.namespace!r} has a dot: topic {ref.key} could not be told apart from "
                         f"topic {ref.key.split('.', 1)[0]!r}.{ref.key.split('.', 1)[1]!r} in the catalog; use "
                         "a namespace name without dots (a topic's own name may have them)")
    types = {}
    for column, kind in dict(columns).items():
        try:
            # parsed whole: DataType.build would read "STRING, y INT" as STRING and drop the rest silently
            types[column] = kind if isinstance(kind, exp.DataType) else sqlglot.parse_one(
                kind, into=exp.DataType, read="spark")
        except (sqlglot.errors.SqlglotError, ValueError):
            raise TopicError(f"column {column!r} has an unknown type {kind!r}; use a Spark SQL type such as "
                             "STRING, BIGINT, DOUBLE, TIMESTAMP") from None
    for key, value in policies.items():
        policy.normalize(key, value)         # a bad policy is refused before anything is created
    adapter, catalog, writer = broker.adapter, broker.catalog, broker.writer
    with writer:
        for tries in range(3):
            broker.refresh_topics()       # (stale commit numbers are a conflict, retried below)
            creation = catalog.creation(ref)
            if creation.registered:
                if if_not_exists:
                    return broker.topic(ref)
                raise TopicError(f"topic {ref.key} already exists; use it, drop it first (seqdedup topic drop), "
                                 "or create it with if_not_exists=True (CREATE TABLE IF NOT EXISTS), which "
                                 "changes nothing")
            if ref.namespace.lower() == adapter.DEFAULT_NAMESPACE.lower() and adapter.has_temp_table(ref.name):
                raise TopicError(f"{ref.name!r} names a DataFrame or temporary view of this session, which every "
                                 "query of the session would read instead of the topic; drop it first "
                                 f"(session.unregister({ref.name!r})) or name the topic otherwise")
            try:
                settings, first = _create(broker, ref, types, policies, creation, id_parts)
                topic = catalog.described(ref, settings, id_parts)      # (its settings not read a second time)
                if first is not None:       # its first statement needs no recovery
                    writer.keep(ref, created(topic, **first))
                return topic
            except (EngineError, TopicError) as error:
                if tries == 2:
                    raise
                if isinstance(error, CommitConflict) or already_exists(error):
                    # another driver on the same metastore is creating it: its registry row follows its commit
                    _wait_for_topic(broker, ref, seconds=wait)
                # or another driver created it, and wrote to it, after this one read the registry (its table is
                # no longer empty): then the next try finds it registered
                elif not (isinstance(error, TopicError) and _registered_now(broker, ref)):
                    raise


def _create(broker: Broker, ref: TopicRef, types: dict[str, exp.DataType], policies: dict[str, object],
            creation: Creation, id_parts: int | None) -> tuple[dict[str, dict[str, str]], dict | None]:
    """The table, the first commit and the registry row, from what ``creation`` read; returns the topic's policy
    settings, and what its state is made of (``topic_state.created``) when the table is new (None: one taken
    over, recovered)."""
    writer, catalog = broker.writer, broker.catalog
    now = broker.clock()
    try:
        with broker.adapter.transaction():
            new = catalog.create_table(ref, types, id_parts)
            failpoint("after_topic_table")
            with writer.commit(ref, catalog.next_commit(ref, creation.written)) as commit:
                catalog.set_policies("topic", ref.key, policies, now, base=creation.version)
                settings = creation.settings_with(policies)
                kind = "enabled" if policy.resolve(settings).deduplication_enabled else "disabled"
                snapshot_id = catalog.write_snapshot(ref, None, header=None, position=0, kind=kind, now=now,
                                                     commit=commit.number, first=creation.snapshot_id)
                failpoint("after_snapshot_rows")
            catalog.register(ref, now, id_parts)
    finally:
        writer.forget(ref)
    first = dict(commit=commit.number, snapshot_id=snapshot_id, kind=kind, taken_at=now,
                 tracks_commits=broker.adapter.TRACKS_COMMITS)
    return settings, first if new else None


def _wait_for_topic(broker: Broker, ref: TopicRef, seconds: float) -> None:
    """Wait until ``ref`` is in the registry, at most ``seconds`` (then the next try takes the table over)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _registered_now(broker, ref):
            return
        time.sleep(min(0.5, seconds))


def _registered_now(broker: Broker, ref: TopicRef) -> bool:
    """Whether ``ref`` is in the registry as the drivers that share the metastore left it."""
    broker.refresh_topics()
    return ref.key in broker.topics()


__all__ = ["create_topic"]
