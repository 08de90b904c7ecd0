"""What an engine adapter gives the engine-neutral core: run trees, read rows, describe tables, commit atomically.

Engine differences are capability flags on the adapter class, never ``if engine == ...`` in the core.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterator

from sqlglot import exp

from seqdedup.catalog.names import ARRIVAL
from seqdedup.catalog.schema import (FOREIGN_COLUMNS, IN_CATALOG, SYSTEM_COLUMNS, create_table, foreign_commits,
                                     written_by_seqdedup)
from seqdedup.catalog.state import literal

#: The named parameters bound now, per thread and adapter (``EngineAdapter.parameters``).
_BOUND = threading.local()
#: The threads that run reads alongside their callers' (``EngineAdapter.alongside``): started on first use, and
#: named so.
_readers: concurrent.futures.ThreadPoolExecutor | None = None
_readers_lock = threading.Lock()
_READER = "seqdedup-reader"


class EngineAdapter:
    """One connection to one engine. Subclasses set the flags and implement the primitives."""

    #: sqlglot dialect the adapter's SQL is generated in.
    DIALECT: str = ""
    #: Namespace a topic lands in when its name has none.
    DEFAULT_NAMESPACE: str = ""
    #: One transaction can cover the topic insert, the snapshot and the run log (else the adapter publishes atomically its own way).
    SUPPORTS_TRANSACTIONS: bool = False
    #: Type names (upper case, parameters dropped) a producer name and a sequence id may have.
    STRING_TYPES: frozenset[str] = frozenset()
    INTEGER_TYPES: frozenset[str] = frozenset()

    #: The engine reads Spark SQL's file sources itself (``parquet.`path```, ``CREATE TEMPORARY VIEW v USING csv
    #: OPTIONS (path ...)``); else the session translates them to the engine's readers (sql/sources.py).
    READS_SPARK_FILE_SOURCES: bool = False
    #: The engine's row_number() needs an ORDER BY (Spark); positions are then numbered in key order.
    ROW_NUMBER_NEEDS_ORDER: bool = False
    #: Type names of an all-NULL column (the validation then names the NULLs).
    NULL_TYPES: frozenset[str] = frozenset({"NULL", "VOID"})

    read_only: bool = False
    #: The engine catalog topics are qualified with, when the engine needs it (DuckDB: the attached database).
    DATABASE: str | None = None

    #: The plan a statement runs by default (see sql/plan/): "window" (one pass, a sort by producer), "rows" (the
    #: rows read once into a table whose rows the engine numbers, the few that are not written removed from it,
    #: then one write) or "exceptions" (a narrow decision on the keys, then one filtered write).
    PLAN: str = "exceptions"
    #: The engine's hash of any columns (the check that a statement's own expressions compute, statement.py).
    KEY_HASH: str = "hash"
    #: Above this many producers in a topic's state, a statement reads the producers it carries first and joins
    #: only their marks (a semi-join, seqdedup/core/marks.py finds them without a pass over every mark), rather than
    #: giving every mark to the engine (None: never).
    SEMI_JOIN_ABOVE: int | None = None
    #: At most this many marks enter the window plan as one map, a parameter looked up per entry, rather than as a
    #: relation joined (``sql.plan.marks_lookup``; None: always a relation). Spark broadcasts a joined relation in a
    #: job of its own, however small; a map lookup scans the map's keys, so it pays only for a few marks.
    MARKS_AS_MAP: int | None = None
    #: A statement the engine estimates at most this large is decided in one task, without a shuffle (``gather``
    #: in ``sql.plan.window_decisions``; None: never).
    ONE_TASK_BYTES: int | None = None
    #: The engine's function that fails a query with a message (None: none is used). The window plan calls it at an
    #: invalid entry, so that such a statement fails as its rows are read (``sql.plan.window_decisions``).
    RAISE_ERROR: str | None = None
    #: The engine publishes commits itself and says which are published (Spark: the topic's partitions); where it
    #: does not, every commit that ended is published (a transaction).
    TRACKS_COMMITS: bool = False
    #: A read may run on another thread while the caller's next ones run (``alongside``): the engine is a server
    #: that runs queries at once, each mostly waited for (Spark Connect).
    READS_ALONGSIDE: bool = False

    @property
    def PARTITIONS(self) -> int | None:
        """How many partitions the window plan distributes a statement's entries over (None: the engine decides
        and takes no hint)."""
        return None

    @property
    def exclusive(self) -> bool:
        """No other process can publish to this database while the adapter is open (DuckDB locks its file; a
        local Spark home is locked by its process), so a topic's state in memory stays true without a check."""
        return True

    @property
    def lease_store(self):
        """Where the database's named producers hold leases on their names (R14 across processes:
        ``seqdedup.core.leases.Store``); None where no other process can write the database while this adapter is open
        (``exclusive``), so that refusing a second live producer inside the process is the whole of R14."""
        return None

    @contextlib.contextmanager
    def parameters(self, values: dict) -> Iterator[None]:
        """Run the statements inside with these named parameters bound: a statement's varying values (its base
        position, commit, time) are parameters, so that its SQL text is the same from one statement to the next and
        is generated once (seqdedup/core/statement.py)."""
        # (per thread: threads may share a session, each running its own statement)
        bound = _BOUND.__dict__.setdefault("values", {})
        before = bound.get(id(self), {})
        bound[id(self)] = {**before, **values}
        try:
            yield
        finally:
            bound[id(self)] = before

    def bound(self, text: str, marker: str) -> dict | None:
        """The parameters ``text`` uses (written ``<marker>name``), with their values; None when it uses none."""
        values = _BOUND.__dict__.get("values", {}).get(id(self), {})
        used = {k: v for k, v in values.items() if f"{marker}{k}" in text}
        return used or None

    def alongside(self, read: Callable[[], object]) -> concurrent.futures.Future:
        """Start ``read``, a function that reads through this adapter (a query, a topic's recovery) and changes
        nothing the caller's next calls read: on another thread where the engine runs queries at once
        (``READS_ALONGSIDE``), with this thread's parameters bound there too; else now, on this one. Its future:
        ``result()`` gives its value, or raises its error."""
        # (a read started from a reader runs on it: readers waiting for reads queued behind them would never end)
        if not self.READS_ALONGSIDE or threading.current_thread().name.startswith(_READER):
            done: concurrent.futures.Future = concurrent.futures.Future()
            try:
                done.set_result(read())
            except Exception as error:
                done.set_exception(error)
            return done
        global _readers
        with _readers_lock:
            if _readers is None:
                _readers = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix=_READER)
        bound = dict(_BOUND.__dict__.get("values", {}).get(id(self), {}))

        def run():
            with self.parameters(bound):
                return read()
        return _readers.submit(run)

    def execute(self, statement: exp.Expression | str) -> None:
        raise NotImplementedError

    def fetchall(self, query: exp.Expression | str, *, committed: bool = False) -> list[tuple]:
        """Rows of a query. ``committed``: read only committed data, from any thread, outside a running statement."""
        raise NotImplementedError

    def fetch_arrow(self, query: exp.Expression, *, committed: bool = False):
        """A query's rows as a ``pyarrow.Table``."""
        raise NotImplementedError

    def relation(self, name: str, table, *, committed: bool = False) -> exp.Table:
        """A pyarrow Table readable by name (``name``, dropped with ``drop_temp_table``) without copying it row by
        row through Python: the producers' marks enter a statement this way."""
        raise NotImplementedError

    def append_rows(self, table: exp.Table, rows) -> None:
        """Append the rows of a ``pyarrow.Table`` (columns named as ``table``'s) to a catalog table, as part of the
        open commit (a statement's run log)."""
        if not rows.num_rows:
            return
        name = f"__sd_append_{uuid.uuid4().hex[:12]}"
        relation = self.relation(name, rows)
        try:
            self.execute(exp.insert(exp.select(*rows.column_names).from_(relation), table.copy(),
                                    columns=rows.column_names))
        finally:
            self.drop_temp_table(name)

    def marks_map(self, table):
        """The marks of an Arrow table ``(producer, sequence_id)`` as a map to bind to a parameter
        (``MARKS_AS_MAP``): producer -> its mark as a string (``-1`` where it has none)."""
        raise NotImplementedError

    def constant(self, value: exp.Expression) -> exp.Expression:
        """A value that changes from one statement to the next (a parameter), as the engine best takes it in a
        small statement it runs often (where the fixed costs of a statement are most of its cost)."""
        return value

    def fits_one_task(self, query: exp.Expression) -> bool:
        """Whether the engine estimates ``query``'s rows at most ``ONE_TASK_BYTES``."""
        return False

    def binary(self, text: exp.Expression) -> exp.Expression:
        """``text`` compared byte for byte, whatever collation it carries (a producer name is its bytes)."""
        return text

    def row_number(self) -> exp.Expression:
        """A number for each row of the window plan's output, unique within the statement, from 1."""
        return exp.Window(this=exp.RowNumber())

    def fetch_with_columns(self, statement: exp.Expression | str) -> tuple[list[str], list[tuple]]:
        """The names of the columns a statement returns, as the engine names them, and its rows."""
        raise NotImplementedError

    def execute_count(self, statement: exp.Expression) -> int | None:
        """Run a write; the number of rows it wrote, when the engine says."""
        self.execute(statement)
        return None

    def query_columns(self, query: exp.Expression) -> list[tuple[str, str]]:
        """(name, type) of the columns a query returns, without running it."""
        raise NotImplementedError

    def columns(self, table: exp.Table, *, committed: bool = False) -> list[tuple[str, str]]:
        """(name, type) of a table's columns, in order; [] when the table does not exist."""
        raise NotImplementedError

    def tables_columns(self, tables: list[exp.Table]) -> list[list[tuple[str, str]]]:
        """``columns`` of each table, in one round trip where the engine allows it (every ``connect`` checks the
        catalog's tables)."""
        return [self.columns(table) for table in tables]

    def committed_reads(self) -> "CommittedReads":
        return CommittedReads(self)

    def temp_table(self, name: str) -> exp.Table:
        """The table a temporary result called ``name`` is read from."""
        return exp.table_(name)

    def create_temp_table(self, name: str, query: exp.Expression) -> exp.Table:
        raise NotImplementedError

    def temp_table_rows(self, table: exp.Table) -> int:
        """How many rows a temporary table ``create_temp_table`` made holds."""
        return self.fetchall(exp.select(exp.Count(this=exp.Star())).from_(table.copy()))[0][0]

    def drop_temp_table(self, name: str) -> None:
        raise NotImplementedError

    def has_temp_table(self, name: str) -> bool:
        """Whether a temporary table or view ``name`` (a registered DataFrame, the user's own) exists in this
        session: an unqualified name reads it before any table of the same name."""
        raise NotImplementedError

    def drop_temp_tables(self, names: list[str]) -> None:
        for name in names:
            self.drop_temp_table(name)

    def load_arrow(self, name: str, table) -> exp.Table:
        """A temporary table ``name`` holding a ``pyarrow.Table``'s rows, in its order."""
        raise NotImplementedError

    def load_dataframe(self, name: str, frame, *, numbered: bool = True) -> exp.Table:
        """A temporary table ``name`` holding a Spark DataFrame's rows (read through Arrow by engines other
        than Spark), with a column ``ARRIVAL`` numbering them from 0 in the frame's order (unless not ``numbered``)."""
        import pyarrow as pa

        table = frame.toArrow()
        if numbered:
            table = table.append_column(ARRIVAL, pa.array(range(table.num_rows), pa.int64()))
        return self.load_arrow(name, table)

    @property
    def identity(self) -> str:
        """What tells this adapter's database apart from others in this process (R14: live producer names)."""
        return f"{type(self).__name__}:{id(self)}"

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Everything inside commits together or not at all."""
        raise NotImplementedError

    # --- commits: how a topic commit is published (see catalog/schema.py) ------------------------------------

    def create_topic_table(self, table: exp.Table, columns: dict[str, exp.DataType]) -> None:
        # the engine itself refuses a row that leaves a system column out (a row written around seqdedup)
        self.execute(create_table(table, columns, exists=False, not_null=[n for n in columns if n in SYSTEM_COLUMNS]))

    def create_catalog_table(self, table: exp.Table, columns: dict[str, exp.DataType]) -> bool:
        """Create a catalog table if it does not exist; whether it did."""
        if self.columns(table):
            return False
        self.execute(create_table(table, columns))
        return True

    def open_commit(self, topic, commit: int) -> None:
        """A commit of ``topic`` (a TopicRef) begins; this adapter's own reads see its rows until it ends."""

    @property
    def contended(self) -> bool:
        """Whether other processes may publish commits of the same tables (several Spark drivers on one metastore).
        Then a commit's number is always the last published one + 1, even where a failed attempt left rows under
        that number (their ``attempt`` tells them apart): registering it is the compare-and-set that admits one
        commit per state, which a number skipped past a failed one would not be."""
        return False

    @property
    def listing_ttl(self) -> float | None:
        """Seconds a look at a topic's published commits stays good for publishing a commit after it (None: for
        ever). Past it, the writer looks again before it publishes: where a compaction frees the numbers of the
        commits it merged (drops their partitions) some time after, a commit decided on an older look could
        register a number that was published already."""
        return None

    def refresh(self, *tables: exp.Table) -> None:
        """Forget what this process knows of ``tables``' files, where another process may have written them since."""

    def check_settings(self) -> None:
        """Raise an EngineError where the session has a setting that changes how seqdedup's own queries compare
        producer names or order entries (nothing where the engine has none: Spark's session collation does not
        change a string's, and seqdedup holds what it needs, ``SparkAdapter.SETTINGS``)."""

    def attempt(self, topic) -> str | None:
        """The open commit's attempt id, written in its catalog rows where another process may take the same commit
        number (``catalog.schema.COMMITS``); None where one process writes."""
        return None

    def write_topic(self, topic, insert: exp.Insert, *, rows: int | None = None) -> int | None:
        """Write the open commit's topic rows (``insert``, at most ``rows`` of them where the caller knows); the
        number written, when the engine says."""
        return self.execute_count(insert)

    def write_decided(self, topic, decided: exp.Select, keep: str, insert_for: Callable[[exp.Expression], exp.Insert],
                      metrics: dict[str, exp.Expression], outcome: list[exp.Expression], last: str,
                      proceed: Callable[[dict], bool], name: str) -> "Decided":
        """The window plan's write: the rows of ``decided`` whose column ``keep`` is true, through the INSERT that
        ``insert_for`` makes of them; the ``metrics`` (aggregates over every row of ``decided``) and the
        ``outcome`` columns of its ``last`` rows (one per producer). ``name``: a temporary name free for the decided
        rows, the same from one statement of this shape to the next (so is the SQL that reads them).

        Here the decided rows are materialized once, the metrics read first, and nothing is written unless
        ``proceed(metrics)``. An engine that can observe a job (Spark) does it all in one pass and writes anyway:
        the caller then discards the commit's rows (``discard_commit_rows``)."""
        table = self.create_temp_table(name, decided)
        try:
            values = self.fetchall(exp.select(*[exp.alias_(e.copy(), k) for k, e in metrics.items()]).from_(
                table.copy()))[0]
            got = dict(zip(metrics, values))
            if not proceed(got):
                return Decided(got)
            self.write_topic(topic, insert_for(exp.select("*").from_(table.copy()).where(exp.column(keep))))
            rows = self.fetch_arrow(exp.select(*[e.copy() for e in outcome]).from_(table.copy()).where(
                exp.column(last)))
            return Decided(got, rows)
        finally:
            self.drop_temp_table(table.name)

    def discard_commit_rows(self, topic) -> None:
        """Forget the topic rows the open commit wrote (they were never published); the commit goes on."""

    def published_commits(self, topic) -> set[int]:
        """The topic's published commits, where the engine tracks them (``TRACKS_COMMITS``); else empty."""
        return set()

    def publish(self, topic) -> None:
        """Make the open commit's rows visible, all at once. With transactions the COMMIT does it."""

    def close_commit(self, topic) -> None:
        """The commit ended, published or not."""

    def last_published_commit(self, topic) -> int:
        """The highest commit of the topic known published outside the catalog rows (0: none, or not tracked)."""
        return 0

    def visible_commits(self, topic, *, include_open: bool = True) -> exp.Expression:
        """A condition on ``commit_id`` that keeps the catalog rows of published commits (and of the commit this
        adapter has open). With transactions every row a reader can see is published."""
        return exp.true()

    # --- foreign rows: what another tool wrote into a topic (seqdedup/core/foreign.py) --------------------------------

    def own_rows(self, topic) -> exp.Expression:
        """A condition that keeps the rows of ``topic`` seqdedup wrote (``catalog.schema.written_by_seqdedup``): in
        none of its foreign partitions, with every system column set."""
        return written_by_seqdedup(foreign_commits(self.foreign_partitions(topic)))

    def foreign_partitions(self, topic) -> list[str]:
        """The partitions of the topic's table seqdedup did not publish, each ``_commit`` value as the engine spells
        it, where the engine tracks commits (``TRACKS_COMMITS``); else none."""
        return []

    def move_foreign_rows(self, topic, side: exp.Table, now) -> int:
        """Move the topic's foreign rows into ``side`` (created with the topic's columns and FOREIGN_COLUMNS when it
        does not exist), in one transaction; the number of rows moved. From then on the topic's system columns are
        NOT NULL, as a new topic's are: the engine refuses a row without them."""
        foreign = exp.not_(self.own_rows(topic))
        with self.transaction():
            count = self.fetchall(exp.select(exp.Count(this=exp.Star())).from_(topic.table.copy()).where(
                foreign.copy()))[0][0]
            if count:
                extra = [exp.alias_(exp.cast(exp.null(), kind), name) for name, kind in FOREIGN_COLUMNS.items()]
                if not self.columns(side):      # the topic's columns and types, without its constraints
                    self.execute(exp.Create(this=side.copy(), kind="TABLE", expression=exp.select(
                        "*", *extra).from_(topic.table.copy()).where(exp.false())))
                move = self.fetchall(exp.select(exp.func("coalesce", exp.Max(this=exp.column("_move")), literal(0))
                                                + 1).from_(side.copy()))[0][0]
                names = [exp.column(name, quoted=True) for name, _ in self.columns(topic.table)]
                self.execute(exp.insert(exp.select(*names, extra[0], literal(now), literal(move)).from_(
                    topic.table.copy()).where(foreign.copy()), side.copy()))
                self.delete_rows(topic.table, foreign)
            for name in SYSTEM_COLUMNS:
                self.execute(exp.Alter(this=topic.table.copy(), kind="TABLE", actions=[
                    exp.AlterColumn(this=exp.to_identifier(name), allow_null=False)]))
        return count

    def delete_rows(self, table: exp.Table, condition: exp.Expression) -> None:
        """Delete the rows of ``table`` where ``condition`` holds, at once (``seqdedup topic drop``)."""
        self.execute(exp.delete(table.copy(), where=condition.copy()))

    # --- compaction: a topic's commits merged into fewer partitions (seqdedup/core/compaction.py) ----------------

    @contextlib.contextmanager
    def listed_once(self, topic) -> Iterator[None]:
        """Within, the topic's partitions are listed at most once, where the engine keeps them (a recovery asks for
        them several times, ``Session.stats`` more around one). Nested, the outermost one's listing serves. A writer
        holds the lock around it; what the adapter changes itself is listed again."""
        yield

    def partition_ranges(self, topic) -> list[tuple[int, int]]:
        """The commits (first, last) each of the topic's partitions holds, in commit order, where the engine keeps a
        partition per commit (``TRACKS_COMMITS``); else none: the topic is one table, with nothing to merge."""
        return []

    def drop_merged(self, topic) -> int:
        """Drop the partitions a compaction cut short merged into another but did not drop; how many."""
        return 0

    def merge_partitions(self, topic, ranges: list[tuple[int, int]]) -> int:
        """Merge the consecutive partitions holding ``ranges`` into one; the rows it holds."""
        raise NotImplementedError

    def drop_topic_table(self, topic) -> None:
        """Drop the table of ``topic`` (a TopicRef), with its rows (``seqdedup topic drop``)."""
        self.execute(exp.Drop(tables=[topic.table.copy()], kind="TABLE", exists=True))

    def register_functions(self) -> None:
        """Register the function set on the connection: guards for the rewritten functions, real ones for the rest."""
        raise NotImplementedError

    def keep_guards(self) -> None:
        """Keep the guards in the catalog's database, for sessions that never connect through seqdedup, where the
        engine keeps functions (Spark's metastore); elsewhere nothing."""

    def file_rows(self, path: str, fmt: str, row_column: str) -> exp.Select:
        """A query of a file's rows (json lines, csv or parquet), numbered from 1 in file order as ``row_column``."""
        raise NotImplementedError

    def check_name(self, part: str) -> None:
        """Raise a TopicError when the engine's catalog cannot hold a table or namespace of this name."""

    def create_namespace(self, name: str) -> None:
        database = exp.to_identifier(self.DATABASE, quoted=True) if self.DATABASE else None
        self.execute(exp.Create(this=exp.Table(this=exp.to_identifier(name, quoted=True), db=database), kind="SCHEMA",
                                exists=True))

    def close(self) -> None:
        raise NotImplementedError

    def sql(self, tree: exp.Expression) -> str:
        """The text the engine runs for ``tree``. A tree the statement path keeps from one statement to the next
        (``tree.meta["kept"]``) is generated once."""
        if not tree.meta.get("kept"):
            return self._generate(tree)
        texts = self.__dict__.setdefault("_texts", {})
        text = texts.get(id(tree))
        if text is None or text[0] is not tree:
            if len(texts) > 1024:
                texts.clear()
            text = texts[id(tree)] = (tree, self._generate(tree))
        return text[1]

    def _generate(self, tree: exp.Expression) -> str:
        """An engine looks up a name without a database in the session's current one at each query, and the user may
        change it (``USE``, DuckDB's ``ATTACH``) or hide a table behind a temporary one of the same name: seqdedup's
        own tables (``IN_CATALOG``) are named with the database the catalog is in, where ``connect`` found it
        (``DEFAULT_NAMESPACE``, in ``DATABASE`` where the engine has several)."""
        def unqualified(table: exp.Table) -> bool:
            return table.args.get("db") is None and table.meta.get(IN_CATALOG, False)

        if any(map(unqualified, tree.find_all(exp.Table))):
            tree = tree.copy()      # (the caller's tree, kept ones and shared templates too, stays as built)
            for table in filter(unqualified, list(tree.find_all(exp.Table))):
                table.set("db", exp.to_identifier(self.DEFAULT_NAMESPACE, quoted=True))
                if self.DATABASE:
                    table.set("catalog", exp.to_identifier(self.DATABASE, quoted=True))
        return tree.sql(dialect=self.DIALECT)


@dataclass
class Decided:
    """What ``write_decided`` reports: the metrics, and the outcome rows (a pyarrow Table or a list of dicts)."""

    metrics: dict
    outcome: object = field(default=None)


class CommittedReads:
    """An adapter seen through its readers: every read sees committed data only, from any thread."""

    def __init__(self, adapter: EngineAdapter):
        self._adapter = adapter

    def __getattr__(self, name: str):
        return getattr(self._adapter, name)

    def fetchall(self, query: exp.Expression | str, *, committed: bool = True) -> list[tuple]:
        return self._adapter.fetchall(query, committed=True)

    def columns(self, table: exp.Table, *, committed: bool = True) -> list[tuple[str, str]]:
        return self._adapter.columns(table, committed=True)

    def fetch_arrow(self, query: exp.Expression, *, committed: bool = True):
        return self._adapter.fetch_arrow(query, committed=True)

    def visible_commits(self, topic, *, include_open: bool = False) -> exp.Expression:
        return self._adapter.visible_commits(topic, include_open=False)
