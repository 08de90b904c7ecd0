"""The files of seqdedup's tables on Spark: where each table's directory is, the topic and catalog tables made
(Hive tables where several drivers append), rows appended as a file written from the driver, and a delete done by
writing the rows kept to a new directory that replaces the table's."""
from __future__ import annotations

import contextlib
import os
import shutil
import urllib.parse
import uuid
from pathlib import Path

from sqlglot import exp

from seqdedup.catalog.schema import create_table
from seqdedup.errors import EngineError

from ..base import EngineAdapter
from ..storage import TransactionalStorage
from .collaborator import Collaborator
from .errors import engine_error, not_found, unregistered_catalog
from .frames import Observed, as_spark_binds
from .jvm import java
from .layout import local_path, remove_directory

#: (warehouse, default namespace) -> table -> its directory (``TableFiles._locations``)
_LOCATIONS: dict[tuple[str, str], dict[str, str]] = {}


class TableFiles(Collaborator):
    def __init__(self, adapter):
        super().__init__(adapter)
        # table -> its directory, shared with the other sessions of this process on the same warehouse and default
        # namespace (where the catalog tables' names resolve): one that moves a table (``delete_rows``) makes them
        # all read it again, where each kept its own before and appended into the directory the move had removed
        # (the writer lock orders the sessions' writes)
        self._locations: dict[str, str] = _LOCATIONS.setdefault((adapter.identity, adapter.DEFAULT_NAMESPACE), {})
        self._table_columns: dict[str, list[tuple[str, str]]] = {}   # topic key -> its table's columns
        self._reading: dict[str, object] = {}      # table -> the future of its directory, being read (``read_ahead``)
        self._scripts = True                        # the server runs SQL scripts (``_refresh_in_one``)

    def append_rows(self, table: exp.Table, rows) -> None:
        """Where the warehouse is on the local disk, the rows become one Parquet file in the table's directory,
        written from here: a Spark job would cost a small statement a fifth of its time. The file is written under
        a hidden name (Spark lists no file whose name starts with a dot) and renamed into place, so a read sees all
        of it or none of it; then Spark's listing of the table is refreshed. Elsewhere (HDFS, an object store), an
        INSERT."""
        directory = local_path(self.directory(table))
        if directory is None or not rows.num_rows:
            return EngineAdapter.append_rows(self.adapter, table, rows)
        import pyarrow.parquet as pq

        self.adapter.check_writable(None, f"an append to {table.name}")
        name = f"part-{uuid.uuid4().hex}-seqdedup.parquet"
        try:
            # (INT96 timestamps, as Spark's own Parquet writer stores them by default)
            pq.write_table(as_spark_binds(rows), f"{directory}/.{name}", use_deprecated_int96_timestamps=True)
            os.rename(f"{directory}/.{name}", f"{directory}/{name}")
        except OSError as error:
            with contextlib.suppress(OSError):
                os.remove(f"{directory}/.{name}")
            raise engine_error(error) from error
        self.forget(table)

    def forget(self, table: exp.Table) -> None:
        """Spark keeps a table's file listing once read: files added other than by Spark stay unseen until the
        listing is dropped. In reach of the JVM, the table's entry and the listings are dropped (the next read lists
        again); else ``REFRESH TABLE``, which also resolves the table again (some 30 ms)."""
        found = self.adapter.jvm_catalog(table)
        with self.adapter.errors():
            if found is None:
                return self.spark.catalog.refreshTable(self.adapter.sql(table))
            catalog, name = found
            catalog.invalidateCachedTable(name)
            java(self.spark, "org.apache.spark.sql.execution.datasources.FileStatusCache").getOrCreate(
                self.spark._jsparkSession).invalidateAll()

    def create_topic_table(self, table: exp.Table, columns: dict[str, exp.DataType]) -> None:
        # what this process kept of a table of that name (dropped outside seqdedup) is forgotten, and nothing else:
        # the catalog tables' directories stay known (forgetting them all made the next statement read them again)
        name = self.adapter.sql(table)
        self._table_columns.pop(f"{table.db}.{table.name}", None)
        self._locations.pop(name, None)
        self.adapter.partitions.forget(table)
        create = create_table(table, columns, exists=False)
        create.set("properties", exp.Properties(expressions=[
            exp.FileFormatProperty(this=exp.Var(this="PARQUET")),
            exp.PartitionedByProperty(this=exp.Schema(expressions=[exp.to_identifier("_commit")]))]))
        self.precreate(table)
        self.adapter.execute(create)

    def precreate(self, table: exp.Table) -> None:
        """Where several drivers may create the same table at once, make its folder first. The metastore of a
        driver that loses the race deletes the folder it made for the table, even when the winner uses it: made
        beforehand, nobody made it, and nobody deletes it. (A local warehouse only; elsewhere, create the catalog
        and the topics from one driver before several write.)"""
        if self.adapter.exclusive:
            return
        database = self.adapter.database_of(table) or self.adapter.DEFAULT_NAMESPACE
        with self.adapter.errors():
            root = local_path(self.spark.catalog.getDatabase(database).locationUri)
        if root is not None:
            os.makedirs(f"{root.rstrip('/')}/{table.name.lower()}", exist_ok=True)

    def create_catalog_table(self, table: exp.Table, columns: dict[str, exp.DataType]) -> bool:
        """Where several drivers append to the catalog tables, they are Hive tables (``STORED AS PARQUET``): Spark
        writes a Hive table's rows through a staging folder of each write's own (``__init__`` keeps it from using
        its file source writer), where a data source table's writes share ``<table>/_temporary``, which the first
        write to finish deletes under the others. Without IF NOT EXISTS: the metastore's answer says whether the
        table was there (an EngineError that ``already_exists`` recognizes), with no round trip to ask first."""
        create = create_table(table, columns, exists=False)
        if not self.adapter.exclusive:
            create.set("properties", exp.Properties(expressions=[
                exp.FileFormatProperty(this=exp.Var(this="PARQUET"), hive_format=True)]))
        self.precreate(table)
        try:
            self.adapter.execute(create)
        except EngineError as error:
            if "LOCATION_ALREADY_EXISTS" in str(error):
                raise unregistered_catalog(table, error) from error
            raise
        return True

    def columns_of(self, topic) -> list[tuple[str, str]]:
        if topic.key not in self._table_columns:
            self._table_columns[topic.key] = self.adapter.columns(topic.table)
        return self._table_columns[topic.key]

    def location(self, topic) -> str:
        return self.directory(topic.table)

    def directory(self, table: exp.Table) -> str:
        """A table's directory, read once (``delete_rows`` and dropping a topic forget it)."""
        key = self.adapter.sql(table)
        if key not in self._locations:
            reading = self._reading.pop(key, None)
            self._locations[key] = reading.result() if reading is not None else self.table_location(table)
        return self._locations[key]

    def read_ahead(self, tables: list[exp.Table]) -> None:
        """Start reading the directories of ``tables`` this process does not know yet, alongside the caller's next
        calls (``alongside``; a commit's statement, a job): on Spark Connect each is a DESCRIBE, a round trip the
        commit would wait for when it appends to the table."""
        for table in tables:
            key = self.adapter.sql(table)
            if key not in self._locations and key not in self._reading:
                self._reading[key] = self.adapter.alongside(lambda table=table: self.table_location(table))

    def table_location(self, table: exp.Table) -> str:
        """From the session's catalog in the JVM, one call; where it is out of reach (Spark Connect), a DESCRIBE
        EXTENDED: a query, about half a second in a new driver."""
        found = self.adapter.jvm_catalog(table)
        if found is not None:
            catalog, name = found
            with self.adapter.errors():
                # (written as DESCRIBE writes it: a path, not the URI, whose special characters are %-escaped)
                uri = catalog.getTableMetadata(name).location()
                return str(java(self.spark, "org.apache.spark.sql.catalyst.catalog.CatalogUtils").URIToString(
                    uri)).rstrip("/")
        rows = self.adapter.fetchall(exp.Describe(this=table.copy(), style="EXTENDED"))
        return next(row[1] for row in rows if row[0] == "Location").rstrip("/")

    def delete_rows(self, table: exp.Table, condition: exp.Expression) -> None:
        """Parquet tables have no DELETE: the rows kept are written to a new directory beside the table's, which
        replaces it in one metastore operation (``ALTER TABLE SET LOCATION``); the old directory is removed after."""
        self.adapter.check_writable(None, f"a delete from {table.name}")
        name = self.adapter.sql(table)
        doomed = self.F.expr(self.adapter.sql(exp.func("coalesce", condition.copy(), exp.false())))
        old = self.directory(table)
        directory = f"{old.rsplit('/', 1)[0]}/{table.name}-{uuid.uuid4().hex}"
        # one job: the rows kept are written, the rows deleted counted on the way (a small table's job is not
        # compiled: ``condition``'s constants are new at each delete)
        small = self.adapter.small(self.adapter.estimated_size(exp.select("*").from_(table.copy())))
        with self.adapter.errors(), self.adapter.sized(small):
            observed = Observed(self.spark.table(name).withColumn("__sd_doomed", doomed),
                                 doomed=self.F.count_if(self.F.col("__sd_doomed")))
            observed.frame.where("NOT __sd_doomed").drop("__sd_doomed").write.mode("error").parquet(directory)
            if not observed.values()["doomed"]:
                remove_directory(directory)      # nothing to delete: the table stays where it is
                return
        self.adapter.execute(exp.Alter(this=table.copy(), kind="TABLE",
                               actions=[exp.AlterSet(location=exp.Literal.string(directory))]))
        self._locations.pop(name, None)
        self._reading.pop(name, None)
        with self.adapter.errors():
            self.spark.catalog.refreshTable(name)
            self.delete(old, directory=True)

    def delete(self, uri: str, *, directory: bool) -> None:
        """Delete a file or a directory (and what it holds) of the warehouse: directly on a local file system, else
        through Hadoop's file system in the JVM, which a Spark Connect client cannot reach."""
        local = local_path(urllib.parse.unquote(urllib.parse.urlsplit(uri).path) if uri.startswith("file:") else uri)
        if local:
            shutil.rmtree(local, ignore_errors=True) if directory else Path(local).unlink(missing_ok=True)
        elif self.adapter.remote:
            raise EngineError(f"seqdedup cannot delete {uri} from a Spark Connect session (no access to Hadoop's file "
                              "system): on a warehouse that is not on a local disk, run this with a classic "
                              "SparkSession; what it did so far stays correct, and running it again finishes it")
        else:
            path = java(self.spark, "org.apache.hadoop.fs.Path")(java(self.spark, "java.net.URI")(uri))
            path.getFileSystem(self.spark._jsc.hadoopConfiguration()).delete(path, directory)

    def drop_topic_table(self, topic) -> None:
        TransactionalStorage(self.adapter).drop_topic_table(topic)     # (a DROP TABLE, as any engine's)
        self._locations.pop(self.adapter.sql(topic.table), None)
        self.adapter.partitions.forget(topic.table)
        self.adapter.commits.close(topic)

    def refresh(self, *tables: exp.Table) -> None:
        """Spark keeps a table's file listing once read: rows another driver appended since stay unseen until then."""
        if self.adapter.exclusive:
            return
        from pyspark.errors import AnalysisException

        with self.adapter.errors():
            if self.adapter.remote and len(tables) > 1 and self._refresh_in_one(tables):
                return
            for table in tables:
                try:        # (one call each: a missing table's error caught, rather than a tableExists first)
                    self.spark.catalog.refreshTable(self.adapter.sql(table))
                except AnalysisException as error:
                    if not not_found(error, table):
                        raise

    def _refresh_in_one(self, tables: tuple[exp.Table, ...]) -> bool:
        """Spark Connect: refresh ``tables`` in one request, a SQL script (Spark 4) of a REFRESH TABLE each: a
        request costs a Connect server some 50 ms, a refresh of a small table less. False where the script fails
        (a table missing: the caller refreshes them one by one; a server without SQL scripting: from now on too)."""
        from pyspark.errors import PySparkException

        if not self._scripts:
            return False
        refreshes = " ".join(f"{self.adapter.sql(exp.Refresh(this=table.copy(), kind='TABLE'))};" for table in tables)
        try:
            self.spark.sql(f"BEGIN {refreshes} END")
        except PySparkException as error:
            self._scripts = error.getCondition() == "TABLE_OR_VIEW_NOT_FOUND"
            return False
        return True

    def columns(self, table: exp.Table, *, committed: bool = False) -> list[tuple[str, str]]:
        # (the schema asked for at once, a missing table's error caught: on Spark Connect each catalog call is a
        # round trip, and tableExists first made it two)
        from pyspark.errors import AnalysisException

        name = self.adapter.sql(table)
        try:
            with self.adapter.errors():
                return [(f.name, f.dataType.simpleString()) for f in self.spark.table(name).schema.fields]
        except EngineError as error:
            if isinstance(error.__cause__, AnalysisException) and not_found(error.__cause__, table):
                return []
            raise

    def tables_columns(self, tables: list[exp.Table]) -> list[list[tuple[str, str]]]:
        """One query names every table, each one's columns as a struct: analysed, never run (a third of the time
        of a lookup per table, which ``connect`` made for each catalog table). A table missing fails it: then each
        table is looked up alone."""
        alias = [f"t{i}" for i in range(len(tables))]
        select = exp.select(*[exp.alias_(exp.func("struct", exp.Column(this=exp.Star(), table=exp.to_identifier(a))),
                                         a) for a in alias]).from_(tables[0].copy().as_(alias[0]))
        for table, name in zip(tables[1:], alias[1:]):
            select = select.join(table.copy().as_(name), join_type="cross")
        try:
            with self.adapter.errors():
                fields = self.adapter.query(select.limit(0)).schema.fields
        except EngineError:
            return EngineAdapter.tables_columns(self.adapter, tables)
        return [[(f.name, f.dataType.simpleString()) for f in field.dataType.fields] for field in fields]
