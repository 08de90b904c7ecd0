"""A seqdedup session: one engine connection, the catalog on it, and what users do through it.

The session is the facade: names, topics and policies, dispatch of SQL, and reads of the state. Its work runs on its
``Broker`` (``seqdedup.core.broker``: the adapter, the catalog, the writer and the clock), which the jobs of
``seqdedup/core/`` take: a topic's creation (``creation``), policy changes (``policy_changes``), snapshots
(``snapshots``), a statement with ``is_not_dup`` (``statement``), a topic's figures (``stats``). Writes go through
the broker's ``Writer`` (``seqdedup.core.writer``): the lock, the claims of the statement in flight, commits, and the
topics' states in memory.
"""
from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Callable, Iterable

from sqlglot import exp

from seqdedup.catalog import ids
from seqdedup.catalog.catalog import Topic, TopicRef
from seqdedup.catalog.schema import DROPPED, GAPS
from seqdedup.catalog.state import literal
from seqdedup.errors import InvalidEntryError, PolicyError, SeqdedupError, TopicError
from seqdedup.extensions.base import EngineAdapter
from seqdedup.sql import rewrite, statements
from seqdedup.sql.dialects import read_dialect
from seqdedup.sql.functions import expand_state_functions
from seqdedup.sql.sources import to_duckdb_readers
from seqdedup.udfs import DupStatus
from seqdedup.udfs.guards import check_probe
from seqdedup.udfs.reference import shape

from .clients.frames import register, registered
from .core import compaction, creation, guards, policy_changes, snapshots, statement
from .core.broker import Broker
from .core.drops import COMMITS, DropReport, catalog_read, gather
from .core.policy_changes import forgetting
from .core.results import Done, QueryResult, StatementResult
from .core.stats import stats
from .core.topic_state import TopicState
from .core.writer import PushedMarks

if TYPE_CHECKING:        # (for the annotations only: the session loads them on first use)
    from .clients.kafka import KafkaResult
    from .clients.producer import Producer


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


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
        self.adapter, self.catalog = adapter, self.broker.catalog
        self.committed, self.writer = self.broker.committed, self.broker.writer

    @property
    def pushed(self) -> PushedMarks:
        """R6: the claims of the statement in flight on this database, shared by its sessions."""
        return self.writer.pushed

    # --- names ---------------------------------------------------------------------------------------------------

    @property
    def clock(self) -> Callable[[], dt.datetime]:
        """The time statements, snapshots and purges see (the broker's: set it here or there, both see it)."""
        return self.broker.clock

    @clock.setter
    def clock(self, clock: Callable[[], dt.datetime]) -> None:
        self.broker.clock = clock

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
                     namespace: str | None = None, if_not_exists: bool = False, id_parts: int | None = None,
                     **policies: object) -> Topic:
        """Create a topic with the user's columns (name -> Spark SQL type) and topic-level policies.

        ``id_parts`` (1 to 3): its sequence ids are composite, tuples of that many unsigned 64-bit integers compared
        in order (R19: a CDC source's position, such as ``is_not_dup(slot, (lsn, event))``); left out, BIGINT.
        A topic that exists already is a TopicError, unless ``if_not_exists``: then nothing changes (its columns
        and policies stay as they are)."""
        return creation.create_topic(self.broker, self.ref(name, namespace), columns, if_not_exists=if_not_exists,
                                     policies=policies, wait=self.TOPIC_WAIT_SECONDS, id_parts=id_parts)

    def alter_topic(self, name: str, **policies: object) -> Topic:
        """Set topic policies; a value of ``None`` unsets one (then the namespace or global value applies). Turning
        deduplication off forgets the topic's marks (R10), with a SeqdedupWarning that says so."""
        ref = self.ref(name)
        self.topic(ref)
        policy_changes.set_policies(self.broker, "topic", ref.key, policies)
        return self.topic(ref)

    def set_namespace_policy(self, namespace: str, **policies: object) -> None:
        """Set policies for the topics of ``namespace`` (where a topic sets none of its own); ``None`` unsets one.
        Turning deduplication off forgets the marks of the topics it turns off (R10), with a SeqdedupWarning."""
        policy_changes.set_policies(self.broker, "namespace", namespace, policies)

    def set_global_policy(self, **policies: object) -> None:
        """Set policies for every topic (where its topic and namespace set none); ``None`` unsets one. Turning
        deduplication off forgets the marks of the topics it turns off (R10), with a SeqdedupWarning."""
        policy_changes.set_policies(self.broker, "global", "", policies)

    def would_forget(self, policies: dict[str, object], *, topic: str | None = None,
                     namespace: str | None = None) -> dict[str, int]:
        """R10 ahead of a policy change: the topics on which setting ``policies`` (on ``topic``, else on
        ``namespace``, else globally) would turn deduplication off, each with the number of producers whose marks
        that forgets. Nothing is changed. (``seqdedup topic alter`` asks for --yes when there are any.)"""
        if topic is not None:
            return policy_changes.forgotten_by(self.broker, "topic", self.ref(topic).key, policies)
        if namespace is not None:
            return policy_changes.forgotten_by(self.broker, "namespace", namespace, policies)
        return policy_changes.forgotten_by(self.broker, "global", "", policies)

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
        if any(rewrite.calls(tree, name) for name in rewrite.DEDUP_CALLS):
            return statement.run(self.broker, tree, self.dialect)
        command = statements.catalog_command(tree)
        if command is not None:
            return self._catalog_command(command)
        guards.refuse(self.broker, tree)     # a transaction, a write around seqdedup
        with self.writer, self.writer.scratch() as scratch:
            tree = expand_state_functions(
                tree, lambda topic: self._marks_query(topic, scratch), self._claims_for,
                integer_types=self.adapter.INTEGER_TYPES | self.adapter.NULL_TYPES,
                parts_for=lambda topic: self.state(topic).topic.id_parts)
            if not statements.returns_rows(tree):
                self.adapter.execute(tree)
                return QueryResult(columns=[], rows=[])
            columns, rows = self.adapter.fetch_with_columns(tree)     # names as the engine gives them
        return QueryResult(columns=columns, rows=rows)

    def _catalog_command(self, command: statements.CatalogCommand) -> Done:
        if command.action == "create_topic":
            self.create_topic(command.target, command.columns, if_not_exists=command.if_not_exists,
                              id_parts=command.id_parts, **command.policies)
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
        """Every producer the topic's state knows, with its mark (a tuple for composite ids, R19) and last write,
        recovered from snapshot + replay."""
        state = self.state(topic)
        marks = state.marks.table.sort_by("producer").to_pylist()
        if state.topic.id_parts is not None:
            marks = [{**row, "sequence_id": ids.decoded(row["sequence_id"])} for row in marks]
        return QueryResult(["producer", "sequence_id", "last_publish_time"], [tuple(r.values()) for r in marks])

    def last_sequence_id(self, topic: str, producer: str) -> int | tuple[int, ...]:
        """R13: the producer's persisted mark, or -1 when it has none (or deduplication is disabled); a tuple on a
        topic of composite ids (R19)."""
        state = self.state(topic)
        mark = state.mark(producer)
        if mark is None:
            return -1
        return mark if state.topic.id_parts is None else ids.decoded(mark)

    def dup_status(self, topic: str, producer: str, sequence_id: int | tuple[int, ...],
                   highest_sequence_id: int | None = None) -> DupStatus:
        """R6: DUP, NOT_DUP, or UNKNOWN while an uncommitted statement claims the id."""
        check_probe(producer, sequence_id, highest_sequence_id)    # an id '5', True or 2.5 is refused
        parts = self.state(topic).topic.id_parts
        if shape(sequence_id) != (parts or 0):      # R19: the topic's ids have one shape
            raise InvalidEntryError(f"dup_status: sequence_id {sequence_id!r} is not an id of topic {topic}, whose ids "
                                    f"{'are integers' if parts is None else f'are tuples of {parts} parts'}")
        mark = self.last_sequence_id(topic, producer)
        pushed = self._pushed_for(topic, producer)
        if parts is not None:       # (tuples compare part by part; the claims are kept as the ids' text)
            pushed = ids.decoded(pushed)
            mark = None if mark == -1 else mark
        else:
            mark = None if mark < 0 else mark
        if pushed is not None and sequence_id <= pushed and (mark is None or sequence_id > mark):
            return DupStatus.UNKNOWN
        return DupStatus.DUP if mark is not None and sequence_id <= mark else DupStatus.NOT_DUP


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
        return stats(self.broker, self.ref(topic))

    def dropped(self, topic: str, *, producer: str | None = None, since: dt.datetime | None = None,
                reason: str | None = None, limit: int | None = None) -> QueryResult:
        """The topic's ledger of dropped entries (R16; ``seqdedup dropped TOPIC``): a row per entry its statements
        did not write, with the reason, oldest first; only where its ``dropped_entries`` policy was ``keys`` or
        ``rows`` when they ran. Narrowed to one ``producer``, entries dropped at ``since`` or later, one ``reason``
        (``udfs.REASONS``), and the first ``limit`` rows. On a topic of composite ids (R19) an entry's id is in
        ``composite_id``, as a tuple."""
        from .udfs import REASONS

        if reason is not None and reason not in REASONS:
            raise PolicyError(f"unknown reason {reason!r}; the reasons are: {', '.join(REASONS)}")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise TopicError(f"limit={limit!r}: give the number of rows to return, 0 or more (None: all of them)")
        ref = self._log_of(topic, producer)
        query = self.broker.catalog.dropped(ref)
        if reason is not None:
            query = query.where(exp.column("reason").eq(literal(reason)))
        if since is not None:
            query = query.where(exp.column("dropped_at") >= literal(since))
        found = self._log_rows("seqdedup_dropped", query, DROPPED, producer,
                               ("dropped_at", "commit_id", "producer", "sequence_id", "composite_id"), limit)
        if "composite_id" in found.columns:
            found.rows = ids.decoded_rows(found.rows, [found.columns.index("composite_id")])
        return found

    def gaps(self, topic: str, *, producer: str | None = None) -> QueryResult:
        """The holes the topic's statements left after their producers' marks (R17; ``seqdedup gaps TOPIC``), oldest
        first: recorded where its ``gap_policy`` was ``record`` when they ran. Narrowed to one ``producer``."""
        ref = self._log_of(topic, producer)
        return self._log_rows("seqdedup_gaps", self.broker.catalog.gaps(ref), GAPS, producer,
                              ("found_at", "commit_id", "producer", "after_id"))

    def _log_of(self, topic: str, producer: object) -> TopicRef:
        """The topic whose log (the ledger, the holes) is read for ``producer``: an unknown topic is named (a
        misspelt name would read as a topic that dropped nothing), and a producer that is not a name refused."""
        if producer is not None and not isinstance(producer, str):
            raise TopicError(f"producer={producer!r}: a producer's name is text; give it as a string "
                             f"({str(producer)!r})")
        ref = self.ref(topic)
        self.topic(ref)
        return ref

    def _log_rows(self, name: str, query: exp.Select, columns, producer: str | None, order: tuple[str, ...],
                  limit: int | None = None) -> QueryResult:
        """The rows of one of a topic's logs (``query`` of the catalog table ``name``: the ledger, the holes),
        narrowed to one producer, oldest first, as a result."""
        if producer is not None:
            query = query.where(exp.column("producer").eq(literal(producer)))
        query = query.select(*columns, append=False).order_by(*order)
        if limit is not None:
            query = query.limit(limit)
        table = catalog_read(self.adapter, name, query)
        if table is None:
            return QueryResult(list(columns), [])
        return QueryResult(table.column_names, [tuple(r.values()) for r in table.to_pylist()])

    def report(self, topic: str, *, since: dt.datetime | None = None, commits: int = COMMITS) -> DropReport:
        """What the topic's statements dropped and why, per commit and per producer (``seqdedup report TOPIC``;
        ``seqdedup.report.page`` draws it as a page): the latest ``commits`` commits, from ``since`` on, summed by the
        engine from the run log, the ledger of dropped entries and the holes."""
        if isinstance(commits, bool) or not isinstance(commits, int) or commits < 1:
            raise TopicError(f"commits={commits!r}: give the number of latest commits to report on, 1 or more")
        return gather(self.broker, self.ref(topic), since, commits)

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


__all__ = ["Session", "PushedMarks", "SeqdedupError", "StatementResult", "forgetting", "literal"]
