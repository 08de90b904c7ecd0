"""``SparkAdapter``: seqdedup's queries on any SparkSession (classic or Spark Connect), the engine's flags, and the
storage protocol (scratch tables, table files, partitions, commits, compaction, quarantine) carried out by the
collaborators it holds, one job each."""
from __future__ import annotations

import contextlib
import functools
import logging
from pathlib import Path
from typing import Iterator

import pyarrow as pa
from sqlglot import exp

from seqdedup.catalog.schema import IN_CATALOG
from seqdedup.errors import EngineError, TopicError
from seqdedup.sql.dialects import SparkAnsi

from ..base import EngineAdapter
from ..storage import by
from . import guards
from .calls import SETTINGS, held_settings, sized, writes
from .commits import Commits
from .compaction import Compaction
from .errors import engine_error
from .files import TableFiles
from .frames import command_rows, functions_of, is_remote, to_arrow
from .jvm import estimated_bytes, java, optimized
from .layout import holds_at_most, local_path
from .partitions import Partitions
from .quarantine import Quarantine
from .scratch import INLINE_ROWS, Scratch
from .session import DEFAULT_HOME, homes, local_session, refuse_without_hive
from .storage import SparkStorage


class SparkAdapter(EngineAdapter):
    DIALECT = SparkAnsi
    SUPPORTS_TRANSACTIONS = False
    STRING_TYPES = frozenset({"STRING"})
    INTEGER_TYPES = frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT"})
    ROW_NUMBER_NEEDS_ORDER = True
    PLAN = "window"          # one job per statement: the exceptions plan would take three or four
    KEY_HASH = "xxhash64"
    SEMI_JOIN_ABOVE = 20_000    # a relation made from Arrow is shipped whole to the executors with every job
    # (past it, the whole state goes as a file, FILE_ROWS: collecting 9M names a statement of keys carried ran a
    # 1 GB driver out of heap)
    WHOLE_STATE_FROM = 64
    #: Above this many rows, a relation made from Arrow is written to a Parquet file and read from there, where the
    #: warehouse is on a local file system: a local relation lives whole in the driver's plan (a snapshot of a
    #: million producers' marks, made that way, exhausted a default 1 GB driver heap).
    FILE_ROWS = 100_000
    BULK_BYTES = 4 << 20        # a larger result of ``fetch_bulk`` comes by file (Spark estimates a state low)
    #: ``fetch_bulk``'s rows, where known, that come through ``toArrow``: a few tens of MB in the driver's heap. (The
    #: payloads a 5M-row statement's 500,000 retries may conflict with, 10,000 held: 0.66 s against 0.88 s by
    #: file, warm.)
    BULK_ROWS = 1_000_000
    TRACKS_COMMITS = True    # a commit is published by registering its partition
    RAISE_ERROR = "raise_error"
    #: A producer that holds more than a task's share of a large unordered statement is spread over ranges of its
    #: ids (sql/plan/spread.py; docs/performance.md, issue 41). On 2 free cores: one producer's 5M entries 8.3 to
    #: 8.9 s against 10.4 to 11.1 s in one task, 10M 13.7 to 16.5 s against 21.3 to 22.2 s; the first look costs a
    #: statement it does not spread 0.16 to 0.3 s of 13.5. Under other work (load 5 to 8) it took about 30 % more
    #: CPU than one task and no less time. Not on a Connect session (``__init__``): it cannot tell a small statement
    #: before it runs (``estimated_size``), so every statement would pay the first look's job.
    SPREADS = True
    PARTITION_HASH = "hash"      # REPARTITION(n, x) sends a row to pmod(hash(x), n)
    MARKS_AS_MAP = INLINE_ROWS
    ONE_TASK_BYTES = 4 << 20     # a shuffle's stage costs a small statement more than one task's work on 4 MB
    #: (``local[2]``, entries of 56 bytes as Spark estimates them, interpreted against compiled, medians of six: 10
    #: entries 0.83 s against 0.90 s, 1,000 0.89 against 0.94 s, 10,000 0.89 s against 0.75 s; calls.INTERPRETED)
    INTERPRETED_BYTES = 64 << 10
    #: (a rewrite of ``producer_sequences``, its job, the new location and the old folder's removal: 0.6 to 0.75 s,
    #: paid by every second micro-batch of 10 producers before; docs/performance.md, foreachBatch)
    PRUNE_SPACING = 16
    IN_PLAN_BYTES = 4 << 20      # a scratch table this small is kept in the plans as a local relation (_materialize)
    SETTINGS = SETTINGS
    READS_SPARK_FILE_SOURCES = True
    JOIN_HINTS = True
    # (``local[2]``: a second pass over a small topic costs some 0.4 s; reading all the columns of a topic of 85 MB
    # of incompressible Parquet took 0.17 s more than its system columns alone)
    READ_WHOLE_BYTES = 64 << 20
    READ_WHOLE_ENTRIES = 1000    # files and folders looked at, at most, to know that a topic is that small

    #: Seconds a partition a compaction merged into another stays registered (pointing at an empty directory)
    #: before it is dropped, where other drivers write. Its number stays taken meanwhile: a driver whose state is
    #: older than that commit cannot register the number again (its compare-and-set fails), and publishes only
    #: within half this time of its last look at the topic (``listing_ttl``), so a number is never freed under it.
    COVERED_GRACE = 600.0

    # --- scratch tables and table files, by the collaborators (``__init__``); the storage protocol is ``storage``
    relation = by("scratch", Scratch.relation)
    create_temp_table = by("scratch", Scratch.create)
    temp_table_rows = by("scratch", Scratch.rows)
    temp_table_files = by("scratch", Scratch.files)
    drop_temp_table = by("scratch", Scratch.drop)
    has_temp_table = by("scratch", Scratch.has)
    load_arrow = by("scratch", Scratch.load_arrow)
    load_dataframe = by("scratch", Scratch.load_dataframe)
    append_rows = by("files", TableFiles.append_rows)
    columns = by("files", TableFiles.columns)
    tables_columns = by("files", TableFiles.tables_columns)

    def __init__(self, spark=None, *, master: str = "local[2]", read_only: bool = False,
                 lock_timeout: float | None = 60.0):
        # PySpark logs a JSON error record for every AnalysisException, even a caught one.
        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        if spark is None or isinstance(spark, (str, Path)):
            spark = local_session(spark or DEFAULT_HOME, master, lock_timeout)
        refuse_without_hive(spark)     # before anything is made in its catalog or its warehouse
        self.spark = spark
        #: a Spark Connect session: no JVM in this process (so no Py4J calls), and an Observation is filled only
        #: from the plan the client sent (a write through a temporary view reports nothing)
        self.remote = is_remote(spark)
        self.SPREADS = self.SPREADS and not self.remote     # (see SPREADS)
        self.F = functions_of(spark)
        self.path = "spark"
        self.read_only = read_only
        self.DEFAULT_NAMESPACE = spark.catalog.currentDatabase()
        self._analyzed: tuple | None = None         # (SQL, its frame): the query ``query_columns`` read last
        self.scratch = Scratch(self)
        self.files = TableFiles(self)
        self.partitions = Partitions(self)
        self.commits = Commits(self)
        self.compaction = Compaction(self)
        self.quarantine = Quarantine(self)
        self.storage = SparkStorage(self)     # the storage protocol, carried out by the five above
        if not self.exclusive:      # see create_catalog_table
            spark.conf.set("spark.sql.hive.convertInsertingUnpartitionedTable", "false")
        self.register_functions()

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """Spark's errors, from Python or from a failed Java job (a Py4JJavaError), as EngineErrors; every Spark
        call of the adapter runs inside, with the SETTINGS it needs."""
        from py4j.protocol import Py4JJavaError
        from pyspark.errors import PySparkException

        try:
            with held_settings(self.spark):
                yield
        except (PySparkException, Py4JJavaError) as error:
            raise engine_error(error) from error

    def check_writable(self, statement: exp.Expression | str, what: str | None = None) -> None:
        """Spark has no read-only mode: a read-only session refuses every write itself, before Spark starts it."""
        if self.read_only and (what or writes(statement)):
            if what is None:
                what = statement.split(None, 1)[0].upper() if isinstance(statement, str) else statement.key.upper()
            raise EngineError(f"this seqdedup session on Spark is read-only (connected with read_only=True), so "
                              f"nothing can be written ({what} refused before it ran); connect without "
                              "read_only=True to write")

    def frame(self, statement: exp.Expression | str):
        text = statement if isinstance(statement, str) else self.sql(statement)
        with self.errors():
            args = self.bound(text, ":")
            return self.spark.sql(text, args=args) if args else self.spark.sql(text)

    def query(self, query: exp.Expression | str):
        """A frame of a query whose rows or columns are read at once (``fetchall``, ``fetch_arrow``,
        ``tables_columns``). On Spark Connect, ``spark.sql`` is a round trip of its own, where the server analyses
        the statement before the frame's action sends it again: a query seqdedup built (a SELECT) is sent once,
        with the action, and its errors come with it. Anything else, or a client whose plan classes differ, goes
        through ``spark.sql``."""
        if not (self.remote and isinstance(query, exp.Query)):
            return self.frame(query)
        try:
            from pyspark.sql.connect.dataframe import DataFrame
            from pyspark.sql.connect.plan import SQL
        except ImportError:
            return self.frame(query)
        text = self.sql(query)
        args = {name: self.F.lit(value) for name, value in (self.bound(text, ":") or {}).items()}
        return DataFrame(SQL(text, [], args, []), self.spark)

    def database_of(self, table: exp.Table) -> str | None:
        """The database ``table`` is in: the one named, else the catalog's for seqdedup's own tables (``sql``); None
        for another name without one."""
        return table.db or (self.DEFAULT_NAMESPACE if table.meta.get(IN_CATALOG) else None)

    def execute(self, statement: exp.Expression | str) -> None:
        self.check_writable(statement)
        self.frame(statement)

    def fetchall(self, query: exp.Expression | str, *, committed: bool = False) -> list[tuple]:
        with self.errors():
            frame = self.query(query)
            rows = command_rows(frame) if self.remote else None      # (a command's rows came with its reply)
            return [tuple(row) for row in frame.collect()] if rows is None else rows

    def fetch_arrow(self, query: exp.Expression | str, *, committed: bool = False, at_most: int | None = None):
        with self.errors():
            return to_arrow(self.query(query))

    def fetch_bulk(self, query: exp.Expression, *, at_most: int | None = None):
        """Rows Spark estimates above ``BULK_BYTES``, where the warehouse is on the local disk: written as Parquet
        by the job and read by Arrow (``Scratch.fetched``). ``toArrow`` gathers every row in the driver's heap
        first: the state of 10M keys ran a 1 GB driver out of it. A query known to give at most ``BULK_ROWS``
        comes through ``toArrow`` with no estimate: Spark estimates a partitioned table without statistics, as
        the topics are, at no size it can use, so a topic's few rows came by file too."""
        if self.remote or not local_path(self.warehouse()) or (at_most is not None and at_most <= self.BULK_ROWS):
            return self.fetch_arrow(query)
        with self.errors():
            frame = self.query(query)
            if estimated_bytes(optimized(frame)) <= self.BULK_BYTES:
                return to_arrow(frame)
            return self.scratch.fetched(frame)

    def marks_map(self, table, id_parts: int | None = None):
        # (a map parameter must be a map() of literals of one type, or Spark refuses it: INVALID_SQL_ARG; made from
        # its text, 3 Py4J round trips, where a Column of each literal made three producers' map in 31)
        ids = table.column("sequence_id")
        # (none: -1, or '' below every composite id's text, R19)
        marks = ids.fill_null("" if pa.types.is_string(ids.type) else -1).cast(pa.string()).to_pylist()
        pairs = [value for pair in zip(table.column("producer").to_pylist(), marks) for value in pair]
        return self.F.expr(self.sql(exp.Anonymous(this="map", expressions=[exp.Literal.string(v) for v in pairs])))

    def constant(self, value: exp.Expression) -> exp.Expression:
        """A DECIMAL: Spark compiles the code of a query with its BIGINT constants written into it, so a new value
        costs a new compilation (some 15 to 40 ms a class), where a DECIMAL constant is referenced from the code.
        (Arithmetic on a DECIMAL this wide is slower per row: for small statements only.)"""
        return exp.cast(value, exp.DataType.build("DECIMAL(20, 0)"))

    def estimated_size(self, query: exp.Expression) -> int | None:
        """From the size Spark's optimizer estimates for the rows (a classic session's; a Connect client cannot
        ask)."""
        if self.remote:
            return None
        text, analyzed = self._analyzed or (None, None)
        try:
            with self.errors():
                frame = analyzed if text == self.sql(query) else self.frame(query)
                return estimated_bytes(optimized(frame))
        except EngineError:     # (an expression that fails when folded, 2^63 - 1 + 1: the statement reports it)
            return None

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        with self.errors():     # (which holds the settings; the calls inside report their own errors)
            yield

    def sized(self, small: bool):
        return contextlib.nullcontext() if self.remote else sized(self.spark, small)

    def reads_whole(self, table: exp.Table) -> bool:
        """From the files under the topic's directory, where this process reaches it (Spark's optimizer estimates
        a partitioned table without statistics, as the topics are, at no size it can use)."""
        directory = None if self.remote else local_path(self.files.directory(table))
        return directory is not None and holds_at_most(directory, self.READ_WHOLE_BYTES, self.READ_WHOLE_ENTRIES)

    def binary(self, text: exp.Expression) -> exp.Expression:
        return exp.Collate(this=exp.cast(text, "string"), expression=exp.Var(this="UTF8_BINARY"))

    @property
    def PARTITIONS(self) -> int:
        return int(self.spark.conf.get("spark.sql.shuffle.partitions"))

    @property
    def READS_ALONGSIDE(self) -> bool:
        """On Spark Connect: the server runs a client's queries at once (a classic session's small jobs would share
        the driver's cores)."""
        return self.remote

    def fingerprint(self, columns: list[tuple[exp.Expression, str]]) -> exp.Expression:
        """``xxhash64``, which skips a NULL (``xxhash64('x', NULL)`` is ``xxhash64(NULL, 'x')``): hence the flags.
        It takes no MAP: a column whose type holds one is hashed as its JSON (whose entries come in the map's own
        order, so two maps of the same entries in other orders differ)."""
        def hashable(value: exp.Expression, kind: str) -> exp.Expression:
            return exp.func("to_json", value.copy()) if "map<" in kind.lower().replace(" ", "") else value.copy()

        return exp.func("xxhash64", *[hashable(v, kind) for v, kind in columns],
                        *[exp.func("isnull", v.copy()) for v, _ in columns])

    def row_number(self) -> exp.Expression:
        """Row r of partition i of n gets ``r * n + i + 1``: unique with no global sort (the window plan fixes n
        with a REPARTITION hint, which adaptive execution leaves as it is)."""
        partition = exp.cast(exp.func("spark_partition_id"), "bigint")
        row = exp.Sub(this=exp.func("monotonically_increasing_id"),
                      expression=exp.BitwiseLeftShift(this=partition.copy(), expression=exp.convert(33)))
        return exp.Add(this=exp.Add(this=exp.Mul(this=exp.Paren(this=row), expression=exp.convert(self.PARTITIONS)),
                                    expression=partition), expression=exp.convert(1))

    @functools.cached_property
    def exclusive(self) -> bool:
        """A session ``local_session`` made holds its home's lock: nobody else publishes. A user's session may
        share its metastore with other drivers, and a Spark Connect session always may (the server serves other
        clients), even where this process started the server and so holds its home's lock (``start_local_server``)."""
        if self.remote:
            return False
        warehouse = self.spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:")
        return any(str(home / "warehouse") == warehouse.rstrip("/") for home in homes)

    @functools.cached_property
    def lease_store(self):
        """The metastore, where other drivers may write (a shared metastore, Spark Connect): extensions/spark/leases.py.
        A read-only session's producers cannot send, and hold no name."""
        if self.exclusive or self.read_only:
            return None
        from .leases import HiveLeases

        return HiveLeases(self)

    def fetch_with_columns(self, statement: exp.Expression | str) -> tuple[list[str], list[tuple]]:
        self.check_writable(statement)
        with self.errors():
            frame = self.frame(statement)
            return list(frame.columns), [tuple(row) for row in frame.collect()]

    def query_columns(self, query: exp.Expression) -> list[tuple[str, str]]:
        self._analyzed = None
        frame = self.frame(query)
        self._analyzed = (self.sql(query), frame)      # analyzed once: ``estimated_size`` may ask of it next
        return [(f.name, f.dataType.simpleString()) for f in frame.schema.fields]

    def check_name(self, part: str) -> None:
        """The Hive catalog takes only letters, digits and _ in table and database names."""
        if not part.replace("_", "").isascii() or not part.replace("_", "").isalnum():
            raise TopicError(f"{part!r} cannot name a table in Spark's Hive catalog, which allows only letters, "
                             "digits and _; pick another name (DuckDB topics may use any name)")
        if len(part) > 128:     # the metastore's limit for database names; longer names fail deep in Hive
            raise TopicError(f"{part[:20]!r}... ({len(part)} characters) is too long for Spark's Hive catalog, which "
                             "takes names of up to 128 characters; pick a shorter name")

    @functools.cached_property
    def _warehouse_setting(self) -> str:
        """``spark.sql.warehouse.dir``, a static setting: read once (on Spark Connect each read is a round trip)."""
        return self.spark.conf.get("spark.sql.warehouse.dir")

    def warehouse(self) -> str:
        return self._warehouse_setting.rstrip("/")

    @property
    def identity(self) -> str:
        return f"spark:{self._warehouse_setting}"

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        yield    # no transactions: a topic commit is published by registering its partition

    def jvm_catalog(self, table: exp.Table) -> tuple | None:
        """(the session's catalog in the JVM, ``table``'s identifier there); None where the JVM is out of reach
        (Spark Connect)."""
        if getattr(self.spark, "_jvm", None) is None:
            return None
        name = java(self.spark, "org.apache.spark.sql.catalyst.TableIdentifier")(
            table.name, java(self.spark, "scala.Option").apply(self.database_of(table)))
        return self.spark._jsparkSession.sessionState().catalog(), name

    @property
    def contended(self) -> bool:
        return not self.exclusive

    @property
    def listing_ttl(self) -> float | None:
        return None if self.exclusive else self.COVERED_GRACE / 2

    def register_functions(self) -> None:
        guards.register_functions(self)

    def keep_guards(self) -> None:
        guards.keep_guards(self)

    def file_rows(self, path: str, fmt: str, row_column: str) -> exp.Select:
        reader = self.spark.read
        frame = {"json": lambda: reader.json(path), "csv": lambda: reader.option("header", True)
                 .option("inferSchema", True).csv(path), "parquet": lambda: reader.parquet(path)}[fmt]()
        frame.createOrReplaceTempView("__sd_file")
        # File order: Spark reads a single file's rows in order; monotonically_increasing_id keeps that order.
        number = exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=[
            exp.Ordered(this=exp.func("monotonically_increasing_id"))]))
        return exp.select("*", exp.alias_(number, row_column)).from_("__sd_file")

    def close(self) -> None:
        """The SparkSession stays up: it may be the user's, and starting one costs seconds."""
