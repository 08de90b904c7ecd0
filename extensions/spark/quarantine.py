"""Rows another tool wrote into a topic's table on Spark, moved aside into a side table (``seqdedup topic
quarantine``): their files copied whole, their partitions dropped, the files left in seqdedup's partitions deleted,
each step safe to repeat."""
from __future__ import annotations

import uuid

from sqlglot import exp

from seqdedup.catalog.names import STAGING
from seqdedup.catalog.schema import FOREIGN_COLUMNS, foreign_commits, written_by_seqdedup
from seqdedup.catalog.state import literal

from .collaborator import Collaborator
from .frames import Observed


class Quarantine(Collaborator):
    def foreign(self, topic) -> list[str]:
        return self.adapter.partitions.layout(topic).foreign

    def own_rows(self, topic) -> exp.Expression:
        """Also leaves out the partitions a compaction merged into another and did not drop yet (``Layout``)."""
        layout = self.adapter.partitions.layout(topic)
        return written_by_seqdedup(foreign_commits(layout.foreign) | {unit.last for unit in layout.covered})

    def move(self, topic, side: exp.Table, now) -> int:
        """Spark has no transactions, so a move is three steps, each safe to repeat: (1) the files that hold
        foreign rows are copied whole into a new partition of ``side`` (written, then registered: one metastore
        operation), but for those a move cut short copied already (their ``_moved_from``); (2) the foreign
        partitions are dropped, their directories with them; (3) the foreign files left in seqdedup's partitions
        (an INSERT into one adds files to its directory) are deleted. Run again after a crash, it finishes the work
        and copies no file twice. (Parquet tables enforce no NOT NULL: a topic cannot refuse such rows.)"""
        F = self.F

        self.adapter.check_writable(None, f"a move of the foreign rows of {topic.key}")
        partitions = self.foreign(topic)
        foreign = exp.not_(written_by_seqdedup(foreign_commits(partitions)))
        file = F.col("_metadata.file_path")
        with self.adapter.errors():
            rows = self.spark.table(self.adapter.sql(topic.table))
            files = [row[0] for row in rows.where(F.expr(self.adapter.sql(foreign))).select(file).distinct().collect()]
            copied = set()
            if files and not self.adapter.columns(side):
                self._create_side_table(topic, side)
            elif files:
                copied = {row[0] for row in
                          self.spark.table(self.adapter.sql(side)).select("_moved_from").distinct().collect()}
            moved = self._copy_files(rows, [f for f in files if f not in copied], side, now)
        if partitions:
            drop = exp.DropPartition(exists=True, expressions=[
                exp.Partition(expressions=[exp.column("_commit").eq(exp.convert(int(v) if v.isdigit() else v))])
                for v in partitions])
            self.adapter.execute(exp.Alter(this=topic.table.copy(), kind="TABLE", actions=[drop]))
        with self.adapter.errors():
            for name in files:
                self.adapter.files.delete(name, directory=False)
            self.spark.catalog.refreshTable(self.adapter.sql(topic.table))
        return moved

    def _create_side_table(self, topic, side: exp.Table) -> None:
        """``side``: the topic's columns and FOREIGN_COLUMNS, partitioned by ``_move``."""
        extra = [exp.alias_(exp.cast(exp.null(), kind), name) for name, kind in FOREIGN_COLUMNS.items()]
        self.adapter.execute(exp.Create(
            this=side.copy(), kind="TABLE",
            expression=exp.select("*", *extra).from_(topic.table.copy()).where(exp.false()),
            properties=exp.Properties(expressions=[
                exp.FileFormatProperty(this=exp.Var(this="PARQUET")),
                exp.PartitionedByProperty(this=exp.Schema(expressions=[exp.to_identifier("_move")]))])))

    def _copy_files(self, rows, files: list[str], side: exp.Table, now) -> int:
        """Copy the rows of ``files`` (of the frame ``rows``) into a new partition of ``side``; how many."""
        F = self.F

        if not files:
            return 0
        move = max((int(value) for value, _ in self.adapter.partitions.listing(side) if value.isdigit()), default=0) + 1
        directory = f"{self.adapter.files.table_location(side)}/{STAGING}/{move}-{uuid.uuid4().hex}"
        file = F.col("_metadata.file_path")
        observed = Observed(rows.where(file.isin(files)).select(
            "*", file.alias("_moved_from"), F.expr(self.adapter.sql(literal(now))).alias("_moved_at")),
            rows=F.count(F.lit(1)))
        observed.frame.write.mode("error").parquet(directory)
        self.adapter.execute(exp.Alter(this=side.copy(), kind="TABLE", actions=[exp.AddPartition(
            this=exp.Partition(expressions=[exp.column("_move").eq(exp.convert(move))]),
            location=exp.LocationProperty(this=exp.Literal.string(directory)))]))
        return observed.values()["rows"]
