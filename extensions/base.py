"""What an engine adapter gives the engine-neutral core: run trees, read rows, describe tables, commit atomically.

Engine differences are capability flags on the adapter class, never ``if engine == ...`` in the core.
"""
from __future__ import annotations

import contextlib
import functools
import uuid
from typing import Iterator

from sqlglot import exp

from seqdedup.catalog.names import ARRIVAL

from . import binding, rendering
from .storage import TransactionalStorage

class EngineAdapter:
    """One connection to one engine. Subclasses set the flags and implement the primitives."""

    #: sqlglot dialect the adapter's SQL is generated in.
    DIALECT: str = ""
    #: Namespace a topic lands in when its name has none.
    DEFAULT_NAMESPACE: str = ""
    #: One transaction can cover the topic insert, the snapshot and the run log (else the adapter publishes atomically
    #: its own way).
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
    #: A statement that carries more than 1/WHOLE_STATE_FROM of a large state's producers (many keys, R20) joins
    #: every mark instead: finding that many names costs more than the join (None: the semi-join whatever the size).
    WHOLE_STATE_FROM: int | None = None
    #: At most this many marks enter the window plan as one map, a parameter looked up per entry, rather than as a
    #: relation joined (``sql.plan.marks_lookup``; None: always a relation). Spark broadcasts a joined relation in a
    #: job of its own, however small; a map lookup scans the map's keys, so it pays only for a few marks.
    MARKS_AS_MAP: int | None = None
    #: A row plan's statement of at most this many entries, without batch entries, that removes none of its rows (no
    #: repeat; with ORDER BY, none rejected) writes first and has its outcome worked out in Python from the keys its
    #: write returns (``seqdedup.core.plans.written_first``; None: never).
    FETCHED_OUTCOME_AT_MOST: int | None = None
    #: A statement the engine estimates at most this large is decided in one task, without a shuffle (``gather``
    #: in ``sql.plan.window_decisions``; None: never).
    ONE_TASK_BYTES: int | None = None
    #: A statement the engine estimates at most this large runs its job as a small one (``sized``; None: never).
    INTERPRETED_BYTES: int | None = None
    #: A full snapshot removes the snapshots it makes unneeded (R8's retention) only when its id is the first of
    #: a new run of this many ids since the full snapshot before it, or when the state is at least PRUNE_AT_ROWS
    #: rows; 1: at every full snapshot. Where a removal rewrites the whole table (Spark), a small state whose
    #: producers all change at each statement takes a full snapshot every other statement, and would rewrite
    #: ``producer_sequences`` as often (``seqdedup.core.snapshots.prune_due``).
    PRUNE_SPACING: int = 1
    PRUNE_AT_ROWS: int = 1_000
    #: The window plan looks at a large statement's first entries for a producer that holds more than a task's
    #: share, whose entries it then spreads over ranges of ids (``sql.plan.spread``).
    SPREADS: bool = False
    #: The engine's hash that distributes rows over partitions (a partition hint's), for the ranges' labels.
    PARTITION_HASH: str | None = None
    #: The engine's function that fails a query with a message (None: none is used). The window plan calls it at an
    #: invalid entry, so that such a statement fails as its rows are read (``sql.plan.window_decisions``).
    RAISE_ERROR: str | None = None
    #: The engine publishes commits itself and says which are published (Spark: the topic's partitions); where it
    #: does not, every commit that ended is published (a transaction).
    TRACKS_COMMITS: bool = False
    #: A read may run on another thread while the caller's next ones run (``alongside``): the engine is a server
    #: that runs queries at once, each mostly waited for (Spark Connect).
    READS_ALONGSIDE: bool = False
    #: Whether the engine takes join hints in a query (``/*+ BROADCAST(t) */``): where a small relation is joined
    #: to every row of a large one (the dropped entries' keys to a topic's rows, sql/plan/conflicts.py).
    JOIN_HINTS: bool = False
    #: A topic the engine estimates at most this large (its rows as stored) is read whole when asked what it holds
    #: for a statement's dropped ids (``reads_whole``; None: never).
    READ_WHOLE_BYTES: int | None = None

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

    # (module functions taking the adapter as their first argument, called as its methods: a statement's path
    # makes one call for each, not two)
    parameters = binding.bind
    bound = binding.bound
    alongside = binding.alongside

    def execute(self, statement: exp.Expression | str) -> None:
        raise NotImplementedError

    def fetchall(self, query: exp.Expression | str, *, committed: bool = False) -> list[tuple]:
        """Rows of a query. ``committed``: read only committed data, from any thread, outside a running statement."""
        raise NotImplementedError

    def fetch_arrow(self, query: exp.Expression, *, committed: bool = False, at_most: int | None = None):
        """A query's rows as a ``pyarrow.Table``. ``at_most``: the query gives no more rows than this (None: any
        number); an engine may fetch a few rows another way, as long as each column's type is the query's or one
        Arrow casts to it (an integer of another width; a column of NULLs as Arrow's null type)."""
        raise NotImplementedError

    def fetch_bulk(self, query: exp.Expression, *, at_most: int | None = None):
        """``fetch_arrow`` of a query that may give millions of rows (a topic's whole state, recovered): an engine
        that gathers a result in a heap of its own first may bring such rows another way. ``at_most``: the query
        gives no more rows than this (None: any number)."""
        return self.fetch_arrow(query)

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

    def marks_map(self, table, id_parts: int | None = None):
        """The marks of an Arrow table ``(producer, sequence_id)`` as a map to bind to a parameter
        (``MARKS_AS_MAP``): producer -> its mark as a string (``-1`` where it has none), or in the form the engine
        works on composite ids of ``id_parts`` parts in (``catalog.ids``)."""
        raise NotImplementedError

    def constant(self, value: exp.Expression) -> exp.Expression:
        """A value that changes from one statement to the next (a parameter), as the engine best takes it in a
        small statement it runs often (where the fixed costs of a statement are most of its cost)."""
        return value

    def estimated_size(self, query: exp.Expression) -> int | None:
        """The size of ``query``'s rows in bytes, as the engine estimates it before running it (None: it cannot
        tell); compared with ``ONE_TASK_BYTES`` and ``INTERPRETED_BYTES``."""
        return None

    def holding(self):
        """A context that holds what the engine's calls need (Spark: ``calls.SETTINGS``) across a statement's calls:
        each call holds it too, and asks the engine whether it must, which a statement would otherwise pay a dozen
        times."""
        return contextlib.nullcontext()

    @staticmethod
    def within(size: int | None, bound: int | None) -> bool:
        """Whether an estimate of ``size`` bytes is known and at most ``bound`` (a bound of None: never)."""
        return size is not None and bound is not None and size <= bound

    def small(self, size: int | None) -> bool:
        """Whether a job whose rows the engine estimates at ``size`` bytes runs as a small one (``sized``)."""
        return self.within(size, self.INTERPRETED_BYTES)

    def sized(self, small: bool):
        """A context in which a statement's job runs, set for its size: where the engine would spend more on
        preparing a small job than on running it, it prepares less (Spark: ``calls.INTERPRETED``)."""
        return contextlib.nullcontext()

    def reads_whole(self, table: exp.Table) -> bool:
        """Whether the engine estimates ``table`` at most ``READ_WHOLE_BYTES``: the payloads it holds for a
        statement's dropped ids are then found in one pass over all its columns, not in two that read the entries'
        own columns only where needed (``sql.plan.conflicts.held_by_topic``)."""
        return False

    def binary(self, text: exp.Expression) -> exp.Expression:
        """``text`` compared byte for byte, whatever collation it carries (a producer name is its bytes)."""
        return text

    def fingerprint(self, columns: list[tuple[exp.Expression, str]]) -> exp.Expression:
        """A BIGINT fingerprint of an entry's user columns ((value, its type as the topic stores it), in the topic's
        order), equal for equal values and, but for one pair in about 2^64, different for different ones (R18): the
        engine's 64-bit hash of the values, each followed by a flag of whether it is NULL (a NULL must not hash as
        any value, nor as no value at all)."""
        raise NotImplementedError

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

    def create_counted_temp_table(self, name: str, query: exp.Expression) -> tuple[exp.Table, int]:
        """``create_temp_table``, and how many rows it holds (in the same round trip where the engine says)."""
        table = self.create_temp_table(name, query)
        return table, self.temp_table_rows(table)

    def temp_table_rows(self, table: exp.Table) -> int:
        """How many rows a temporary table ``create_temp_table`` made holds."""
        return self.fetchall(exp.select(exp.Count(this=exp.Star())).from_(table.copy()))[0][0]

    def temp_table_files(self, table: exp.Table):
        """The rows of a temporary table ``create_temp_table`` made as a ``pyarrow.Table`` read from files this
        process reaches, with no query; None where they are not in such files."""
        return None

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

    def hold_arrow(self, name: str, table) -> exp.Table:
        """A ``pyarrow.Table`` readable by name, in its order, until ``drop_temp_table``: a send's rows, which its
        statement and each of its retries read. A temporary table (``load_arrow``) unless the engine reads the Arrow
        table where it lies."""
        return self.load_arrow(name, table)

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

    @functools.cached_property
    def storage(self) -> TransactionalStorage:
        """The storage protocol (extensions/storage.py: stage, publish, the commits visible, foreign rows,
        compaction), called as ``adapter.storage.publish(topic)``: the transactional form, unless the engine gives
        its own (DuckDB's ``DuckDBStorage``; Spark's ``SparkStorage``, a Hive partition per commit)."""
        return TransactionalStorage(self)

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

    def check_settings(self) -> None:
        """Raise an EngineError where the session has a setting that changes how seqdedup's own queries compare
        producer names or order entries (nothing where the engine has none: Spark's session collation does not
        change a string's, and seqdedup holds what it needs, ``SparkAdapter.SETTINGS``)."""

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

    sql = rendering.sql     # (see ``parameters``)


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

    def fetch_arrow(self, query: exp.Expression, *, committed: bool = True, at_most: int | None = None):
        return self._adapter.fetch_arrow(query, committed=True, at_most=at_most)

    @functools.cached_property
    def storage(self) -> "CommittedStorage":
        return CommittedStorage(self._adapter.storage)


class CommittedStorage:
    """A storage seen by the readers: the commits visible are the published ones only (not the open commit)."""

    def __init__(self, storage):
        self._storage = storage

    def __getattr__(self, name: str):
        return getattr(self._storage, name)

    def visible_commits(self, topic, *, include_open: bool = False) -> exp.Expression:
        return self._storage.visible_commits(topic, include_open=False)
