"""A seqdedup session: one engine connection, the catalog on it, and what users do through it.

The session is the facade: names, topics and policies, dispatch of SQL, and reads of the state. Its work runs on its
``Broker`` (``seqdedup.core.broker``: the adapter, the catalog, the writer and the clock). Writes go through the
broker's ``Writer`` (``seqdedup.core.writer``): the lock, the claims of the statement in flight, commits, and the
topics' states in memory. A statement with ``is_not_dup`` runs in ``seqdedup.core.statement``, and snapshots are
taken in ``seqdedup.core.snapshots``.
"""
from __future__ import annotations

import datetime as dt
import time
import warnings
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Iterable

import sqlglot
from sqlglot import exp

from seqdedup.catalog import policies as policy
from seqdedup.catalog.catalog import Creation, Topic, TopicRef
from seqdedup.catalog.schema import CATALOG_TABLES
from seqdedup.catalog.state import literal
from seqdedup.errors import (CommitConflict, EngineError, PolicyError, RewriteError, SeqdedupError,
                             SeqdedupWarning, TopicError, already_exists)
from seqdedup.extensions.base import EngineAdapter
from seqdedup.sql import rewrite, statements
from seqdedup.sql.dialects import read_dialect
from seqdedup.sql.functions import expand_state_functions
from seqdedup.sql.sources import to_duckdb_readers
from seqdedup.udfs import DupStatus
from seqdedup.udfs.guards import check_probe

from .clients.frames import register, registered
from .core import compaction, snapshots, statement
from .core.broker import Broker
from .core.foreign import find as find_foreign
from .core.results import Done, QueryResult, StatementResult
from .core.topic_state import TopicState, created
from .core.writer import PushedMarks
from .failpoints import failpoint

if TYPE_CHECKING:        # (for the annotations only: the session loads them on first use)
    from .clients.kafka import KafkaResult
    from .clients.producer import Producer


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


#: The policy whose turning off forgets a topic's marks (R10).
ENABLED = "deduplication_enabled"


def _applies(scope: str, target: str, ref: TopicRef) -> bool:
    """Whether a policy set at ``scope`` on ``target`` (a topic's namespace.name, a namespace, "" for global) is
    one of topic ``ref``'s (R9)."""
    return scope == "global" or (scope == "namespace" and ref.namespace == target) or \
        (scope == "topic" and ref.key == target)


def forgetting(forgotten: dict[str, int]) -> str:
    """The topics of ``Session.would_forget`` and what each would forget, in words.

    Example:
        >>> forgetting({"main.events": 3, "main.other": 0})
        "main.events (3 producers' marks), main.other (no marks yet)"
    """
    def said(count: int) -> str:
        return "no marks yet" if not count else "1 producer's mark" if count == 1 else f"{count} producers' marks"

    return ", ".join(f"{key} ({said(count)})" for key, count in forgotten.items())


class Session:
    """seqdedup on one engine. Create it with ``seqdedup.connect(...)``."""

    #: How long ``create_topic`` waits for the registry row of a topic whose table another driver created first; a
    #: driver that died before registering it never writes one, and then the next try takes the table over.
    TOPIC_WAIT_SECONDS = 30.0

    def __init__(self, adapter: EngineAdapter, *, clock: Callable[[], dt.datetime] = utcnow, dialect: str = "spark",
                 lock_timeout: float | None = 60.0):
        self.broker = Broker(adapter, clock, lock_timeout)
        self.dialect = dialect        # the dialect statements are read in unless sql() is told otherwise
        # the broker's parts, under the names the clients use (the same objects)
        self.adapter, self.clock, self.catalog = adapter, clock, self.broker.catalog
        self.committed, self.writer = self.broker.committed, self.broker.writer

    @property
    def pushed(self) -> PushedMarks:
        """R6: the claims of the statement in flight on this database, shared by its sessions."""
        return self.writer.pushed

    # --- names ---------------------------------------------------------------------------------------------------

    def ref(self, topic: str | exp.Table, namespace: str | None = None) -> TopicRef:
        return self.broker.ref(topic, namespace)

    def topic(self, topic: str | TopicRef, *, fresh: bool = False) -> Topic:
        """A registered topic, its columns and policies. ``fresh``: as other drivers left them, where they may write
        (Spark keeps a catalog table's file listing once read: a topic another driver created since, or a policy it
        set, would be unknown here), at the cost of a few metastore calls there."""
        return self.broker.topic(topic, fresh=fresh)

    def topics(self) -> list[str]:
        return self.broker.topics()

    # --- topics and policies (R9, R10) ---------------------------------------------------------------------------

    def create_topic(self, name: str, columns: dict[str, str] | Iterable[tuple[str, str]], *,
                     namespace: str | None = None, if_not_exists: bool = False, **policies: object) -> Topic:
        """Create a topic with the user's columns (name -> Spark SQL type) and topic-level policies.

        A topic that exists already is a TopicError, unless ``if_not_exists``: then nothing changes (its columns
        and policies stay as they are)."""
        ref = self.ref(name, namespace)
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
        with self.writer:
            for tries in range(3):
                self.broker.refresh_topics()       # (stale commit numbers are a conflict, retried below)
                creation = self.catalog.creation(ref)
                if creation.registered:
                    if if_not_exists:
                        return self.topic(ref)
                    raise TopicError(f"topic {ref.key} already exists; use it, drop it first (seqdedup topic drop), "
                                     "or create it with if_not_exists=True (CREATE TABLE IF NOT EXISTS), which "
                                     "changes nothing")
                if ref.namespace.lower() == self.adapter.DEFAULT_NAMESPACE.lower() and \
                        self.adapter.has_temp_table(ref.name):
                    raise TopicError(f"{ref.name!r} names a DataFrame or temporary view of this session, which every "
                                     "query of the session would read instead of the topic; drop it first "
                                     f"(session.unregister({ref.name!r})) or name the topic otherwise")
                try:
                    settings, first = self._create_topic(ref, types, policies, creation)
                    topic = self.catalog.described(ref, settings)      # (its settings not read a second time)
                    if first is not None:       # its first statement needs no recovery
                        self.writer.keep(ref, created(topic, **first))
                    return topic
                except (EngineError, TopicError) as error:
                    if tries == 2:
                        raise
                    if isinstance(error, CommitConflict) or already_exists(error):
                        # another driver on the same metastore is creating it: its registry row follows its commit
                        self._wait_for_topic(ref, seconds=self.TOPIC_WAIT_SECONDS)
                    # or another driver created it, and wrote to it, after this one read the registry (its table is
                    # no longer empty): then the next try finds it registered
                    elif not (isinstance(error, TopicError) and self._registered_now(ref)):
                        raise

    def _create_topic(self, ref: TopicRef, types: dict[str, exp.DataType], policies: dict[str, object],
                      creation: Creation) -> tuple[dict[str, dict[str, str]], dict | None]:
        """The table, the first commit and the registry row, from what ``creation`` read; returns the topic's policy
        settings, and what its state is made of (``topic_state.created``) when the table is new (None: one taken
        over, recovered)."""
        writer, catalog = self.writer, self.catalog
        now = self.clock()
        # Table, then the first commit (policies, first snapshot), then the registry row: a crash before the
        # end leaves an unregistered table that the next create takes over.
        try:
            with self.adapter.transaction():
                new = catalog.create_table(ref, types)
                failpoint("after_topic_table")
                with writer.commit(ref, catalog.next_commit(ref, creation.written)) as commit:
                    catalog.set_policies("topic", ref.key, policies, now, base=creation.version)
                    settings = creation.settings_with(policies)
                    kind = "enabled" if policy.resolve(settings).deduplication_enabled else "disabled"
                    snapshot_id = catalog.write_snapshot(ref, None, header=None, position=0, kind=kind, now=now,
                                                         commit=commit.number, first=creation.snapshot_id)
                    failpoint("after_snapshot_rows")
                catalog.register(ref, now)
        finally:
            writer.forget(ref)
        first = dict(commit=commit.number, snapshot_id=snapshot_id, kind=kind, taken_at=now,
                     tracks_commits=self.adapter.TRACKS_COMMITS)
        return settings, first if new else None

    def _wait_for_topic(self, ref: TopicRef, seconds: float) -> None:
        """Wait until ``ref`` is in the registry, at most ``seconds`` (then the next try takes the table over)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self._registered_now(ref):
                return
            time.sleep(min(0.5, seconds))

    def _registered_now(self, ref: TopicRef) -> bool:
        """Whether ``ref`` is in the registry as the drivers that share the metastore left it."""
        self.broker.refresh_topics()
        return ref.key in self.topics()

    def alter_topic(self, name: str, **policies: object) -> Topic:
        """Set topic policies; a value of ``None`` unsets one (then the namespace or global value applies). Turning
        deduplication off forgets the topic's marks (R10), with a SeqdedupWarning that says so."""
        ref = self.ref(name)
        self.topic(ref)
        self._set_policies("topic", ref.key, policies)
        return self.topic(ref)

    def set_namespace_policy(self, namespace: str, **policies: object) -> None:
        """Set policies for the topics of ``namespace`` (where a topic sets none of its own); ``None`` unsets one.
        Turning deduplication off forgets the marks of the topics it turns off (R10), with a SeqdedupWarning."""
        self._set_policies("namespace", namespace, policies)

    def set_global_policy(self, **policies: object) -> None:
        """Set policies for every topic (where its topic and namespace set none); ``None`` unsets one. Turning
        deduplication off forgets the marks of the topics it turns off (R10), with a SeqdedupWarning."""
        self._set_policies("global", "", policies)

    def would_forget(self, policies: dict[str, object], *, topic: str | None = None,
                     namespace: str | None = None) -> dict[str, int]:
        """R10 ahead of a policy change: the topics on which setting ``policies`` (on ``topic``, else on
        ``namespace``, else globally) would turn deduplication off, each with the number of producers whose marks
        that forgets. Nothing is changed. (``seqdedup topic alter`` asks for --yes when there are any.)"""
        if topic is not None:
            return self._forgetting("topic", self.ref(topic).key, policies)
        if namespace is not None:
            return self._forgetting("namespace", namespace, policies)
        return self._forgetting("global", "", policies)

    def _forgetting(self, scope: str, target: str, policies: dict[str, object]) -> dict[str, int]:
        """``would_forget`` for settings at ``scope`` on ``target``: topics whose deduplication is on now and
        would be off, each with its number of producers with a mark."""
        values = dict(policy.normalize(key, value) for key, value in policies.items())
        if ENABLED not in values:
            return {}
        forgotten = {}
        with self.writer:
            for ref in self.broker.reads().topics():
                if not _applies(scope, target, ref):
                    continue
                try:
                    state = self.state(ref)
                    if not state.enabled:
                        continue
                    # deduplication_enabled as set at each scope once these are set (another policy's unreadable
                    # row is not this change's to report)
                    settings = {at: {k: v for k, v in values_at.items() if k == ENABLED}
                                for at, values_at in self.topic(ref).settings.items()}
                    settings[scope] = {} if values[ENABLED] is None else {ENABLED: values[ENABLED]}
                    if not policy.resolve(settings).deduplication_enabled:
                        forgotten[ref.key] = state.marks.num_rows
                except PolicyError:      # the topic's policies cannot be read: its statements say so
                    continue
        return forgotten

    def _set_policies(self, scope: str, target: str, policies: dict[str, object]) -> None:
        """Record the settings, then, in a commit of each topic they apply to, make its state follow (R10); warn
        once where that turned deduplication off on topics, forgetting their marks."""
        writer, catalog = self.writer, self.catalog
        with writer:
            forgotten = self._forgetting(scope, target, policies)
            now = self.clock()
            kept: dict[TopicRef, TopicState] = {}
            try:
                with self.adapter.transaction():
                    catalog.set_policies(scope, target, policies, now)
                    failpoint("after_policy_rows")
                    for ref in catalog.topics():
                        if _applies(scope, target, ref):
                            state = replace(writer.state(ref), topic=catalog.topic(ref))
                            with writer.commit(ref, state.commit + 1) as commit:
                                state = snapshots.follow_policies(self.broker, state, commit, now, purge=False)
                            kept[ref] = state.after(commit=commit.number)
            except BaseException:
                writer.forget()
                raise
            for ref, state in kept.items():
                writer.keep(ref, state)
        if forgotten:
            warnings.warn(SeqdedupWarning(
                f"deduplication is off now on {forgetting(forgotten)}: those marks are forgotten (R10). While it is "
                "off no entry is checked, and once it is on again every id sent before is accepted again, so a retry "
                "is written twice (docs/semantics.md, R10)"), stacklevel=3)

    # --- statements ----------------------------------------------------------------------------------------------

    def sql(self, text: str, *, dialect: str | None = None,
            **frames: object) -> StatementResult | QueryResult | Done | None:
        """Run one or more statements; returns the result of the last one (see ``sql_all``)."""
        results = self.sql_all(text, dialect=dialect, **frames)
        return results[-1] if results else None

    def sql_all(self, text: str, *, dialect: str | None = None,
                **frames: object) -> list[StatementResult | QueryResult | Done]:
        """Run statements; ``frames`` (name=DataFrame: pandas, pyarrow or Spark) are tables they read by name."""
        trees = statements.parse(text, read_dialect(dialect or self.dialect))
        if not frames:
            return [self.run(tree) for tree in trees]
        with self.writer, registered(self, frames):       # DataFrames in, by name, for these statements
            return [self.run(tree) for tree in trees]

    def register(self, name: str, data: object) -> None:
        """Make a pandas DataFrame, a pyarrow Table or a Spark DataFrame a table statements read as ``name``."""
        with self.writer:
            register(self, name, data)

    def unregister(self, name: str) -> None:
        """Drop the temporary table or view ``name`` (a DataFrame registered by name); nothing when there is none."""
        with self.writer:
            self.adapter.drop_temp_table(name)

    def run(self, tree: exp.Expression) -> StatementResult | QueryResult | Done:
        """Run one parsed statement."""
        if not self.adapter.READS_SPARK_FILE_SOURCES:     # parquet.`path`, USING csv OPTIONS (path ...) on DuckDB
            tree = to_duckdb_readers(tree)
        if rewrite.calls(tree, "is_not_dup"):
            return statement.run(self.broker, tree, self.dialect)
        command = statements.catalog_command(tree)
        if command is not None:
            return self._catalog_command(command)
        if isinstance(tree, (exp.Transaction, exp.Commit, exp.Rollback)):
            said = {exp.Transaction: "BEGIN", exp.Commit: "COMMIT", exp.Rollback: "ROLLBACK"}[type(tree)]
            raise RewriteError(f"{said} through a seqdedup session is refused: each statement is one "
                               "commit of its own (all of it or none), and a transaction around several would hold "
                               "seqdedup's marks in the dark; run the statements one by one (a failed one changes "
                               "nothing), or write them into a staging table and insert from it in one statement")
        self._refuse_writes_around(tree)
        with self.writer, self.writer.scratch() as scratch:
            tree = expand_state_functions(
                tree, lambda topic: self._marks_query(topic, scratch), self._claims_for,
                integer_types=self.adapter.INTEGER_TYPES | self.adapter.NULL_TYPES)
            if not statements.returns_rows(tree):
                self.adapter.execute(tree)
                return QueryResult(columns=[], rows=[])
            columns, rows = self.adapter.fetch_with_columns(tree)     # names as the engine gives them
        return QueryResult(columns=columns, rows=rows)

    def _refuse_writes_around(self, tree: exp.Expression) -> None:
        """A topic is written only through is_not_dup, and the catalog only by seqdedup: a statement that inserts
        into, updates, deletes from, replaces or drops one is refused (names matched as the engines match them, case
        and quotes aside). ``seqdedup topic drop`` deletes a topic on purpose."""
        written = [table for table in statements.written_tables(tree) if table.name]
        if not written:             # (a query: no read of the topic list, which costs Spark a job)
            return
        topics = {key.lower() for key in self.topics()}
        for table in written:
            ref = self.ref(table)
            what = tree.key.upper() if not isinstance(tree, exp.Create) else f"CREATE {tree.kind}"
            if isinstance(tree, exp.Copy):
                what = "COPY ... FROM"
            if ref.key.lower() in topics:
                if isinstance(tree, exp.Insert):
                    raise RewriteError(f"INSERT INTO topic {ref.key} must filter with WHERE is_not_dup(producer, "
                                       "sequence_id): seqdedup assigns its positions and keeps its marks")
                raise RewriteError(f"{what} on topic {ref.key} is refused: a topic is written only through INSERT ... "
                                   "WHERE is_not_dup(...), so that each entry is there once with its position; "
                                   "to delete a topic on purpose, run seqdedup topic drop (Session.drop_topic)")
            if ref.namespace.lower() == self.adapter.DEFAULT_NAMESPACE.lower() and ref.name.lower() in CATALOG_TABLES:
                raise RewriteError(f"{what} on {ref.name} is refused: the catalog tables are written by seqdedup only "
                                   "(a change by hand can make seqdedup drop new entries or write one twice)")

    def _catalog_command(self, command: statements.CatalogCommand) -> Done:
        if command.action == "create_topic":
            self.create_topic(command.target, command.columns, if_not_exists=command.if_not_exists,
                              **command.policies)
            return Done(f"created topic {self.ref(command.target).key}")
        if command.scope == "topic":
            self.alter_topic(command.target, **command.policies)
        elif command.scope == "namespace":
            self.set_namespace_policy(command.target, **command.policies)
        else:
            self.set_global_policy(**command.policies)
        return Done(f"set {command.scope} policies {sorted(command.policies)}")

    # --- state (R7, R11, R13, R6) --------------------------------------------------------------------------------

    def state(self, topic: str | TopicRef) -> TopicState:
        """The topic's state as published: from memory when this process knows it and nobody else can have
        written since; else recovered from the catalog (R7). Any thread may read, while another writes."""
        return self.broker.state(topic)

    def _marks_query(self, topic: str, scratch) -> exp.Query:
        """The producer_state of a topic as a query, for the state functions of SQL (a relation of the marks)."""
        marks = self.state(topic).marks.table
        relation = scratch.relation("__sd_state", marks)
        return exp.select("producer", "sequence_id", "last_publish_time").from_(relation)

    def _pushed_for(self, topic: str, producer: str) -> int | None:
        return self.pushed.get(self.ref(topic).key, producer)

    def _claims_for(self, topic: str) -> dict[str, int]:
        return self.pushed.claims(self.ref(topic).key)

    def producer_state(self, topic: str) -> QueryResult:
        """Every producer the topic's state knows, with its mark and last write, recovered from snapshot + replay."""
        marks = self.state(topic).marks.table.sort_by("producer")
        return QueryResult(["producer", "sequence_id", "last_publish_time"],
                           [tuple(r.values()) for r in marks.to_pylist()])

    def last_sequence_id(self, topic: str, producer: str) -> int:
        """R13: the producer's persisted mark, or -1 when it has none (or deduplication is disabled)."""
        mark = self.state(topic).mark(producer)
        return -1 if mark is None else mark

    def dup_status(self, topic: str, producer: str, sequence_id: int,
                   highest_sequence_id: int | None = None) -> DupStatus:
        """R6: DUP, NOT_DUP, or UNKNOWN while an uncommitted statement claims the id."""
        check_probe(producer, sequence_id, highest_sequence_id)    # an id '5', True or 2.5 is refused
        mark = self.last_sequence_id(topic, producer)
        pushed = self._pushed_for(topic, producer)
        if pushed is not None and sequence_id <= pushed and sequence_id > mark:
            return DupStatus.UNKNOWN
        return DupStatus.DUP if mark >= 0 and sequence_id <= mark else DupStatus.NOT_DUP

    def snapshot(self, topic: str) -> int | None:
        """Take a snapshot now (and purge idle producers) when anything changed since the last one; its id."""
        return snapshots.snapshot(self.broker, self.ref(topic))

    def drop_topic(self, name: str) -> dict:
        """Delete a topic for good: its table, registry row, policies, snapshots, run log and the consumer positions
        on it (seqdedup/core/drop.py; ``seqdedup topic drop NAME --yes``). Returns what was removed."""
        from .core.drop import drop_topic

        ref = self.ref(name)
        with self.writer:
            try:
                return drop_topic(self.adapter, ref, ref.key in self.topics())
            finally:
                self.writer.forget(ref)

    def write_snapshot(self, topic: str, marks: exp.Query, *, position: int, kind: str = "repair") -> int:
        """Write a snapshot of ``marks`` (a query of producer, sequence_id, last_publish_time) covering the entries up
        to ``position``, in a commit of its own; returns its id. How ``recover --repair`` replaces a wrong state with
        a replay of the log (seqdedup/core/recovery.py)."""
        return snapshots.write_snapshot(self.broker, self.ref(topic), marks, position=position, kind=kind)

    def purge_inactive(self, topic: str) -> int | None:
        """R11 on demand: drop producers idle past the timeout; same as ``snapshot``."""
        return self.snapshot(topic)

    def stats(self, topic: str) -> dict:
        """What the topic holds and what its statements wrote and dropped; ``foreign_rows``: its rows seqdedup did
        not write (inserted around it), with a ``foreign`` message saying how to move them aside when there are any."""
        ref = self.ref(topic)
        with self.adapter.listed_once(ref):     # one listing of its partitions for the state and every read below
            state = self.state(ref)
            catalog = self.broker.reads()
            log = (exp.select("producer", exp.alias_(exp.func("sum", exp.column("written")), "written"),
                              exp.alias_(exp.func("sum", exp.column("duplicates")), "duplicates"),
                              exp.alias_(exp.func("coalesce", exp.func("sum", exp.column("out_of_order")),
                                                  exp.convert(0)), "out_of_order"))
                   .from_(catalog.run_log(ref).subquery("log")).group_by("producer").order_by("producer"))
            rows = catalog.executor.fetchall(log)
            foreign = find_foreign(catalog.executor, ref)      # the entries seqdedup wrote, and the others
            size = catalog.size(ref)
        header = state.header
        stats = {
            "topic": ref.key,
            "deduplication_enabled": state.topic.applied.deduplication_enabled,
            "entries": foreign.entries,
            "last_position": state.end,
            "last_snapshot": {"snapshot_id": header.snapshot_id, "position": header.position, "kind": header.kind,
                              "taken_at": header.taken_at.isoformat()},
            "entries_since_snapshot": state.since_snapshot,
            # what the topic keeps in the catalog: snapshot rows (every snapshot kept, failed commits' rows too),
            # the chain recovery reads (its full snapshot first), the run log's rows
            "catalog": {**size, "chain": list(header.chain), "changed_since_snapshot": state.changed},
            "written": sum(r[1] for r in rows),
            "duplicates": sum(r[2] for r in rows),
            "out_of_order": sum(r[3] for r in rows),
            "producers": {r[0]: {"written": r[1], "duplicates": r[2], "out_of_order": r[3]} for r in rows},
            # rows written around seqdedup, which it leaves out (seqdedup/core/foreign.py)
            "foreign_rows": foreign.rows,
        }
        if foreign.message:
            stats["foreign"] = foreign.message
        return stats

    def quarantine_foreign_rows(self, topic: str) -> dict:
        """Move the rows of a topic that seqdedup did not write (inserted around it) into ``<topic>_foreign``
        (seqdedup/core/foreign.py; ``seqdedup topic quarantine NAME``). Returns what was moved."""
        from .core.foreign import quarantine

        ref = self.ref(topic)
        with self.writer:
            try:
                self.topic(ref)                  # an unknown topic is named before anything else
                return quarantine(self.adapter, ref, self.topics(), self.clock)
            finally:
                self.writer.forget(ref)      # a foreign partition's number may be free again

    def compact(self, topic: str, *, factor: int = compaction.FACTOR) -> compaction.Compaction:
        """Merge the topic's published commits into fewer, larger partitions, ``factor`` of one tier into one of the
        next (seqdedup/core/compaction.py; ``seqdedup compact TOPIC``); what it did. On DuckDB there is nothing to
        merge."""
        ref = self.ref(topic)
        if isinstance(factor, bool) or not isinstance(factor, int) or factor < 2:
            raise TopicError(f"factor={factor!r}: a compaction merges factor partitions of one tier into one; give a "
                             "whole number, 2 or more (the default is 10)")
        with self.writer:
            self.topic(ref)                  # an unknown topic is named before anything else
            return compaction.compact(self.adapter, ref, factor)

    # --- clients -------------------------------------------------------------------------------------------------

    def producer(self, topic: str, *, name: str | None = None, initial_sequence_id: int | None = None,
                 send_timeout: float | None = 30.0, **batching) -> Producer:
        """A producer for the topic (see ``seqdedup.clients.producer.Producer``). ``batching``: how ``send_async``
        groups entries, ``batching_max_messages``, ``batching_max_bytes``, ``batching_max_publish_delay`` (seconds) and
        ``batching_max_pending_messages`` (see ``seqdedup.clients.batching.Batching``)."""
        from .clients.producer import Producer

        return Producer(self, topic, name=name, initial_sequence_id=initial_sequence_id, send_timeout=send_timeout,
                        **batching)

    def kafka_ingest(self, topic: str, batches: object, *, order_by: str | None = None) -> KafkaResult:
        """Write Kafka record batches, each once, with epoch fencing (R15; see ``seqdedup.clients.kafka``)."""
        from .clients.kafka import ingest_batches

        return ingest_batches(self, topic, batches, order_by=order_by)

    def close(self) -> None:
        from .clients.producer import close_producers

        close_producers(self)        # what the session opened: its producers' names free, their leases released
        self.writer.close()
        self.adapter.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["Session", "PushedMarks", "SeqdedupError", "StatementResult", "literal"]
