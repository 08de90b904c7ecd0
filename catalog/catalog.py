"""The catalog on one engine: topic registry, policies, snapshots. Engine-neutral: every statement is a tree
that the adapter runs, through the small ``Executor`` protocol below."""
from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass, field
from typing import Protocol

import sqlglot
from sqlglot import exp

from seqdedup.errors import CatalogError, TopicError
from seqdedup.udfs import Policies

from . import policies as policy
from .schema import SYSTEM_COLUMNS, TOPICS, arrow_schema, catalog_table, system_columns
from .setup import CatalogSetup, shape_problem
from .state import (SnapshotHeader, chain_of, complete_snapshots, last_position_query, literal, snapshot_headers_query,
                    snapshot_insert, snapshot_rows)


class Executor(Protocol):
    DEFAULT_NAMESPACE: str
    DATABASE: str | None
    DIALECT: str | type                       # the dialect the engine's type names are read in
    read_only: bool

    def execute(self, statement: exp.Expression) -> None: ...
    def append_rows(self, table: exp.Table, rows) -> None: ...
    def attempt(self, topic: "TopicRef") -> str | None: ...
    def fetchall(self, query: exp.Expression) -> list[tuple]: ...
    def columns(self, table: exp.Table) -> list[tuple[str, str]]: ...
    def tables_columns(self, tables: list[exp.Table]) -> list[list[tuple[str, str]]]: ...
    def create_namespace(self, name: str) -> None: ...
    def check_name(self, part: str) -> None: ...
    def create_topic_table(self, table: exp.Table, columns: dict[str, exp.DataType]) -> None: ...
    def create_catalog_table(self, table: exp.Table, columns: dict[str, exp.DataType]) -> bool: ...
    def keep_guards(self) -> None: ...
    def visible_commits(self, topic: "TopicRef") -> exp.Expression: ...
    def last_published_commit(self, topic: "TopicRef") -> int: ...
    contended: bool
    def delete_rows(self, table: exp.Table, condition: exp.Expression) -> None: ...


@dataclass(frozen=True)
class TopicRef:
    """A topic's identity: its namespace and name, normalized as the engine stores unquoted names."""

    namespace: str
    name: str
    database: str | None = None   # the engine's catalog (DuckDB: the attached database), to qualify fully

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TopicRef) and (self.namespace, self.name) == (other.namespace, other.name)

    def __hash__(self) -> int:
        return hash((self.namespace, self.name))

    @property
    def key(self) -> str:
        """The topic's name in the catalog tables: ``namespace.name``."""
        return f"{self.namespace}.{self.name}"

    @property
    def table(self) -> exp.Table:
        # Fully qualified: in DuckDB a namespace named like the database file would otherwise be ambiguous.
        return exp.table_(exp.to_identifier(self.name, quoted=True), db=exp.to_identifier(self.namespace, quoted=True),
                          catalog=exp.to_identifier(self.database, quoted=True) if self.database else None)


def topic_ref(name: str | exp.Table, default_namespace: str, namespace: str | None = None,
              database: str | None = None) -> TopicRef:
    """The TopicRef of a name as a user wrote it (``events``, ``ns.events``, ``"odd name"``)."""
    if isinstance(name, str):
        try:
            table = exp.to_table(name, dialect="spark")
        except sqlglot.errors.SqlglotError:      # a quote or backtick left open
            table = None
        # `a;b` parses as two statements and `a--b` as `a` with a comment: never silently another name
        if not isinstance(table, exp.Table) or table.catalog or not table.name or any(n.comments for n in table.walk()):
            raise TopicError(f"{name!r} is not a topic name; write namespace.name, and quote parts with backticks "
                             "if they hold spaces, dots or other symbols")
    else:
        table = name

    def part(identifier: exp.Identifier | None, fallback: str) -> str:
        if identifier is None:
            return fallback
        return identifier.this if identifier.quoted else identifier.this.lower()

    return TopicRef(namespace=namespace or part(table.args.get("db"), default_namespace),
                    name=part(table.this, ""), database=database)


@dataclass
class Topic:
    """A registered topic with its columns and policies."""

    ref: TopicRef
    user_columns: list[tuple[str, str]]          # the user's columns (name, type), in order
    settings: dict[str, dict[str, str]] = field(default_factory=dict)   # scope -> policy -> value as set
    id_parts: int | None = None                  # the parts of its composite ids (R19, ``ids``); None: integer ids

    @functools.cached_property
    def applied(self) -> Policies:
        """The policies that apply (R9), resolved from ``settings`` when first read. A value that cannot be read (a
        policy row written by hand) is a PolicyError then, naming the row and the command that sets it right: the
        topic can still be looked up, and altered, which is how the row is set right."""
        return policy.resolve(self.settings, self.ref.key)


@dataclass(frozen=True)
class Creation:
    """What creating a topic reads from the catalog, in one query (``Catalog.creation``)."""

    registered: bool                        # the registry has the topic already
    written: int                            # the highest commit number a catalog row of the topic carries (0: none)
    snapshot_id: int                        # the id its first snapshot takes: above any such row's
    settings: dict[str, dict[str, str]]     # the policy values set at each scope that applies (``Catalog.settings``)
    version: int                            # the highest policy version of the catalog (0: none)

    def settings_with(self, values: dict[str, object]) -> dict[str, dict[str, str]]:
        """The settings once the topic's own ``values`` are set (``None`` unsets), as a read after would find them."""
        own = dict(self.settings["topic"])
        for key, value in (policy.normalize(k, v) for k, v in values.items()):
            if value is None:
                own.pop(key, None)
            else:
                own[key] = value
        return {**self.settings, "topic": own}


def _applying_to(ref: TopicRef) -> exp.Expression:
    """The condition on ``seqdedup_policies`` rows set at a scope that applies to the topic ``ref``."""
    scopes = {"topic": ref.key, "namespace": ref.namespace, "global": ""}
    return exp.or_(*[exp.and_(exp.column("scope").eq(literal(s)), exp.column("target").eq(literal(t)))
                     for s, t in scopes.items()])


def _highest(column: str) -> exp.Expression:
    """The highest value of ``column``, 0 where there is none."""
    return exp.func("coalesce", exp.Max(this=exp.column(column)), literal(0))


class Catalog:
    """Reads and writes the catalog tables through an executor."""

    def __init__(self, executor: Executor):
        self.executor = executor

    def check_version(self) -> bool:
        """See ``CatalogSetup.check_version``: a catalog this seqdedup cannot use is refused before anything is
        written; True when it is complete."""
        return CatalogSetup(self.executor).check_version()

    def create(self) -> None:
        """See ``CatalogSetup.create``: the catalog tables made, or completed (idempotent)."""
        CatalogSetup(self.executor).create()

    # --- topics ----------------------------------------------------------------------------------------------

    def topics(self) -> list[TopicRef]:
        rows = self.executor.fetchall(exp.select("namespace", "name").from_(catalog_table("seqdedup_topics")).order_by("topic"))
        return [TopicRef(ns, name, self.executor.DATABASE) for ns, name in rows]

    def topic(self, ref: TopicRef) -> Topic:
        """The registered topic, or a TopicError naming it and how to create it."""
        registered, settings, numbers = self._lookup(ref)
        if not registered:
            raise TopicError(f"unknown topic {ref.key}; create it first (seqdedup topic create {ref.key} ..., or "
                             "CREATE TABLE ... TBLPROPERTIES ('seqdedup.deduplication_enabled' = 'true'))")
        return self.described(ref, settings, numbers["registered"][1] - 1 or None)

    def described(self, ref: TopicRef, settings: dict[str, dict[str, str]], id_parts: int | None = None) -> Topic:
        """The registered topic ``ref``, whose policy ``settings`` and id shape (``id_parts``) are known: its table
        checked and described."""
        system = system_columns(id_parts)
        columns = self.executor.columns(ref.table)
        if not columns:
            raise CatalogError(f"topic {ref.key} is registered but its table is missing (dropped outside seqdedup?); "
                               "restore the table from a backup of this database: it holds the topic's entries, "
                               "which the catalog cannot rebuild")
        problem = shape_problem(columns, system, self.executor.DIALECT)
        if problem:
            raise CatalogError(f"the table of topic {ref.key} is damaged: {problem} (changed outside seqdedup?); "
                               "restore the table from a backup of this database")
        return Topic(ref=ref, user_columns=[c for c in columns if c[0] not in system], settings=settings,
                     id_parts=id_parts)

    def create_table(self, ref: TopicRef, columns: dict[str, exp.DataType], id_parts: int | None = None) -> bool:
        """The topic's table, with the user's columns and the system columns (before ``register``); False when an
        interrupted create had left it, empty, and it was taken over."""
        clash = sorted(set(columns) & set(SYSTEM_COLUMNS))
        if clash:
            raise TopicError(f"column names {clash} are reserved for seqdedup's system columns; rename them")
        if not columns:
            raise TopicError(f"topic {ref.key} needs at least one column of its own")
        for part in (ref.namespace, ref.name):
            self.executor.check_name(part)
        if self._adoptable(ref, columns):
            return False
        self.executor.create_namespace(ref.namespace)
        self.executor.storage.create_topic_table(ref.table, {**columns, **system_columns(id_parts)})
        return True

    def register(self, ref: TopicRef, now: dt.datetime, id_parts: int | None = None) -> None:
        """Enter the topic in the registry: the last step of creating it (a row appended: on Spark, no job)."""
        import pyarrow as pa

        self.executor.append_rows(catalog_table("seqdedup_topics"), pa.Table.from_pylist(
            [{"topic": ref.key, "namespace": ref.namespace, "name": ref.name, "created_at": now,
              "id_parts": id_parts}], schema=arrow_schema(TOPICS)))

    def _adoptable(self, ref: TopicRef, columns: dict[str, exp.DataType]) -> bool:
        """The table exists already: take it over if an interrupted ``create`` left it (the same columns, empty),
        else a TopicError. (On Spark creating a topic is several catalog operations that a crash can split.)"""
        existing = self.executor.columns(ref.table)
        if not existing:
            return False
        wanted = [n.lower() for n in {**columns, **SYSTEM_COLUMNS}]
        empty = not self.executor.fetchall(exp.select(literal(1)).from_(ref.table.copy()).limit(1))
        if [n.lower() for n, _ in existing] != wanted or not empty:
            raise TopicError(f"a table {ref.key} already exists; pick another topic name or drop the table")
        return True

    # --- policies (R9) ---------------------------------------------------------------------------------------

    def settings(self, ref: TopicRef) -> dict[str, dict[str, str]]:
        """The policy values set at each scope that applies to the topic (unset ones left out)."""
        return self._settings_of(self.executor.fetchall(self._latest_settings(ref)))

    @staticmethod
    def _settings_of(rows) -> dict[str, dict[str, str]]:
        """Settings by scope from the (scope, key, value) rows of ``_latest_settings``."""
        settings: dict[str, dict[str, str]] = {scope: {} for scope in policy.SCOPES}
        for scope, key, value in rows:
            if value is not None:
                settings[scope][key] = value
        return settings

    def _latest_settings(self, ref: TopicRef) -> exp.Select:
        """(scope, key, value): the newest value of each policy set at a scope that applies to the topic (NULL:
        unset)."""
        return (
            exp.select("scope", "key", "value").from_(catalog_table("seqdedup_policies")).where(_applying_to(ref))
            .qualify("row_number() OVER (PARTITION BY scope, target, key ORDER BY version DESC) = 1")
        )

    def creation(self, ref: TopicRef) -> Creation:
        """What creating ``ref`` reads, in one query: whether it is registered; the highest commit number and snapshot
        id its catalog rows carry (a topic dropped outside seqdedup, or an interrupted create, may have left rows,
        which its first commit must not make visible); the policy settings that apply to it, and the highest policy
        version."""
        registered, settings, numbers = self._lookup(ref, creating=True)
        if not registered:       # a value that cannot be read is refused before anything is created
            policy.resolve(settings, ref.key)
        return Creation(registered=registered, written=numbers["numbers"][0], snapshot_id=numbers["numbers"][1],
                        settings=settings, version=numbers["version"][0])

    def _lookup(self, ref: TopicRef, *, creating: bool = False) -> tuple[bool, dict[str, dict[str, str]], dict]:
        """Whether ``ref`` is registered and its policy settings, in one query (on Spark each query costs a job or
        more, most of what a small one costs; about half a second in a new driver); ``creating``, also what
        ``creation`` needs, as kind -> (number, snapshot_id).

        The query is one aggregate over the rows of each part, grouped by (kind, scope, key, value): one shuffle,
        where an aggregate or a window per part took four on Spark. A setting's rows keep their highest version
        per value, and the newest of a key is picked here (a topic's settings are a few rows)."""
        no_text, no_number = exp.cast(exp.null(), "text"), exp.cast(exp.null(), "bigint")

        def rows(kind: str, source: exp.Expression, number: exp.Expression, snapshot_id: exp.Expression = no_number,
                 scope: exp.Expression = no_text, key: exp.Expression = no_text,
                 value: exp.Expression = no_text) -> exp.Select:
            return exp.select(literal(kind).as_("kind"), scope.as_("scope"), key.as_("key"), value.as_("value"),
                              number.as_("number"), snapshot_id.as_("snapshot_id")).from_(source)

        # (a registered topic's id shape rides in its snapshot_id slot: its id_parts, 0 for integer ids)
        parts = [rows("registered", catalog_table("seqdedup_topics"), literal(1),
                      exp.func("coalesce", exp.column("id_parts"), literal(0)))
                 .where(exp.column("topic").eq(literal(ref.key))),
                 rows("setting", catalog_table("seqdedup_policies"), exp.column("version"), scope=exp.column("scope"),
                      key=exp.column("key"), value=exp.column("value")).where(_applying_to(ref))]
        if creating:
            parts += [rows("numbers", self._catalog_rows(ref).subquery("n"), exp.column("commit_id"),
                           exp.column("snapshot_id")),
                      rows("version", catalog_table("seqdedup_policies"), exp.column("version"))]
        grouped = ("kind", "scope", "key", "value")
        query = exp.select(*grouped, exp.Max(this=exp.column("number")).as_("number"),
                           exp.Max(this=exp.column("snapshot_id")).as_("snapshot_id")).from_(
            exp.union(*parts, distinct=False).subquery("parts")).group_by(*grouped)
        numbers = {"registered": (0, None), "numbers": (0, 1), "version": (0, None)}
        latest: dict[tuple[str, str], tuple[int, str | None]] = {}
        for kind, scope, key, value, number, snapshot_id in self.executor.fetchall(query):
            if kind == "setting":
                number = -1 if number is None else number      # (a row written by hand without a version)
                if (scope, key) not in latest or number > latest[scope, key][0]:
                    latest[scope, key] = (number, value)
            else:
                numbers[kind] = (number or 0, (snapshot_id or 0) + 1)
        settings = [(scope, key, value) for (scope, key), (_, value) in latest.items()]
        return numbers["registered"][0] > 0, self._settings_of(settings), numbers

    def set_policies(self, scope: str, target: str, values: dict[str, object], now: dt.datetime,
                     base: int | None = None) -> None:
        """Record settings (``None`` unsets) at one scope, as new rows; validates every value first. ``base``: the
        highest policy version, where the caller read it already (``creation``)."""
        rows = [policy.normalize(k, v) for k, v in values.items()]
        if not rows:
            return
        if base is None:       # (a topic's creation checked what applies to it: ``creation``)
            self._check_change(scope, target, dict(rows))
            versions = exp.select(_highest("version")).from_(catalog_table("seqdedup_policies"))
            base = self.executor.fetchall(versions)[0][0]
        selects = [
            exp.select(literal(scope), literal(target), literal(key),
                       exp.cast(literal(value), "text") if value is not None else exp.cast(exp.null(), "text"),
                       literal(base + i + 1), literal(now))
            for i, (key, value) in enumerate(rows)
        ]
        body = selects[0]
        for select in selects[1:]:
            body = exp.union(body, select, distinct=False)
        self.executor.execute(exp.insert(body, catalog_table("seqdedup_policies")))

    def history(self, ref: TopicRef) -> list[Policies]:
        """The policies that applied to the topic after each change of a setting that applies to it, oldest first
        (``policies.history``)."""
        rows = self.executor.fetchall(exp.select("scope", "key", "value").from_(catalog_table("seqdedup_policies"))
                                      .where(_applying_to(ref)).order_by("version"))
        return policy.history(rows)

    def _check_change(self, scope: str, target: str, values: dict[str, str | None]) -> None:
        """Refuse, before anything is written, a change after which a topic would read a policy value that cannot be
        read (``policies.check_change``). One read of the policy rows and one of the registry."""
        rows = self.executor.fetchall(exp.select("scope", "target", "key", "value", "version").from_(
            catalog_table("seqdedup_policies")))
        policy.check_change(rows, scope, target, values, [(ref.key, ref.namespace) for ref in self.topics()])

    # --- commits --------------------------------------------------------------------------------------------

    def next_commit(self, ref: TopicRef, written: int | None = None) -> int:
        """The number the topic's next commit takes: above every published one, and above every number any
        catalog row carries (a commit that wrote rows and then failed is never reused, so its rows stay ignored).
        ``ref`` may also be a consumer's output table, whose commits write ``seqdedup_consumers`` rows. Where
        several processes publish (``contended``), the last published one + 1: see ``EngineAdapter.contended``.
        ``written``: what ``highest_written_commit`` gives, when the caller read it already."""
        if self.executor.contended:
            return self.executor.storage.last_published_commit(ref) + 1
        if written is None:
            written = self.executor.fetchall(self.highest_written_commit(ref))[0][0]
        return max(written, self.executor.storage.last_published_commit(ref)) + 1

    def highest_written_commit(self, ref: TopicRef) -> exp.Select:
        """A one-row query of the highest commit number a catalog row of ``ref`` carries (0: none), as
        ``written``."""
        return exp.select(exp.alias_(_highest("commit_id"), "written")).from_(self._catalog_rows(ref).subquery("n"))

    def _catalog_rows(self, ref: TopicRef) -> exp.Expression:
        """(commit_id, snapshot_id) of every catalog row of ``ref``: its snapshots', its run log's, its ledger's, its
        holes' and its consumers' (snapshot_id NULL on all but the first)."""
        where = exp.column("topic").eq(literal(ref.key))
        return exp.union(
            exp.select("commit_id", "snapshot_id").from_(catalog_table("producer_sequences")).where(where.copy()),
            *[exp.select("commit_id", exp.cast(exp.null(), "bigint").as_("snapshot_id")).from_(catalog_table(name))
              .where(where.copy()) for name in ("seqdedup_statements", "seqdedup_dropped", "seqdedup_gaps",
                                                "seqdedup_consumers")],
            distinct=False)

    def run_log(self, ref: TopicRef) -> exp.Select:
        """The topic's rows of the run log ``seqdedup_statements``, of published commits only."""
        return exp.select("*").from_(catalog_table("seqdedup_statements")).where(
            exp.and_(exp.column("topic").eq(literal(ref.key)), self.executor.storage.visible_commits(ref)))

    def dropped(self, ref: TopicRef) -> exp.Select:
        """The topic's rows of the ledger of dropped entries ``seqdedup_dropped``, of published commits only."""
        return exp.select("*").from_(catalog_table("seqdedup_dropped")).where(
            exp.and_(exp.column("topic").eq(literal(ref.key)), self.executor.storage.visible_commits(ref)))

    def snapshot_headers(self, ref: TopicRef) -> exp.Select:
        """The header rows of the topic's snapshots, of published commits only."""
        return exp.select("*").from_(catalog_table("producer_sequences")).where(exp.and_(
            exp.column("topic").eq(literal(ref.key)), exp.column("producer").is_(exp.null()),
            self.executor.storage.visible_commits(ref)))

    # --- snapshots (R7, R8, R10, R11) ------------------------------------------------------------------------

    def last_snapshot(self, ref: TopicRef) -> SnapshotHeader:
        """The chain the topic's state is made of (``SnapshotHeader``), as of its last complete snapshot."""
        header = chain_of(complete_snapshots(self.executor.fetchall(
            snapshot_headers_query(ref.key, self.executor.storage.visible_commits(ref)))))
        if header is None:
            raise CatalogError(f"topic {ref.key} has no complete snapshot in producer_sequences (its rows were "
                               "deleted, or the table restored from a backup older than the topic): the catalog is "
                               "damaged; restore producer_sequences from a backup of this database, or rebuild the "
                               f"topic's state from its log with `seqdedup recover {ref.key} --repair`. Nothing was "
                               "written")
        return header

    def last_position(self, ref: TopicRef, header: SnapshotHeader) -> int:
        return self.executor.fetchall(last_position_query(ref.table, header.position))[0][0]

    def write_snapshot(self, ref: TopicRef, marks: exp.Expression | None, *, header: SnapshotHeader | None,
                       position: int, kind: str, now: dt.datetime, commit: int,
                       max_producers: int | None = None, parent: int | None = None, first: int | None = None,
                       id_parts: int | None = None) -> int:
        """Write a snapshot of ``marks`` (None: an empty one; a query or table; or a ``pyarrow.Table`` of marks in
        memory, appended as rows) at ``position``, an increment of ``parent`` if given; returns its id. Without a
        ``header`` (a topic's first snapshot), its id is ``first`` (``creation``) or read. ``id_parts``: a query's
        marks are composite ids (R19)."""
        snapshot_id = header.next_snapshot_id if header else first or self._next_snapshot_id(ref)
        options = dict(snapshot_id=snapshot_id, position=position, kind=kind, now=now, commit=commit,
                       max_producers=max_producers, parent=parent)
        if isinstance(marks, exp.Expression):
            self.executor.execute(snapshot_insert(ref.key, marks, id_parts=id_parts, **options))
        else:
            self.executor.append_rows(catalog_table("producer_sequences"), snapshot_rows(
                ref.key, marks, attempt=self.executor.storage.attempt(ref), **options))
        return snapshot_id

    def size(self, ref: TopicRef) -> dict[str, int]:
        """How many rows the topic has in the catalog: snapshot rows, snapshots, run log rows (every row, of
        published commits or not: what the tables hold)."""
        topic = exp.column("topic").eq(literal(ref.key))
        snapshots = exp.select(exp.Count(this=exp.Star()).as_("rows"),
                               exp.func("count_if", exp.column("producer").is_(exp.null())).as_("headers")).from_(
            catalog_table("producer_sequences")).where(topic)
        statements = exp.select(exp.Count(this=exp.Star()).as_("log_rows")).from_(
            catalog_table("seqdedup_statements")).where(topic.copy())
        # one query for both counts (on Spark each query costs a job)
        rows, headers, log_rows = self.executor.fetchall(exp.select("*").from_(snapshots.subquery("s")).join(
            statements.subquery("l"), join_type="cross"))[0]
        return {"snapshot_rows": rows, "snapshots": headers, "run_log_rows": log_rows}

    # --- retention -------------------------------------------------------------------------------------------

    def prune_snapshots(self, ref: TopicRef, header: SnapshotHeader, before: dt.datetime) -> None:
        """Once ``header``, a full snapshot, is written: remove the topic's snapshots older than it, taken at or
        before ``before``, except the last start (``SnapshotHeader.start_id``, which ``seqdedup recover`` checks from).
        Recovery needs none of them. Rows of failed commits go too."""
        old = [exp.column("topic").eq(literal(ref.key)), exp.column("snapshot_id") < literal(header.snapshot_id),
               exp.column("taken_at") <= literal(before)]
        if header.start_id is not None:
            old.append(exp.column("snapshot_id").neq(literal(header.start_id)))
        self.executor.storage.delete_rows(catalog_table("producer_sequences"), exp.and_(*old))

    def prune_run_log(self, ref: TopicRef, before: dt.datetime) -> None:
        """Remove the topic's run log rows written before ``before``."""
        self.executor.storage.delete_rows(catalog_table("seqdedup_statements"), exp.and_(
            exp.column("topic").eq(literal(ref.key)), exp.column("executed_at") < literal(before)))

    def prune_dropped(self, ref: TopicRef, before: dt.datetime) -> None:
        """Remove the topic's ledger rows of entries dropped before ``before``."""
        self.executor.storage.delete_rows(catalog_table("seqdedup_dropped"), exp.and_(
            exp.column("topic").eq(literal(ref.key)), exp.column("dropped_at") < literal(before)))

    def prune_gaps(self, ref: TopicRef, before: dt.datetime) -> None:
        """Remove the topic's rows of holes found before ``before``."""
        self.executor.storage.delete_rows(catalog_table("seqdedup_gaps"), exp.and_(
            exp.column("topic").eq(literal(ref.key)), exp.column("found_at") < literal(before)))

    def gaps(self, ref: TopicRef) -> exp.Select:
        """The topic's rows of holes ``seqdedup_gaps`` (R17), of published commits only."""
        return exp.select("*").from_(catalog_table("seqdedup_gaps")).where(
            exp.and_(exp.column("topic").eq(literal(ref.key)), self.executor.storage.visible_commits(ref)))

    def _next_snapshot_id(self, ref: TopicRef) -> int:
        """For a topic's first snapshot: above any id an interrupted earlier attempt may have left."""
        return self.executor.fetchall(self._next_snapshot_id_query(ref))[0][0]

    def _next_snapshot_id_query(self, ref: TopicRef) -> exp.Select:
        return (exp.select(exp.alias_(_highest("snapshot_id") + literal(1), "snapshot_id"))
                .from_(catalog_table("producer_sequences")).where(exp.column("topic").eq(literal(ref.key))))
