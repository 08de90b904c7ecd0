"""Scratch tables on Spark: the relations and temporary tables a statement's steps read, computed once (kept in the
plan when small, else written as Parquet to the warehouse's scratch folder) so that every step sees the same rows."""
from __future__ import annotations

import os
import uuid
from concurrent.futures import ThreadPoolExecutor

from sqlglot import exp

from seqdedup.catalog.names import ARRIVAL, SCRATCH
from seqdedup.catalog.state import literal
from seqdedup.errors import TopicError

from ..base import EngineAdapter
from .collaborator import Collaborator
from .frames import arrow_schema_of, frame_of, is_remote, same_session, schema_of
from .jvm import GENERATOR, estimated_bytes, optimized
from .layout import local_path, remove_directory

#: Up to this many rows, a relation made from Arrow is an inline table in the query (see ``Scratch.relation``).
INLINE_ROWS = 64


class Scratch(Collaborator):
    def __init__(self, adapter):
        super().__init__(adapter)
        self._scratch: dict[str, str] = {}          # temporary table -> the directory that holds its rows

    def relation(self, name: str, table, *, committed: bool = False) -> exp.Table:
        """A few rows (a statement's handful of producers) go into the query as an inline table: a relation made
        from Arrow is a distributed one, and a join with it costs a job to broadcast it."""
        with self.adapter.errors():
            if table.num_rows > self.adapter.FILE_ROWS and local_path(self.adapter.warehouse()):
                self._file_relation(name, table).createOrReplaceTempView(name)
            elif 0 < table.num_rows <= INLINE_ROWS:
                rows = [tuple(literal(v) for v in row.values()) for row in table.to_pylist()]
                inline = exp.select("*").from_(exp.values(rows, alias="t", columns=table.column_names))
                self.adapter.frame(inline).createOrReplaceTempView(name)
            else:       # (a Connect client infers no schema from no rows: it is given)
                schema = schema_of(table.schema) if self.adapter.remote and not table.num_rows else None
                frame_of(self.spark, table, schema).createOrReplaceTempView(name)
        return self.adapter.temp_table(name)

    def _file_relation(self, name: str, table):
        """An Arrow table as a frame read from Parquet files in the scratch folder (dropped with the name). Its
        naive timestamps read back as TIMESTAMP_NTZ: cast to TIMESTAMP, the type ``createDataFrame`` gives them
        (both read the wall-clock time in the session's time zone).

        The files are written a piece a core, in threads (Arrow lets go of the GIL): 10M marks of a statement of keys
        in 1.5 s where one file took 2.6 s. (Uncompressed, they took 0.65 s, but the statement that read them was no
        faster: 3.4 times the bytes to read.)"""
        import pyarrow.parquet as pq
        F = self.F
        from pyspark.sql.types import TimestampNTZType

        directory = f"{self.adapter.warehouse()}/{SCRATCH}/{name}-{uuid.uuid4().hex[:8]}"
        os.makedirs(local_path(directory))
        pieces = max(1, min(os.cpu_count() or 1, table.num_rows // self.adapter.FILE_ROWS))
        step = -(-table.num_rows // pieces)

        def write(piece: int) -> None:
            pq.write_table(table.slice(piece * step, step), f"{local_path(directory)}/part-{piece}.parquet")

        with ThreadPoolExecutor(pieces) as pool:
            list(pool.map(write, range(pieces)))
        self._scratch[name] = directory
        frame = self.spark.read.parquet(directory)
        return frame.select(*[F.col(f.name).cast("timestamp") if isinstance(f.dataType, TimestampNTZType)
                              else F.col(f.name) for f in frame.schema.fields])

    def create(self, name: str, query: exp.Expression) -> exp.Table:
        return self._materialize(name, self.adapter.frame(query))

    def fetched(self, frame):
        """A frame's rows as an Arrow table, written by its job as Parquet to the scratch folder (on the local disk)
        and read from there, in the schema ``toArrow`` gives them (Spark writes an instant, which Arrow reads without
        its time zone: UTC)."""
        import pyarrow.parquet as pq

        directory = f"{self.adapter.warehouse()}/{SCRATCH}/fetched-{uuid.uuid4().hex[:8]}"
        try:
            frame.write.mode("error").parquet(directory)
            return pq.read_table(local_path(directory)).cast(arrow_schema_of(frame.schema))
        finally:
            remove_directory(directory)

    def rows(self, table: exp.Table) -> int:
        """Of one written to the scratch folder on the local disk: from its Parquet files' footers, with no job."""
        directory = local_path(self._scratch.get(table.name, ""))
        if not directory:
            return EngineAdapter.temp_table_rows(self.adapter, table)
        import pyarrow.parquet as pq

        return sum(pq.ParquetFile(f"{directory}/{name}").metadata.num_rows for name in os.listdir(directory)
                   if name.endswith(".parquet") and not name.startswith((".", "_")))

    def files(self, table: exp.Table):
        """Of one written to the scratch folder on the local disk (not a Connect server's): its Parquet files, read
        by Arrow."""
        directory = local_path(self._scratch.get(table.name, ""))
        if not directory or self.adapter.remote:
            return None
        import pyarrow.parquet as pq

        return pq.read_table(directory)

    def drop(self, name: str) -> None:
        self.spark.catalog.dropTempView(name)
        directory = self._scratch.pop(name, None)
        if directory is not None:
            remove_directory(directory)

    def has(self, name: str) -> bool:
        from pyspark.errors import AnalysisException

        try:        # (a temporary view is found before a table of the same name)
            return bool(self.spark.catalog.getTable(name).isTemporary)
        except AnalysisException:
            return False

    def load_arrow(self, name: str, table) -> exp.Table:
        # the rows travel inside the plan (a local relation): every read sees the same ones, with no job
        with self.adapter.errors():
            frame_of(self.spark, table).createOrReplaceTempView(name)
        return self.adapter.temp_table(name)

    def load_dataframe(self, name: str, frame, *, numbered: bool = True) -> exp.Table:
        # By name, its temporary view would be registered in its own session, where seqdedup's statements never
        # look; numbered, it is written to the warehouse, which any session of the same JVM can do (a foreachBatch
        # frame's session is a clone), but not one of the other kind.
        other_kind = is_remote(frame) != self.adapter.remote
        if not same_session(frame.sparkSession, self.spark) and (not numbered or other_kind):
            kind = "a Spark Connect" if is_remote(frame) else "a classic"
            given = "" if numbered else f" as {name!r}"
            raise TopicError(f"the DataFrame given{given} belongs to another SparkSession ({kind} one); create it "
                             "with the session seqdedup.connect was given")
        if not numbered:      # a frame used by name: a view of it, read as the user's own query would read it
            with self.adapter.errors():
                frame.createOrReplaceTempView(name)
            return self.adapter.temp_table(name)
        # Numbered in the frame's order (monotonically_increasing_id follows partitions, then rows), once.
        number = self.F.expr("row_number() OVER (ORDER BY monotonically_increasing_id()) - 1")
        return self._materialize(name, frame.withColumn(ARRIVAL, number))

    def _materialize(self, name: str, frame) -> exp.Table:
        """Compute a frame once, so that the steps that read it see the same rows (a view would be recomputed).

        A few rows (``IN_PLAN_BYTES`` as Spark estimates them) are collected and kept in the plans that read them,
        as a local relation: one job, and no file to list or scan when read. (A straddling batch entry makes a
        small statement materialize a dozen steps; each cost it about 0.4 s as files, about 0.15 s this way.)
        Other rows are written as Parquet to a scratch directory and read back, with the frame's schema: Spark then
        reads no file's footer to learn it (a third of the read). (Not ``localCheckpoint``: a query over two
        checkpoints of one lineage fails in Spark 4 with "key not found", and Spark Connect has no checkpoints.)"""
        with self.adapter.errors():
            if self._fits_in_plan(frame):
                frame_of(self.spark, frame.toArrow(), frame.schema).createOrReplaceTempView(name)
                return self.adapter.temp_table(name)
            directory = f"{self.adapter.warehouse()}/{SCRATCH}/{name}-{uuid.uuid4().hex[:8]}"
            frame.write.mode("error").parquet(directory)
            self._scratch[name] = directory
            self.spark.read.schema(frame.schema).parquet(directory).createOrReplaceTempView(name)
        return self.adapter.temp_table(name)

    def _fits_in_plan(self, frame) -> bool:
        """Whether a frame's rows are few enough to collect, by Spark's estimate, and Arrow can carry their types.
        Not where a generator makes them (``explode``, a table function): Spark estimates its rows as its input's,
        one row for ``explode(sequence(1, 10000000))``, and they would all come into the driver."""
        from pyspark.errors import PySparkException
        from pyspark.sql.pandas.types import to_arrow_schema

        if self.adapter.remote:
            return False
        plan = optimized(frame)
        if GENERATOR.search(plan.treeString()):
            return False
        try:
            to_arrow_schema(frame.schema, timezone="UTC")
        except PySparkException:      # (a year-month or calendar interval)
            return False
        return estimated_bytes(plan) <= self.adapter.IN_PLAN_BYTES
