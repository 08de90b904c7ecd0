"""The DuckDB engine: a database file (``seqdedup.duckdb`` unless told otherwise), one transaction per statement."""
from __future__ import annotations

import contextlib
import functools
import os
import re
import threading
import time
from typing import Iterator

import duckdb
import pyarrow as pa
from sqlglot import exp

from seqdedup.catalog import ids
from seqdedup.errors import EngineError
from seqdedup.kept import Kept
from seqdedup.sql.dialects import DuckDBExplicit
from seqdedup.udfs.guards import SIGNATURES, guard_message

from . import duckdb_identity, rendering
from .base import EngineAdapter
from .storage import TransactionalStorage

DEFAULT_DATABASE = "seqdedup.duckdb"
#: What DuckDB's error says when the disk is full (ENOSPC, EFBIG past a file size limit, EDQUOT).
DISK_FULL = ("No space left on device", "File too large", "Disk quota exceeded")


def _friendly(error: duckdb.Error, path: str, *, waited: float | None = None) -> Exception:
    """An EngineError that names the problem and the fix for the DuckDB errors users meet most; an
    OutcomeUnknownError where DuckDB stopped using the database as it wrote, so that what a statement wrote is
    unknown (a checkpoint after a commit, with the disk full)."""
    from seqdedup.errors import OutcomeUnknownError

    text = str(error)
    if "Could not set lock on file" in text:
        holder = re.search(r"PID (\d+)", text)
        who = f"process {holder.group(1)}" if holder else "another process"
        after = f" (waited {waited} s for it)" if waited else ""
        return EngineError(f"the database {path} is in use by {who}{after}; DuckDB allows one process per file "
                           "while a writer has it open: stop the other process, close its session, or connect "
                           "with a longer lock_timeout")
    said = text.splitlines()[0] if text else type(error).__name__
    full = any(words in text for words in DISK_FULL)
    cause = f"the disk is full: DuckDB could not write the database {path} ({said})" if full else None
    space = "free space (or raise the file size limit, ulimit -f), then " if full else ""
    retry = "retry the statement with the same producer names and sequence ids, which seqdedup deduplicates"
    # After a fatal error DuckDB refuses every statement on the database. The error that made it fatal came as it
    # wrote (a checkpoint that could not be written, after the commit was made durable): what the statement wrote
    # is unknown. The errors after it refuse work from its start: that work wrote nothing.
    fatal = isinstance(error, duckdb.FatalException) or "database has been invalidated" in text
    if fatal and "previous fatal error" in text:
        return EngineError(f"DuckDB stopped using the database {path} after an earlier fatal error and refused this "
                           f"work, which wrote nothing ({said}); {space}close this session and connect again. The "
                           f"statement that met the first error may or may not have been written: {retry}")
    if fatal:
        return OutcomeUnknownError(
            f"{cause or f'DuckDB stopped using the database {path} after a fatal error ({said})'}. The outcome is "
            "unknown: the statement may or may not have been written (DuckDB fails so when a checkpoint after a "
            f"commit cannot be written); {space}close this session, connect again and {retry}: each entry is "
            "written once")
    if full:
        return EngineError(f"{cause}; {space}run the statement again: seqdedup writes each entry once, so a retry "
                           "is safe")
    if "Read-only file system" in text:
        return EngineError(f"the database {path} is on a read-only file system ({said}); remount it writable or "
                           "copy the file somewhere writable, or connect with read_only=True to only read")
    if "Permission denied" in text:
        return EngineError(f"this user may not write the database {path} ({said}); make the file and its folder "
                           f"writable (DuckDB writes {path}.wal beside it), or connect with read_only=True to only "
                           "read")
    if "read-only" in text.lower() or "read only" in text.lower():
        return EngineError(f"the database {path} is open read-only, so nothing can be written; connect without "
                           f"read_only=True to write (DuckDB said: {said})")
    return EngineError(f"DuckDB: {text}")


def register_functions(cursor: duckdb.DuckDBPyConnection) -> None:
    """Register the function set on a DuckDB connection (or cursor) as temporary macros: guards under the names the
    rewrite gives meaning to, which fail loudly with the way to run the statement, and ``kafka_producer_name``. Any
    connection that may see seqdedup SQL (a dbt connection, say) can take them."""
    for name in SIGNATURES:
        cursor.execute(_guard_macro(name, "CREATE OR REPLACE TEMPORARY MACRO"))
    name = exp.func("concat", exp.Literal.string("KOP-PID-PREFIX-"), exp.column("producer_id"),
                    exp.Literal.string("-"), exp.column("producer_epoch"))
    cursor.execute(f"CREATE OR REPLACE TEMPORARY MACRO kafka_producer_name(producer_id, producer_epoch) AS "
                   f"{name.sql('duckdb')}")
    # Spark's raise_error, so that one statement (and seqdedup's expansions, sql/functions.py) fails alike on both.
    cursor.execute("CREATE OR REPLACE TEMPORARY MACRO raise_error(message) AS error(message)")


def _guard_macro(name: str, create: str) -> str:
    """``create`` (the words that begin the statement) the guard macro ``name``: each of its signatures fails with
    the way to run the statement."""
    message = exp.func("error", exp.Literal.string(guard_message(name))).sql("duckdb")
    return f"{create} {name}" + ", ".join(f"({', '.join(args)}) AS {message}" for args in SIGNATURES[name])


#: The most statements ``_around`` keeps around one query.
AROUND = 4


@functools.lru_cache(maxsize=None)
def _map_type(values: str) -> duckdb.sqltypes.DuckDBPyType:
    """DuckDB's MAP(VARCHAR, ``values``), made once: making it took most of the time of a statement's marks made a
    MAP parameter (``marks_map``)."""
    return duckdb.map_type(duckdb.sqltype("VARCHAR"), duckdb.sqltype(values))


def _around(query: exp.Expression, what: str, build) -> exp.Expression:
    """The statement ``build`` makes around ``query`` (a CREATE ... AS): made once and kept with the
    query when the query is one the statement path keeps (``EngineAdapter.sql``), so its SQL is generated once."""
    around = query.meta.setdefault("around", {}) if query.meta.get("kept") else None
    # (a few statements per query, never one per name that changes: each is built from a copy of the query, the
    # statements made before it included, so kept ones must stay few)
    if around is None or (what not in around and len(around) >= AROUND):
        return build()
    if what not in around:
        around[what] = build()
        around[what].meta["kept"] = True
    return around[what]


class DuckDBAdapter(EngineAdapter):
    DIALECT = DuckDBExplicit      # (an ORDER BY means one order, whatever the session's default_order)
    DEFAULT_NAMESPACE = "main"
    SUPPORTS_TRANSACTIONS = True
    PLAN = "rows"           # its temporary tables number their rows (rowid): the row plan (sql/plan/rows.py)
    # DuckDB scans an Arrow table where it lies, but a join still reads every mark: above this, the read of the
    # statement's producers (about a millisecond) costs less
    SEMI_JOIN_ABOVE = 100_000
    WHOLE_STATE_FROM = 64
    # A few marks bound as one MAP parameter cost no registration of an Arrow table and no join (about 1 ms of a
    # 10-entry statement's 16); each row's look-up scans the map's keys, so above 16 marks the join is cheaper
    # (5M rows: the same up to 16 producers, 10 to 40% more for the step at 32 and 64).
    MARKS_AS_MAP = 16
    # A query on ten rows costs its binding, planning and pipelines whatever it reads: reading a small statement's
    # rows back (0.4 ms timed alone) costs less than the repeats' grouped aggregate and the outcome's (0.9 ms and 2
    # to 2.6 ms). At most FEW_ROWS, so that the rows come back as tuples (``fetch_arrow``).
    FETCHED_OUTCOME_AT_MOST = 256

    #: Type names (upper case, without parameters) that hold producer names and sequence ids.
    STRING_TYPES = frozenset({"VARCHAR"})
    INTEGER_TYPES = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                               "UINTEGER", "UBIGINT", "UHUGEINT"})

    def __init__(self, database: str | duckdb.DuckDBPyConnection = DEFAULT_DATABASE, *, read_only: bool = False,
                 lock_timeout: float | None = 60.0):
        if isinstance(database, duckdb.DuckDBPyConnection):
            self.path, self.connection = "(connection)", database
        elif not isinstance(database, (str, os.PathLike)):      # never a file named after some object's repr
            raise EngineError(f"seqdedup.connect takes a DuckDB file path, ':memory:', a duckdb connection or a "
                              f"SparkSession, not a {type(database).__module__}.{type(database).__name__}")
        else:
            self.path = str(database)
            self.connection = self._open(read_only, lock_timeout)
        self.read_only = read_only
        self._depth = 0   # nesting of transaction()
        self._identity: str | None = None
        self._relations: dict[str, duckdb.DuckDBPyConnection] = {}   # registered Arrow tables -> their connection
        self._appends: dict[tuple, exp.Insert] = {}     # (table, columns) -> append_rows' INSERT, built once
        self._drops: Kept[str] = Kept(rendering.KEPT_TEXTS)    # scratch tables' names -> the text dropping them
        self._claimed = False   # counted in duckdb_identity's open files
        # Statements run on the one connection (the session lets one thread write at a time), so the user's
        # temporary views stay visible. Reads of committed state may come from any thread: each thread reads
        # through a cursor of its own, outside the writer's transaction.
        self._local = threading.local()
        self._cursors: list[duckdb.DuckDBPyConnection] = []    # every thread's, closed with the adapter
        register_functions(self.connection)
        self.DATABASE = self.fetchall("SELECT current_database()")[0][0]

    def _open(self, read_only: bool, lock_timeout: float | None) -> duckdb.DuckDBPyConnection:
        """Connect; while another process holds the file's lock, wait for it (at most ``lock_timeout`` s)."""
        deadline = None if lock_timeout is None else time.monotonic() + lock_timeout
        pause = 0.05
        while True:
            try:
                return duckdb.connect(self.path, read_only=read_only)
            except duckdb.Error as error:
                locked = "Could not set lock on file" in str(error)
                if not locked or (deadline is not None and time.monotonic() + pause > deadline):
                    raise _friendly(error, self.path, waited=lock_timeout if locked else None) from None
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def reader(self) -> duckdb.DuckDBPyConnection:
        cursor = getattr(self._local, "cursor", None)
        if cursor is None:
            cursor = self._local.cursor = self.connection.cursor()
            self._cursors.append(cursor)
            register_functions(cursor)
        return cursor

    def execute(self, statement: exp.Expression | str) -> None:
        self._run(statement)

    def execute_count(self, statement: exp.Expression) -> int | None:
        return self._run(statement).fetchall()[0][0]

    def query_columns(self, query: exp.Expression) -> list[tuple[str, str]]:
        """Bound, not run: a relation's columns cost less than a ``DESCRIBE`` (0.3 ms against 0.8 ms, a small
        statement's check of its SELECT), name their types alike, and a binder error leaves the transaction open."""
        text = self.sql(query)
        with self._errors():
            relation = self.connection.sql(text, params=self.bound(text, "$"))
            return list(zip(relation.columns, map(str, relation.types)))

    def fetchall(self, query: exp.Expression | str, *, committed: bool = False) -> list[tuple]:
        return self._run(query, committed=committed).fetchall()

    #: A query known to give at most this many rows is fetched as tuples, not through a relation
    #: (``fetch_arrow``'s ``at_most``).
    FEW_ROWS = 256

    def fetch_arrow(self, query: exp.Expression | str, *, committed: bool = False, at_most: int | None = None):
        """A relation's Arrow result binds its query twice (about 1.5 ms of a 16 ms statement for an outcome of
        three producers, a join of two aggregates); a cursor's Arrow result copies the rows through one more query.
        So a few rows come as tuples, made columns by Arrow, whose types it infers from the values."""
        if at_most is not None and at_most <= self.FEW_ROWS:
            names, rows = self.fetch_with_columns(query, committed=committed)
            columns = zip(*rows) if rows else [()] * len(names)
            return pa.Table.from_arrays([pa.array(column) for column in columns], names=names)
        text = query if isinstance(query, str) else self.sql(query)
        with self._errors():
            return (self.reader() if committed else self.connection).sql(
                text, params=self.bound(text, "$")).to_arrow_table()

    def marks_map(self, table, id_parts: int | None = None):
        marks = table.column("sequence_id")       # (BIGINT, or R19's text of a composite id; NULL: none)
        values, kind = marks.to_pylist(), _map_type("VARCHAR" if str(marks.type) == "string" else "BIGINT")
        if id_parts is not None and id_parts <= ids.WIDE_PARTS:     # (as a statement works on them: a UHUGEINT)
            values, kind = [None if v is None else ids.packed(ids.decoded(v)) for v in values], _map_type("UHUGEINT")
        return duckdb.Value(dict(zip(table.column("producer").to_pylist(), values)), kind)

    def fingerprint(self, columns: list[tuple[exp.Expression, str]]) -> exp.Expression:
        """``hash`` is a UBIGINT, of which half the values do not fit a BIGINT: moved down by 2^63 (through a
        HUGEINT: in UBIGINT the subtraction overflows for the other half)."""
        hashed = exp.func("hash", *[v.copy() for v, _ in columns], *[v.copy().is_(exp.null()) for v, _ in columns])
        return exp.cast(exp.Sub(this=exp.cast(hashed, "hugeint"), expression=exp.convert(2**63)), "bigint")

    def binary(self, text: exp.Expression) -> exp.Expression:
        return exp.Collate(this=exp.cast(text, "text"), expression=exp.to_identifier("binary", quoted=True))

    def relation(self, name: str, table, *, committed: bool = False) -> exp.Table:
        connection = self.reader() if committed else self.connection
        connection.register(name, table)      # a view over the Arrow table: no copy
        self._relations[name] = connection
        return exp.table_(exp.to_identifier(name, quoted=True))

    def append_rows(self, table: exp.Table, rows) -> None:
        """An Arrow table is read where it lies, under one name per adapter, by an INSERT built and generated once
        per table and columns (a tree and its text each time cost more than the INSERT); a few rows (a statement's
        run log) go as list parameters instead (``_append_few``)."""
        if not rows.num_rows:
            return
        if rows.num_rows <= self.FEW_ROWS:
            self._append_few(table, rows)
            return
        appends = self._appends
        key = (table.sql(), tuple(rows.column_names))
        name = f"__sd_append_{id(self):x}"
        if key not in appends:
            columns = [exp.to_identifier(c, quoted=True) for c in rows.column_names]
            insert = exp.insert(exp.select(*[exp.column(c) for c in columns]).from_(
                exp.table_(exp.to_identifier(name, quoted=True))), table.copy(), columns=columns)
            insert.meta["kept"] = True
            appends[key] = insert
        self.connection.register(name, rows)
        try:
            self.execute(appends[key])
        except BaseException:
            # A failed INSERT aborts the transaction, where unregistering fails too: the INSERT's error is the one to
            # report (the rollback drops the name; a later register replaces it).
            with contextlib.suppress(duckdb.Error):
                self.connection.unregister(name)
            raise
        self.connection.unregister(name)

    def _append_few(self, table: exp.Table, rows) -> None:
        """A few rows (a statement's run log) as one list parameter a column, unnested by the INSERT: registering an
        Arrow table and dropping it costs more than the INSERT itself (0.9 ms against 1.2 ms for three rows)."""
        key = (table.catalog, table.db, table.name, tuple(rows.column_names), "few")
        if key not in self._appends:
            columns = [exp.to_identifier(c, quoted=True) for c in rows.column_names]
            insert = exp.insert(exp.select(*[exp.Unnest(expressions=[exp.Placeholder(this=f"__sd_column_{i}")])
                                             for i in range(len(columns))]), table.copy(), columns=columns)
            self._appends[key] = self.sql(insert)
        self._run(self._appends[key], values={f"__sd_column_{i}": column.to_pylist()
                                              for i, column in enumerate(rows.columns)})

    def fetch_with_columns(self, statement: exp.Expression | str, *,
                           committed: bool = False) -> tuple[list[str], list[tuple]]:
        result = self._run(statement, committed=committed)
        return [column[0] for column in result.description or []], result.fetchall()

    def _run(self, statement: exp.Expression | str, *, committed: bool = False, values: dict | None = None):
        """``values``: the statement's parameters, in place of those bound (``EngineAdapter.parameters``)."""
        text = statement if isinstance(statement, str) else self.sql(statement)
        with self._errors():
            return (self.reader() if committed else self.connection).execute(
                text, self.bound(text, "$") if values is None else values)

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """DuckDB's errors inside, as seqdedup's (``_friendly``: named with the database, the fix where known)."""
        try:
            yield
        except duckdb.Error as error:
            raise _friendly(error, self.path) from error

    def columns(self, table: exp.Table, *, committed: bool = False) -> list[tuple[str, str]]:
        return self.tables_columns([table], committed=committed)[0]

    def tables_columns(self, tables: list[exp.Table], *, committed: bool = False) -> list[list[tuple[str, str]]]:
        # A catalog query, not DESCRIBE: a failed statement would abort the surrounding transaction.
        def which(table: exp.Table) -> exp.Expression:
            database = exp.Literal.string(table.catalog) if table.catalog else exp.func("current_database")
            return exp.and_(exp.column("database_name").eq(database),
                            exp.column("schema_name").eq(exp.Literal.string(table.db or self.DEFAULT_NAMESPACE)),
                            exp.column("table_name").eq(exp.Literal.string(table.name)))

        conditions = [which(table) for table in tables]
        # (which table a row is of: no CASE for a single table, the look-up every statement makes)
        index = exp.Literal.number(0) if len(conditions) == 1 else exp.Case(
            ifs=[exp.If(this=c.copy(), true=exp.Literal.number(i)) for i, c in enumerate(conditions)])
        query = (exp.select(exp.alias_(index, "i", copy=False), "column_name", "data_type", copy=False)
                 .from_(exp.Table(this=exp.Anonymous(this="duckdb_columns")), copy=False)
                 .where(exp.or_(*conditions, copy=False), copy=False).order_by("i", "column_index", copy=False))
        found: list[list[tuple[str, str]]] = [[] for _ in tables]
        for i, name, kind in self.fetchall(query, committed=committed):
            found[i].append((name, kind))
        return found

    def temp_table(self, name: str) -> exp.Table:
        return exp.table_(name, db="main", catalog="temp")

    def create_temp_table(self, name: str, query: exp.Expression) -> exp.Table:
        return self.create_counted_temp_table(name, query)[0]

    def create_counted_temp_table(self, name: str, query: exp.Expression) -> tuple[exp.Table, int]:
        table = self.temp_table(name)
        count = self.execute_count(_around(query, f"create {name}", lambda: exp.Create(
            this=table.copy(), kind="TABLE", expression=query.copy(), replace=True,
            properties=exp.Properties(expressions=[exp.TemporaryProperty()]))))
        return table, count

    def drop_temp_tables(self, names: list[str]) -> None:
        relations = [n for n in names if n in self._relations]
        for name in relations:
            self.drop_temp_table(name)
        tables = tuple(n for n in names if n not in relations)
        if tables:        # one round trip for all of them (a statement's scratch names come again: generated once)
            self.execute(self._drops.made(tables, lambda: "; ".join(
                self.sql(exp.Drop(tables=[self.temp_table(n)], kind="TABLE", exists=True)) for n in tables)))

    def drop_temp_table(self, name: str) -> None:
        if name in self._relations:
            with contextlib.suppress(duckdb.Error):    # a registration inside a rolled-back transaction is gone
                self._relations.pop(name).unregister(name)
            return
        self.execute(exp.Drop(tables=[self.temp_table(name)], kind="TABLE", exists=True))

    def has_temp_table(self, name: str) -> bool:
        if name in self._relations:
            return True
        named = exp.func("lower", exp.column("name")).eq(exp.Literal.string(name.lower()))
        temporary = exp.union(
            exp.select(exp.column("table_name").as_("name")).from_("duckdb_tables()").where("temporary"),
            exp.select(exp.column("view_name").as_("name")).from_("duckdb_views()").where("temporary"), distinct=False)
        return bool(self.fetchall(exp.select("1").from_(temporary.subquery("t")).where(named)))

    #: DuckDB's settings that change how strings compare, with the values seqdedup's queries assume (as
    #: ``current_setting`` reads them): producer names and topic names compare byte for byte.
    #: (The order settings need no check: every ORDER BY seqdedup generates says its direction and NULLs,
    #: ``DuckDBExplicit``.)
    SETTINGS = {"default_collation": ""}

    def check_settings(self) -> None:
        found = dict(zip(self.SETTINGS, self.fetchall(self._settings_query)[0]))
        changed = {name: value for name, value in found.items() if str(value).upper() != self.SETTINGS[name]}
        if changed:
            said = ", ".join(f"{name} = {value!r}" for name, value in changed.items())
            raise EngineError(
                f"this DuckDB session sets {said}, which changes how seqdedup compares producer and topic names "
                "(byte for byte): seqdedup writes and reads topics only under DuckDB's default collation. RESET "
                f"{', '.join(changed)} (and write COLLATE in your own expressions instead); nothing was done")

    @functools.cached_property
    def _settings_query(self) -> str:
        return self.sql(exp.select(*[exp.func("current_setting", exp.Literal.string(name)) for name in self.SETTINGS]))

    #: Above this many rows, a topic write lets DuckDB insert from every thread without keeping the order the rows
    #: were read in (``preserve_insertion_order``): a topic's order is its positions. 5M rows: 2.3 s -> 1.4 s.
    UNORDERED_WRITE_ABOVE = 100_000

    @functools.cached_property
    def storage(self) -> DuckDBStorage:
        return DuckDBStorage(self)

    def load_arrow(self, name: str, table) -> exp.Table:
        view = f"{name}_arrow"
        self.connection.register(view, table)
        try:
            return self.create_temp_table(name, exp.select("*").from_(exp.to_identifier(view, quoted=True)))
        finally:
            self.connection.unregister(view)

    def hold_arrow(self, name: str, table) -> exp.Table:
        """A view over the Arrow table (``relation``), registered outside any transaction, so a statement's
        rollback keeps it for the retry: a send of one entry no longer copies its row into a table and drops it
        (3.0 ms against 1.5 ms for the view, read once and dropped)."""
        return self.relation(name, table)

    @property
    def identity(self) -> str:
        """The database itself, however it was reached: a file by its device and inode, an in-memory database by a
        marker written in it (extensions/duckdb_identity.py). A file open in this process through another path is
        refused."""
        if self._identity is None:
            found, path = duckdb_identity.identify(self)
            if path is not None:
                duckdb_identity.claim(found, path)
                self._claimed = True
            self._identity = found
        return self._identity

    def file_rows(self, path: str, fmt: str, row_column: str) -> exp.Select:
        reader = {"json": "read_json_auto", "csv": "read_csv_auto", "parquet": "read_parquet"}[fmt]
        # DuckDB keeps the file's order (preserve_insertion_order is on), so row_number() OVER () numbers rows in it.
        source = exp.Table(this=exp.Anonymous(this=reader, expressions=[exp.Literal.string(path)]))
        return exp.select("*", exp.alias_(exp.Window(this=exp.RowNumber()), row_column)).from_(source)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        if self._depth:   # already inside one: the outermost commits or rolls back
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        # A COMMIT after an error silently rolls back in DuckDB: roll back explicitly on any error.
        self._depth = 1
        try:
            yield from self._outermost()
        finally:
            self._depth = 0

    def _outermost(self) -> Iterator[None]:
        self.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            with contextlib.suppress(duckdb.Error):
                self.connection.execute("ROLLBACK")
            raise
        self.execute("COMMIT")

    def register_functions(self) -> None:
        register_functions(self.connection)

    def keep_guards(self) -> None:
        """Also in the database file, as macros of its own (a connection's temporary ones go first): a connection
        seqdedup never configured, the DuckDB shell on the file say, gets seqdedup's message for ``is_not_dup``."""
        for name in SIGNATURES:
            self.execute(_guard_macro(name, "CREATE MACRO IF NOT EXISTS"))

    def close(self) -> None:
        if self._claimed:
            duckdb_identity.release(self._identity)
            self._claimed = False
        # Every cursor too: the database file stays locked for other processes while any connection is open.
        for connection in [*self._cursors, self.connection]:
            with contextlib.suppress(duckdb.Error):
                connection.close()
        self._cursors.clear()
        self._local = threading.local()


class DuckDBStorage(TransactionalStorage):
    """The transactional storage protocol, with DuckDB's large writes unordered (``UNORDERED_WRITE_ABOVE``)."""

    def write_topic(self, topic, insert: exp.Insert, *, rows: int | None = None) -> int | None:
        adapter = self.adapter
        if rows is None or rows <= adapter.UNORDERED_WRITE_ABOVE:
            return super().write_topic(topic, insert)
        kept = adapter.fetchall("SELECT current_setting('preserve_insertion_order')")[0][0]
        adapter.execute("SET preserve_insertion_order = false")
        try:
            return super().write_topic(topic, insert)
        finally:
            adapter.execute(f"SET preserve_insertion_order = {'true' if kept else 'false'}")
