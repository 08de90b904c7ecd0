"""The Spark engine: any SparkSession a user has, or a local one with a Hive catalog (embedded Derby) so topics and
state persist across processes on one machine.

Not yet atomic: Spark without Delta or Iceberg has no transactions, and a plain INSERT into a Parquet table is not
atomic (a driver killed during job commit leaves partial files visible). Publishing a statement atomically is
issue 3's work; until then ``SUPPORTS_TRANSACTIONS`` is False and ``transaction()`` only groups the statements.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import Iterator

from sqlglot import exp

from seqdedup.errors import EngineError, TopicError
from seqdedup.sql.dialects import SparkAnsi
from seqdedup.udfs.guards import SIGNATURES, guard_message

from .base import EngineAdapter

#: Where a local session keeps its warehouse and Derby metastore, unless told otherwise.
DEFAULT_HOME = "seqdedup-spark"


def local_session(home: str | Path = DEFAULT_HOME, master: str = "local[2]"):
    """A local SparkSession with a Hive catalog in ``home`` (warehouse and Derby metastore)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # workers must run this Python, with pyarrow
    from pyspark.sql import SparkSession

    home = Path(home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    session = (
        SparkSession.builder.master(master).appName("seqdedup").enableHiveSupport()
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(home / "warehouse"))
        .config("spark.hadoop.javax.jdo.option.ConnectionURL",
                f"jdbc:derby:;databaseName={home / 'metastore_db'};create=true")
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={home}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


class SparkAdapter(EngineAdapter):
    DIALECT = SparkAnsi
    SUPPORTS_TRANSACTIONS = False
    STRING_TYPES = frozenset({"STRING"})
    INTEGER_TYPES = frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT"})
    ROW_NUMBER_NEEDS_ORDER = True

    def __init__(self, spark=None, *, master: str = "local[2]", read_only: bool = False):
        # PySpark logs a JSON error record for every AnalysisException, even a caught one.
        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        if spark is None or isinstance(spark, (str, Path)):
            spark = local_session(spark or DEFAULT_HOME, master)
        self.spark = spark
        self.path = "spark"
        self.read_only = read_only
        self.DEFAULT_NAMESPACE = spark.catalog.currentDatabase()
        self.register_functions()

    def _sql(self, statement: exp.Expression | str):
        from pyspark.errors import PySparkException

        text = statement if isinstance(statement, str) else self.sql(statement)
        try:
            return self.spark.sql(text)
        except PySparkException as error:
            raise EngineError(f"Spark: {str(error).splitlines()[0]}") from error

    def execute(self, statement: exp.Expression | str) -> None:
        self._sql(statement)

    def fetchall(self, query: exp.Expression | str, *, committed: bool = False) -> list[tuple]:
        from pyspark.errors import PySparkException

        try:
            return [tuple(row) for row in self._sql(query).collect()]
        except PySparkException as error:
            raise EngineError(f"Spark: {str(error).splitlines()[0]}") from error

    def query_columns(self, query: exp.Expression) -> list[tuple[str, str]]:
        return [(f.name, f.dataType.simpleString()) for f in self._sql(query).schema.fields]

    def columns(self, table: exp.Table, *, committed: bool = False) -> list[tuple[str, str]]:
        name = table.sql(dialect=self.DIALECT)
        if not self.spark.catalog.tableExists(name):
            return []
        return [(f.name, f.dataType.simpleString()) for f in self.spark.table(name).schema.fields]

    def check_name(self, part: str) -> None:
        """The Hive catalog takes only letters, digits and _ in table and database names."""
        if not part.replace("_", "").isascii() or not part.replace("_", "").isalnum():
            raise TopicError(f"{part!r} cannot name a table in Spark's Hive catalog, which allows only letters, "
                             "digits and _; pick another name (DuckDB topics may use any name)")

    def create_temp_table(self, name: str, query: exp.Expression) -> exp.Table:
        # Materialized once, so the steps that read it see the same rows (a view would be recomputed).
        frame = self._sql(query).localCheckpoint(eager=True)
        frame.createOrReplaceTempView(name)
        return self.temp_table(name)

    def drop_temp_table(self, name: str) -> None:
        self.spark.catalog.dropTempView(name)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        yield

    def register_functions(self) -> None:
        for name, signatures in SIGNATURES.items():
            longest = max(signatures, key=len)
            shortest = min(len(s) for s in signatures)
            params = ", ".join(f"{a} {'STRING' if a in ('producer', 'topic') else 'BIGINT'}"
                               + (" DEFAULT NULL" if i >= shortest else "") for i, a in enumerate(longest))
            message = exp.func("raise_error", exp.Literal.string(guard_message(name))).sql(dialect=self.DIALECT)
            self.execute(f"CREATE OR REPLACE TEMPORARY FUNCTION {name}({params}) RETURNS BOOLEAN RETURN {message}")
        body = exp.func("concat", exp.Literal.string("KOP-PID-PREFIX-"), exp.column("producer_id"),
                        exp.Literal.string("-"), exp.column("producer_epoch")).sql(dialect=self.DIALECT)
        self.execute("CREATE OR REPLACE TEMPORARY FUNCTION kafka_producer_name(producer_id BIGINT, "
                     f"producer_epoch BIGINT) RETURNS STRING RETURN {body}")

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
