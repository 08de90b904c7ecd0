"""A seqdedup session: one engine connection, the catalog on it, and the statements users run through it."""
from __future__ import annotations

import contextlib
import datetime as dt
import threading
import uuid
from dataclasses import replace
from typing import Callable, Iterable, Iterator

import sqlglot
from sqlglot import exp

from seqdedup.catalog import policies as policy
from seqdedup.catalog.catalog import Catalog, Topic, TopicRef, topic_ref
from seqdedup.catalog.schema import SYSTEM_COLUMNS, catalog_table
from seqdedup.catalog.state import SnapshotHeader, literal, producer_state_query
from seqdedup.errors import EngineError, InvalidEntryError, RewriteError, SeqdedupError, TopicError, at
from seqdedup.extensions.base import EngineAdapter
from seqdedup.sql import rewrite, statements
from seqdedup.sql.dialects import read_dialect
from seqdedup.sql.functions import expand_state_functions
from seqdedup.sql.sources import to_duckdb_readers
from seqdedup.udfs import DupStatus
from seqdedup.udfs.guards import check_probe

from .failpoints import failpoint
from .frames import register, registered
from .locks import WriterLock, shared
from .results import Done, ProducerCount, QueryResult, StatementResult

MAX_ID = 2**63 - 1


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class PushedMarks:
    """R6: ids accepted by statements that have not committed yet, per topic and producer.

    Pulsar's ``highestSequencedPushed`` minus its persisted twin: while a statement is in flight its ids are
    UNKNOWN to everyone else; when it commits they are persisted, and when it fails they fall back (are dropped).
    """

    def __init__(self) -> None:
        self._marks: dict[str, dict[str, int]] = {}   # topic -> producer -> highest id claimed, uncommitted
        self._lock = threading.Lock()

    def claim(self, topic: str, marks: dict[str, int]) -> None:
        with self._lock:
            self._marks[topic] = dict(marks)

    def release(self, topic: str) -> None:
        with self._lock:
            self._marks.pop(topic, None)

    def get(self, topic: str, producer: str) -> int | None:
        with self._lock:
            return self._marks.get(topic, {}).get(producer)

    def claims(self, topic: str) -> dict[str, int]:
        """Every producer's uncommitted claim on the topic (a copy): SQL ``dup_status`` reads them (issue 12)."""
        with self._lock:
            return dict(self._marks.get(topic, {}))


class Session:
    """seqdedup on one engine. Create it with ``seqdedup.connect(...)``."""

    def __init__(self, adapter: EngineAdapter, *, clock: Callable[[], dt.datetime] = utcnow, dialect: str = "spark",
                 lock_timeout: float | None = 60.0):
        self.adapter = adapter
        self.clock = clock            # the time statements, snapshots and purges see; tests move it
        self.dialect = dialect        # the dialect statements are read in unless sql() is told otherwise
        self.catalog = Catalog(adapter)
        self.committed = Catalog(adapter.committed_reads())   # state reads from any thread, outside statements
        self._tag = uuid.uuid4().hex[:8]   # in the names of this session's temporary tables: sessions may share
                                           # a connection (DuckDB) or a SparkSession, whose temporary names are shared
        # One writer at a time per database in this process, whichever session it uses (seqdedup/locks.py).
        self._lock = WriterLock(adapter.identity, lock_timeout)
        self.attempted: dict[str, int] = {}   # topic key -> number of the last commit begun (a failed one too)
        with self._lock:
            database = shared(adapter.identity)
            if database.pushed is None:
                database.pushed = PushedMarks()
            self.pushed: PushedMarks = database.pushed    # R6: shared with every session on the database
            self.catalog.check_version()
            if not adapter.read_only:
                with adapter.transaction():
                    self.catalog.create()

    # --- names ---------------------------------------------------------------------------------------------------

    def ref(self, topic: str | exp.Table, namespace: str | None = None) -> TopicRef:
        return topic_ref(topic, self.adapter.DEFAULT_NAMESPACE, namespace, self.adapter.DATABASE)

    def _reads(self) -> Catalog:
        """The catalog as this thread reads it: with its own uncommitted writes while it is the writer, else as
        committed (any thread may read while another writes)."""
        return self.catalog if self._lock.held() else self.committed

    def topic(self, topic: str | TopicRef) -> Topic:
        return self._reads().topic(topic if isinstance(topic, TopicRef) else self.ref(topic))

    def topics(self) -> list[str]:
        return [r.key for r in self._reads().topics()]

    # --- topics and policies (R9, R10) ---------------------------------------------------------------------------

    def create_topic(self, name: str, columns: dict[str, str] | Iterable[tuple[str, str]], *,
                     namespace: str | None = None, if_not_exists: bool = False, **policies: object) -> Topic:
        """Create a topic with the user's columns (name -> Spark SQL type) and topic-level policies."""
        ref = self.ref(name, namespace)
        columns = dict(columns)
        types = {}
        for column, kind in columns.items():
            try:
                # parsed whole: DataType.build would read "STRING, y INT" as STRING and drop the rest silently
                types[column] = kind if isinstance(kind, exp.DataType) else sqlglot.parse_one(
                    kind, into=exp.DataType, read="spark")
            except (sqlglot.errors.SqlglotError, ValueError):
                raise TopicError(f"column {column!r} has an unknown type {kind!r}; use a Spark SQL type such as "
                                 "STRING, BIGINT, DOUBLE, TIMESTAMP") from None
        with self._lock:
            if if_not_exists and ref.key in self.topics():
                return self.topic(ref)
            now = self.clock()
            # Table, then the first commit (policies, first snapshot), then the registry row: a crash before the
            # end leaves an unregistered table that the next create takes over.
            with self.adapter.transaction():
                self.catalog.create_table(ref, types)
                failpoint("after_topic_table")
                with self._commit(ref) as commit:
                    self.catalog.set_policies("topic", ref.key, policies, now)
                    enabled = policy.resolve(self.catalog.settings(ref)).deduplication_enabled
                    self._write_snapshot(ref, None, header=None, position=0,
                                                kind="enabled" if enabled else "disabled", now=now, commit=commit)
                self.catalog.register(ref, now)
        return self.topic(ref)

    def alter_topic(self, name: str, **policies: object) -> Topic:
        """Set topic policies; a value of ``None`` unsets one (then the namespace or global value applies)."""
        ref = self.ref(name)
        self.topic(ref)
        self._set_policies("topic", ref.key, policies)
        return self.topic(ref)

    def set_namespace_policy(self, namespace: str, **policies: object) -> None:
        self._set_policies("namespace", namespace, policies)

    def set_global_policy(self, **policies: object) -> None:
        self._set_policies("global", "", policies)

    def _set_policies(self, scope: str, target: str, policies: dict[str, object]) -> None:
        with self._lock:
            now = self.clock()
            with self.adapter.transaction():
                self.catalog.set_policies(scope, target, policies, now)
                failpoint("after_policy_rows")
                for ref in self.catalog.topics():
                    if scope == "global" or (scope == "namespace" and ref.namespace == target) or ref.key == target:
                        with self._commit(ref) as commit:
                            self._sync_status(self.catalog.topic(ref), now, commit)

    @contextlib.contextmanager
    def _commit(self, ref: TopicRef) -> Iterator[int]:
        """One commit of a topic: what is written inside, with its number, becomes visible together or never."""
        with self.adapter.transaction():     # DuckDB publishes when this transaction commits
            number = self.catalog.next_commit(ref)
            self.attempted[ref.key] = number     # a producer whose send failed learns what it may have written
            self.adapter.open_commit(ref, number)
            try:
                yield number
                failpoint("before_publish")
                self.adapter.publish(ref)     # Spark publishes here
            finally:
                self.adapter.close_commit(ref)
        failpoint("after_publish")

    def _write_snapshot(self, ref: TopicRef, marks: exp.Expression | None, **options) -> int:
        """Write a snapshot in the open commit (see ``Catalog.write_snapshot``); returns its id."""
        snapshot_id = self.catalog.write_snapshot(ref, marks, **options)
        failpoint("after_snapshot_rows")
        return snapshot_id

    def _sync_status(self, topic: Topic, now: dt.datetime, commit: int) -> SnapshotHeader:
        """Make the state follow the applied policy: disabling forgets, enabling starts empty at the log's end (R10)."""
        header = self.catalog.last_snapshot(topic.ref)
        if header.enabled != topic.applied.deduplication_enabled:
            kind = "enabled" if topic.applied.deduplication_enabled else "disabled"
            position = self.catalog.last_position(topic.ref, header)
            self._write_snapshot(topic.ref, None, header=header, position=position, kind=kind, now=now,
                                        commit=commit)
            header = self.catalog.last_snapshot(topic.ref)
        return header

    # --- statements ----------------------------------------------------------------------------------------------

    def sql(self, text: str, *, dialect: str | None = None, **frames):
        """Run one or more statements; returns the result of the last one (see ``sql_all``)."""
        results = self.sql_all(text, dialect=dialect, **frames)
        return results[-1] if results else None

    def sql_all(self, text: str, *, dialect: str | None = None, **frames) -> list:
        """Run statements; ``frames`` (name=DataFrame: pandas, pyarrow or Spark) are tables they read by name."""
        trees = statements.parse(text, read_dialect(dialect or self.dialect))
        if not frames:
            return [self.run(tree) for tree in trees]
        with self._lock, registered(self, frames):       # issue 12: DataFrames in, by name, for these statements
            return [self.run(tree) for tree in trees]

    def register(self, name: str, data) -> None:
        """Make a pandas DataFrame, a pyarrow Table or a Spark DataFrame a table statements read as ``name``."""
        with self._lock:
            register(self, name, data)

    def run(self, tree: exp.Expression):
        """Run one parsed statement."""
        if not self.adapter.READS_SPARK_FILE_SOURCES:     # issue 12: parquet.`path`, USING csv OPTIONS (path ...)
            tree = to_duckdb_readers(tree)
        if rewrite.calls(tree, "is_not_dup"):
            return self._dedup_insert(tree)
        command = statements.catalog_command(tree)
        if command is not None:
            return self._catalog_command(command)
        if isinstance(tree, exp.Insert):
            target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
            if isinstance(target, exp.Table) and self.ref(target).key in self.topics():
                raise RewriteError(f"INSERT INTO topic {self.ref(target).key} must filter with "
                                   "WHERE is_not_dup(producer, sequence_id): seqdedup assigns its positions")
        tree = expand_state_functions(tree, self._state_for, self._claims_for,
                                      integer_types=self.adapter.INTEGER_TYPES | self.adapter.NULL_TYPES)
        if not statements.returns_rows(tree):
            with self._lock:
                self.adapter.execute(tree)
            return QueryResult(columns=[], rows=[])
        with self._lock:
            columns, rows = self.adapter.fetch_with_columns(tree)     # names as the engine gives them (issue 12)
        return QueryResult(columns=columns, rows=rows)

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

    def _dedup_insert(self, tree: exp.Expression) -> StatementResult:
        plan = rewrite.expand_is_not_dup(tree)
        ref = self.ref(plan.target)
        with self._lock:
            temps: list[str] = []
            try:
                topic = self.catalog.topic(ref)     # an unknown topic is named before anything else
                with self._commit(ref) as commit:
                    return self._dedup_commit(topic, plan, commit, temps)
            finally:
                self.pushed.release(ref.key)
                for name in temps:
                    self.adapter.drop_temp_table(name)

    def _temp(self, temps: list[str], name: str, query: exp.Expression) -> exp.Table:
        name = f"{name}_{self._tag}"
        temps.append(name)
        return self.adapter.create_temp_table(name, query)

    def _dedup_commit(self, topic: Topic, plan: rewrite.DedupInsert, commit: int,
                      temps: list[str]) -> StatementResult:
        adapter, catalog, ref = self.adapter, self.catalog, topic.ref
        now = self.clock()
        header = self._sync_status(topic, now, commit)
        base = catalog.last_position(ref, header)

        self._check_keys(plan.arguments)      # types and shape first: checked without running the SELECT
        targets, values = self._check_values(topic, plan)
        keys = self._entries(plan, temps)
        batches = self._validate_entries(keys)

        if header.enabled:
            state = self._temp(temps, "__sd_state", producer_state_query(ref.key, ref.table, header))
            header, state = self._purge_expired(topic, header, state, base, now, commit, temps)
            accepted, rounds = self._decide(plan, keys, state, batches, base, temps)
            self._write_accepted(ref, plan, targets, values, accepted, now, commit)
        else:   # R10: nothing is checked; every entry is written
            state, rounds = None, 0
            accepted = self._write_all(ref, plan, targets, values, base, now, commit, temps)
        failpoint("after_topic_rows")

        # R5: the run log gets the per-producer counts; the caller gets them back from it.
        statement_id = str(uuid.uuid4())
        counts = rewrite.producer_counts(keys, accepted)
        adapter.execute(exp.insert(
            exp.select(literal(statement_id), literal(ref.key), "producer", "written", "duplicates", "first_position",
                       "last_position", literal(now), "highest", literal(commit)).from_(counts.subquery("c")),
            catalog_table("seqdedup_statements")))
        counts = adapter.fetchall(
            exp.select("producer", "written", "duplicates", "first_position", "last_position", "highest")
            .from_(catalog_table("seqdedup_statements")).where(exp.column("statement_id").eq(literal(statement_id)))
            .order_by("producer"))
        # R6: the accepted ids are pushed, not yet persisted, until the transaction commits.
        if state is not None:
            self.pushed.claim(ref.key, {p: h for p, w, _, _, _, h in counts if w})
        failpoint("after_run_log")
        written = sum(row[1] for row in counts)
        snapshot_id = self._snapshot_if_due(topic, header, state, accepted, base + written, now, commit)
        return StatementResult(
            topic=ref.key, statement_id=statement_id, snapshot_id=snapshot_id, rounds=rounds, commit=commit,
            producers=[ProducerCount(p, w, d, first, last) for p, w, d, first, last, _ in counts],
        )

    def _write_accepted(self, ref: TopicRef, plan: rewrite.DedupInsert, targets: list[str], values: list[str],
                        accepted: exp.Table, now: dt.datetime, commit: int) -> None:
        """INSERT the accepted entries, checking that the SELECT, read again, matched each exactly once."""
        total, ties = self.adapter.fetchall(exp.select(
            exp.Count(this=exp.Star()),
            exp.func("coalesce", exp.func("max", exp.column(rewrite.PEERS)), literal(1)) > 1,
        ).from_(accepted.copy()))[0]
        inserted = self.adapter.write_topic(ref, rewrite.insert_accepted(
            ref.table, targets, values, plan.values, plan.key_columns, accepted, literal(now), commit, ties=bool(ties)))
        if inserted is not None and inserted != total:
            raise EngineError(
                f"the statement's SELECT gave other rows when read a second time ({inserted} matched {total} new "
                "entries): its source or expressions are not deterministic; materialize it into a table first")

    def _write_all(self, ref: TopicRef, plan: rewrite.DedupInsert, targets: list[str], values: list[str],
                   base: int, now: dt.datetime, commit: int, temps: list[str]) -> exp.Table:
        """Deduplication disabled: write every entry; returns what was written, numbered."""
        rows = self._temp(temps, "__sd_unchecked", rewrite.unchecked_rows(values, plan.values, base,
                                                                           order=self._numbering(plan)))
        self.adapter.write_topic(ref, rewrite.insert_rows(ref.table, targets, values, rows, literal(now), commit))
        return rows

    def _decide(self, plan: rewrite.DedupInsert, keys: exp.Table, state: exp.Table, batches: bool, base: int,
                temps: list[str]) -> tuple[exp.Table, int]:
        """The accepted entries, numbered with their positions, and the rounds it took (see sql/rewrite.py)."""
        rounds = 1
        if not batches and not plan.ordered:
            accepted = rewrite.aggregate_decisions(keys, state)
        else:
            def round_(previous, first):
                return rewrite.decision_round(previous, plan.key_columns, plan.order, batches=batches, first=first)

            decisions = self._temp(temps, "__sd_decisions_0",
                                   round_(rewrite.first_decisions(keys, state, plan.key_columns), True))
            while batches and self.adapter.fetchall(rewrite.undecided(decisions))[0][0]:
                decisions = self._temp(temps, f"__sd_decisions_{rounds % 2}", round_(decisions, False))
                rounds += 1
            accepted = rewrite.accepted_entries(decisions, plan.key_columns)
        return self._temp(temps, "__sd_accepted", rewrite.numbered(accepted, plan.key_columns, base,
                                                                   order=self._numbering(plan))), rounds

    def _numbering(self, plan: rewrite.DedupInsert) -> list[str] | None:
        """The order positions are numbered in: none, unless the engine's row_number() requires one."""
        return plan.key_columns if self.adapter.ROW_NUMBER_NEEDS_ORDER else None

    def _check_keys(self, arguments: exp.Select) -> None:
        """Producers are strings and ids integers; anything else is an error that says how to cast.

        ``arguments`` is the SELECT of is_not_dup's arguments as written: their types are read without running it,
        before a COALESCE could convert a string or boolean highest id into a number.
        """
        types = dict(self.adapter.query_columns(arguments))
        ids = "an integer: CAST it to BIGINT (sequence ids are signed 64-bit, 0 to 9223372036854775807)"
        checks = ((rewrite.PRODUCER, "producer", self.adapter.STRING_TYPES, "a string: CAST it to STRING"),
                  (rewrite.SEQUENCE_ID, "sequence_id", self.adapter.INTEGER_TYPES, ids),
                  (rewrite.HIGHEST, "highest_sequence_id", self.adapter.INTEGER_TYPES, ids))
        for column, role, allowed, fix in checks:
            kind = types.get(column)
            if kind is not None and kind.split("(")[0].strip('"').upper() not in allowed | self.adapter.NULL_TYPES:
                raise InvalidEntryError(f"is_not_dup's {role} argument has type {kind.upper()}; it must be {fix}")

    def _entries(self, plan: rewrite.DedupInsert, temps: list[str]) -> exp.Table:
        """Plan step 1, the statement's entries, computed once. An engine error here is one of the user's expressions
        failing on some row (an overflow, a bad cast, a division by zero): the error says where to look."""
        try:
            return self._temp(temps, "__sd_keys", plan.keys)
        except EngineError as error:
            raise EngineError(
                f"could not compute the statement's entries: {str(error).rstrip('.!')}. Fix the expression that "
                f"fails, among is_not_dup's arguments{at(plan.call)}, the WHERE conditions and the ORDER BY "
                "(sequence ids must fit signed 64-bit: 0 to 9223372036854775807). Nothing was written") from error

    def _check_values(self, topic: Topic, plan: rewrite.DedupInsert) -> tuple[list[str], list[str]]:
        """The topic columns written and the SELECT's columns that fill them; TopicError when they do not fit."""
        values = [name for name, _ in self.adapter.query_columns(plan.values) if name not in plan.key_columns]
        user_columns = [name for name, _ in topic.user_columns]
        if plan.columns is None:
            targets = user_columns
        else:
            lowered = {c.lower(): c for c in user_columns}
            unknown = [c for c in plan.columns if c.lower() not in lowered]
            if unknown:
                raise TopicError(f"topic {topic.ref.key} has no columns {unknown}; its columns are {user_columns} "
                                 f"(system columns {list(SYSTEM_COLUMNS)} are written by seqdedup)")
            targets = [lowered[c.lower()] for c in plan.columns]
            repeated = sorted({c for c in targets if targets.count(c) > 1})
            if repeated:
                raise TopicError(f"the INSERT lists the columns {repeated} more than once; list each column once")
        if len(values) != len(targets):
            raise TopicError(f"the SELECT gives {len(values)} values per entry but topic {topic.ref.key} takes "
                             f"{len(targets)} ({', '.join(targets)}); list the columns to write, in order")
        return targets, values

    def _validate_entries(self, keys: exp.Table) -> bool:
        """R4: NULL producer or ids, negative ids, highest below lowest: an error naming the first such entry.

        Returns whether the statement has batch entries (highest above lowest), which need more than one round.
        """
        p, s, h = (exp.column(c) for c in (rewrite.PRODUCER, rewrite.SEQUENCE_ID, rewrite.HIGHEST))
        problems = [
            (p.is_(exp.null()), "a NULL producer", "give every entry a producer name"),
            (s.is_(exp.null()), "a NULL sequence_id", "give every entry a sequence id"),
            (exp.or_(s < 0, h < 0), "a negative sequence id", "sequence ids are 0 or more (64-bit signed)"),
            (exp.or_(s > MAX_ID, h > MAX_ID), "a sequence id above 9223372036854775807",
             "sequence ids are signed 64-bit"),
            (h < s, "highest_sequence_id below sequence_id",
             "a batch entry's highest id must be at least its lowest id"),
        ]
        counted = [cond for cond, _, _ in problems] + [h > s]
        counts = exp.select(*[exp.func("sum", exp.Case(ifs=[exp.If(this=cond.copy(), true=literal(1))],
                                                        default=literal(0))) for cond in counted])
        *row, batches = self.adapter.fetchall(counts.from_(keys.copy()))[0]
        for (condition, what, fix), count in zip(problems, row):
            if count:
                example = self.adapter.fetchall(
                    exp.select(p, s, h).from_(keys.copy()).where(condition).order_by(p, s).limit(1))[0]
                raise InvalidEntryError(
                    f"{count} entr{'y has' if count == 1 else 'ies have'} {what} (first: producer={example[0]!r}, "
                    f"sequence_id={example[1]}, highest_sequence_id={example[2]}); {fix}. Nothing was written")
        return bool(batches)

    def _purge_expired(self, topic: Topic, header: SnapshotHeader, state: exp.Table, position: int,
                       now: dt.datetime, commit: int, temps: list[str]) -> tuple[SnapshotHeader, exp.Table]:
        """R11: producers idle longer than the timeout leave the state, and a snapshot records it."""
        if topic.applied.producer_inactivity_timeout is None:     # "never" (issue 12)
            return header, state
        cutoff = now - dt.timedelta(minutes=topic.applied.producer_inactivity_timeout)
        expired = exp.column("last_publish_time") < literal(cutoff)
        if not self.adapter.fetchall(exp.select(exp.Count(this=exp.Star())).from_(state.copy()).where(expired))[0][0]:
            return header, state
        kept = exp.select("*").from_(state.copy()).where(exp.not_(expired.copy()))
        self._write_snapshot(topic.ref, kept, header=header, position=position, kind="purge", now=now,
                                    commit=commit, max_producers=topic.applied.max_producers_in_snapshot)
        header = self.catalog.last_snapshot(topic.ref)
        return header, self._temp(temps, "__sd_state_kept", kept)

    def _snapshot_if_due(self, topic: Topic, header: SnapshotHeader, state: exp.Table | None,
                         accepted: exp.Table, last_position: int, now: dt.datetime, commit: int) -> int | None:
        """R8: every snapshot_interval_entries entries, or snapshot_interval_seconds after the last snapshot."""
        policies = topic.applied
        since = last_position - header.position
        seconds = (now - header.taken_at).total_seconds()
        due = since >= policies.snapshot_interval_entries or (
            policies.snapshot_interval_seconds > 0 and since > 0 and seconds >= policies.snapshot_interval_seconds)
        if not due:
            return None
        if state is None:
            return self._write_snapshot(topic.ref, None, header=header, position=last_position,
                                               kind="disabled", now=now, commit=commit)
        new = (exp.select(exp.alias_(exp.column(rewrite.PRODUCER), "producer"),
                          exp.alias_(exp.Max(this=exp.column(rewrite.HIGHEST)), "sequence_id"),
                          exp.alias_(literal(now), "last_publish_time"))
               .from_(accepted.copy()).group_by(rewrite.PRODUCER))
        both = exp.union(exp.select("producer", "sequence_id", "last_publish_time").from_(state.copy()), new,
                         distinct=False)
        marks = (exp.select("producer", exp.alias_(exp.Max(this=exp.column("sequence_id")), "sequence_id"),
                            exp.alias_(exp.Max(this=exp.column("last_publish_time")), "last_publish_time"))
                 .from_(both.subquery("m")).group_by("producer"))
        return self._write_snapshot(topic.ref, marks, header=header, position=last_position,
                                           kind="snapshot", now=now, commit=commit,
                                           max_producers=policies.max_producers_in_snapshot)

    # --- state (R7, R11, R13, R6) --------------------------------------------------------------------------------

    def _state_for(self, topic: str, *, committed: bool = False) -> exp.Query:
        """The producer_state query of a topic, as it stands now (as committed, with ``committed``)."""
        catalog = self.committed if committed else self.catalog
        ref = self.ref(topic)
        applied = catalog.topic(ref).applied
        header = catalog.last_snapshot(ref)
        if header.enabled != applied.deduplication_enabled:
            # A policy change recorded, but the process died before the snapshot that makes the state follow it
            # (on Spark they are two writes). The next write takes that snapshot; until then, the state is what it
            # will make it: empty, whether deduplication was just disabled or just enabled again (R10).
            header = replace(header, snapshot_id=0, kind="disabled")     # no snapshot has id 0: no rows, no replay
        return producer_state_query(ref.key, ref.table, header)

    def _pushed_for(self, topic: str, producer: str) -> int | None:
        return self.pushed.get(self.ref(topic).key, producer)

    def _claims_for(self, topic: str) -> dict[str, int]:
        return self.pushed.claims(self.ref(topic).key)

    def producer_state(self, topic: str) -> QueryResult:
        """Every producer the topic's state knows, with its mark and last write, recovered from snapshot + replay."""
        query = exp.select("*").from_(self._state_for(topic, committed=True).subquery("s")).order_by("producer")
        return QueryResult(["producer", "sequence_id", "last_publish_time"],
                           self.adapter.fetchall(query, committed=True))

    def last_sequence_id(self, topic: str, producer: str) -> int:
        """R13: the producer's persisted mark, or -1 when it has none (or deduplication is disabled)."""
        query = exp.select(exp.Max(this=exp.column("sequence_id"))).from_(
            self._state_for(topic, committed=True).subquery("s")).where(
            exp.column("producer").eq(literal(producer)))
        mark = self.adapter.fetchall(query, committed=True)[0][0]
        return -1 if mark is None else mark

    def dup_status(self, topic: str, producer: str, sequence_id: int,
                   highest_sequence_id: int | None = None) -> DupStatus:
        """R6: DUP, NOT_DUP, or UNKNOWN while an uncommitted statement claims the id."""
        check_probe(producer, sequence_id, highest_sequence_id)    # an id '5', True or 2.5 is refused (issue 12)
        mark = self.last_sequence_id(topic, producer)
        pushed = self._pushed_for(topic, producer)
        if pushed is not None and sequence_id <= pushed and sequence_id > mark:
            return DupStatus.UNKNOWN
        return DupStatus.DUP if mark >= 0 and sequence_id <= mark else DupStatus.NOT_DUP

    def snapshot(self, topic: str) -> int | None:
        """Take a snapshot now (and purge idle producers) when anything changed since the last one."""
        ref = self.ref(topic)
        with self._lock:
            temps: list[str] = []
            try:
                self.topic(ref)
                with self._commit(ref) as commit:
                    t = self.topic(ref)
                    now = self.clock()
                    header = self._sync_status(t, now, commit)
                    position = self.catalog.last_position(ref, header)
                    if not header.enabled:
                        return None
                    state = self._temp(temps, "__sd_state", producer_state_query(ref.key, ref.table, header))
                    purged_header, state = self._purge_expired(t, header, state, header.position, now, commit,
                                                               temps)
                    if position == purged_header.position:
                        return purged_header.snapshot_id if purged_header is not header else None
                    return self._write_snapshot(
                        ref, exp.select("*").from_(state.copy()), header=purged_header, position=position,
                        kind="snapshot", now=now, commit=commit, max_producers=t.applied.max_producers_in_snapshot)
            finally:
                for name in temps:
                    self.adapter.drop_temp_table(name)

    def drop_topic(self, name: str) -> dict:
        """Delete a topic for good: its table, registry row, policies, snapshots, run log and the consumer positions
        on it (seqdedup/drop.py; ``seqdedup topic drop NAME --yes``). Returns what was removed."""
        from .drop import drop_topic

        with self._lock:
            return drop_topic(self, self.ref(name))

    def write_snapshot(self, topic: str, marks: exp.Query, *, position: int, kind: str = "repair") -> int:
        """Write a snapshot of ``marks`` (a query of producer, sequence_id, last_publish_time) covering the entries up
        to ``position``, in a commit of its own; returns its id. How ``recover --repair`` replaces a wrong state with
        a replay of the log (seqdedup/recovery.py, issue 12)."""
        ref = self.ref(topic)
        with self._lock:
            applied = self.topic(ref).applied
            with self._commit(ref) as commit:
                return self._write_snapshot(ref, marks, header=self.catalog.last_snapshot(ref), position=position,
                                            kind=kind, now=self.clock(), commit=commit,
                                            max_producers=applied.max_producers_in_snapshot)

    def purge_inactive(self, topic: str) -> int | None:
        """R11 on demand: drop producers idle past the timeout; same as ``snapshot``."""
        return self.snapshot(topic)

    def stats(self, topic: str) -> dict:
        """What the topic holds and what its statements wrote and dropped."""
        ref = self.ref(topic)
        catalog = self._reads()
        t = catalog.topic(ref)
        header = catalog.last_snapshot(ref)
        last = catalog.last_position(ref, header)
        log = (exp.select("producer", exp.alias_(exp.func("sum", exp.column("written")), "written"),
                          exp.alias_(exp.func("sum", exp.column("duplicates")), "duplicates"))
               .from_(catalog.run_log(ref).subquery("log")).group_by("producer").order_by("producer"))
        rows = catalog.executor.fetchall(log)
        return {
            "topic": ref.key,
            "deduplication_enabled": t.applied.deduplication_enabled,
            "entries": last,
            "last_snapshot": {"snapshot_id": header.snapshot_id, "position": header.position, "kind": header.kind,
                              "taken_at": header.taken_at.isoformat()},
            "entries_since_snapshot": last - header.position,
            "written": sum(r[1] for r in rows),
            "duplicates": sum(r[2] for r in rows),
            "producers": {r[0]: {"written": r[1], "duplicates": r[2]} for r in rows},
        }

    # --- clients -------------------------------------------------------------------------------------------------

    def producer(self, topic: str, *, name: str | None = None, initial_sequence_id: int | None = None,
                 send_timeout: float | None = 30.0):
        """A producer for the topic (see ``seqdedup.producer.Producer``)."""
        from .producer import Producer

        return Producer(self, topic, name=name, initial_sequence_id=initial_sequence_id, send_timeout=send_timeout)

    def kafka_ingest(self, topic: str, batches, *, order_by: str | None = None):
        """Write Kafka record batches, each once, with epoch fencing (R15; see ``seqdedup.kafka``)."""
        from .kafka import ingest_batches

        return ingest_batches(self, topic, batches, order_by=order_by)

    def close(self) -> None:
        self.adapter.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["Session", "PushedMarks", "SeqdedupError"]
