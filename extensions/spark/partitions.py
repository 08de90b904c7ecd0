"""A topic's partitions in Spark's catalog: listed (from the JVM's catalog in one call, or described one by one on
Spark Connect), added (the compare-and-set that publishes a commit), pointed at other directories all at once, and
dropped; a listing kept while a caller reads the topic several times (``listed_once``)."""
from __future__ import annotations

import contextlib
import random
import threading
import time
from typing import Iterator

import sqlglot
from sqlglot import exp

from seqdedup.errors import EngineError

from .collaborator import Collaborator
from .errors import MOVED_TRIES, MOVED_WAIT, moved_under
from .jvm import java, storage_at, with_location
from .layout import Layout, listed_partitions


class Partitions(Collaborator):
    def __init__(self, adapter):
        super().__init__(adapter)
        # (thread, topic key) -> [its partitions, or None until listed], inside listed_once
        self._listings: dict[tuple[int, str], list] = {}
        self._directories: dict[str, dict[str, str | None]] = {}   # table -> partition -> directory (Spark Connect)
        self._storage: dict[str, object] = {}       # table -> its storage format in the JVM (``add``)

    def known(self, table: exp.Table) -> dict[str, str | None]:
        """The directories of ``table``'s partitions this session knows (Spark Connect): partition -> directory."""
        return self._directories.setdefault(self.adapter.sql(table), {})

    def forget(self, table: exp.Table) -> None:
        """Forget what was kept of a table that is made again or dropped."""
        self._storage.pop(self.adapter.sql(table), None)

    @contextlib.contextmanager
    def listed_once(self, topic) -> Iterator[None]:
        """Nested in another for the same topic (a recovery inside ``Session.stats``), it keeps that one's listing:
        the outermost forgets it. Each thread lists for itself: another thread's listing may be older than a commit
        this one waited for."""
        key = (threading.get_ident(), topic.key)
        if key in self._listings:
            yield
            return
        self._listings[key] = [None]
        try:
            yield
        finally:
            del self._listings[key]

    def layout(self, topic) -> Layout:
        """The topic's partitions: listed (a call to the metastore, which grows with them), or as listed already
        inside ``listed_once``."""
        held = self._listings.get((threading.get_ident(), topic.key))
        layout = held[0] if held else None
        if layout is None:
            layout = Layout.of(self.listing(topic.table))
            if held is not None:
                held[0] = layout
        return layout

    def changed(self, topic) -> None:
        for (_, key), held in list(self._listings.items()):     # every thread's: the partitions changed under all
            if key == topic.key:
                held[0] = None

    def listing(self, table: exp.Table) -> list[tuple[str, str | None]]:
        """(value, directory) of each partition of a table partitioned by one column, from the session's catalog in
        one call (SHOW PARTITIONS gives no directories). Where the JVM is out of reach (Spark Connect),
        ``_described_partitions``. A listing that another driver's compaction changed under it (MOVED_UNDER) is
        listed again, a few times after a short random wait; then an EngineError that says a retry is safe."""
        for tries in range(1, MOVED_TRIES + 1):
            try:
                return self._list(table)
            except EngineError as error:
                if not moved_under(error):
                    raise
                if tries == MOVED_TRIES:
                    raise EngineError(f"another driver changed the partitions of {table.name} (a compaction) while "
                                      f"this one listed them, {tries} times in a row ({error}); nothing was written, "
                                      "and it is safe to run it again") from error
                time.sleep(random.uniform(0, MOVED_WAIT * tries / MOVED_TRIES))

    def _list(self, table: exp.Table) -> list[tuple[str, str | None]]:
        with self.adapter.errors():
            found = self.adapter.jvm_catalog(table)
            if found is None:
                return self._described(table)
            catalog, name = found
            listed = catalog.listPartitions(name, java(self.spark, "scala.Option").empty())
            return listed_partitions(listed.mkString("\n"), listed.size())

    def _described(self, table: exp.Table) -> list[tuple[str, str | None]]:
        """Spark Connect: the values SHOW PARTITIONS lists, each with the directory a DESCRIBE of it gives, a round
        trip each, so kept: a directory changes only when a compaction merges partitions, which then drops some.
        When a partition this session knew is gone, every directory is described again (another driver's
        compaction; until its drop, this session may take its merged partition for one commit, and read the
        entries of the commits merged into it twice, as any plain read does then)."""
        listed = self.adapter.fetchall(f"SHOW PARTITIONS {self.adapter.sql(table)}")
        values = [row[0].split("=", 1)[1] for row in listed]
        known = self.known(table)
        if not known.keys() <= set(values):
            known.clear()
        # (the DESCRIBEs alongside each other: a new process describes every partition once)
        described = {value: self.adapter.alongside(lambda number=int(value): self.directory_of(table, number))
                     for value in values if value not in known and value.isdigit()}
        for value in values:
            if value not in known:      # (a partition another tool made with no number has no spec to describe)
                known[value] = described[value].result() if value in described else None
        return [(value, known[value]) for value in values]

    def directory_of(self, table: exp.Table, number: int) -> str:
        describe = exp.Describe(this=table.copy(), style="EXTENDED", kind="TABLE",
                                partition=self.spec(number))
        return next(row[1] for row in self.adapter.fetchall(describe) if row[0] == "Location")

    def relocate(self, topic, locations: dict[int, str]) -> None:
        """Point partitions (``_commit`` -> directory) at new directories, all at once: one call to the metastore,
        which alters them in one transaction, so that no read sees some moved and others not. Where the JVM is out
        of reach (Spark Connect), one ALTER TABLE per partition, the first one's last: a read in between sees the
        first's entries twice, as plain reads after a kill there would until the next writer opens the topic."""
        self.changed(topic)
        table = topic.table
        with self.adapter.errors():
            found = self.adapter.jvm_catalog(table)
            if found is None:
                known = self.known(table)
                for number, location in sorted(locations.items(), reverse=True):
                    switch = table.copy()
                    switch.set("partition", self.spec(number))
                    known.pop(str(number), None)
                    self.adapter.execute(exp.Alter(this=switch, kind="TABLE", actions=[
                        exp.AlterSet(location=exp.Literal.string(location))]))
                    known[str(number)] = location
                return
            catalog, name = found
            converters = java(self.spark, "scala.jdk.javaapi.CollectionConverters")
            moved = java(self.spark, "java.util.ArrayList")()
            # (one listing: a metastore query per partition costs more)
            listed = catalog.listPartitions(name, java(self.spark, "scala.Option").empty())
            for partition in converters.asJava(listed):
                value = partition.spec().apply("_commit")
                if value.isdigit() and int(value) in locations:
                    moved.add(with_location(self.spark, partition, locations[int(value)]))
            if moved.size() != len(locations):
                raise EngineError(f"seqdedup could not find every partition it moves in {table.name} (found "
                                  f"{moved.size()} of {len(locations)}): nothing was moved; run it again")
            catalog.alterPartitions(name, converters.asScala(moved).toSeq())

    @staticmethod
    def spec(number: int) -> exp.Partition:
        return exp.Partition(expressions=[exp.column("_commit").eq(exp.convert(number))])

    def drop(self, topic, numbers: list[int]) -> None:
        if numbers:
            self.changed(topic)
            known = self._directories.get(self.adapter.sql(topic.table), {})
            for number in numbers:
                known.pop(str(number), None)
            self.adapter.execute(exp.Alter(this=topic.table.copy(), kind="TABLE", actions=[exp.DropPartition(
                exists=True, expressions=[self.spec(number) for number in numbers])]))

    def add(self, table: exp.Table, number: int, directory: str) -> None:
        """Register ``directory`` as the partition ``_commit = number``: the metastore registers one partition per
        number, a compare-and-set. Through the session's catalog in the JVM where it is in reach (about a third of
        an ``ALTER TABLE ... ADD PARTITION``, which also parses, resolves and refreshes the table; a topic's
        partitions are listed from the metastore by every read, so no refresh is needed), else that statement."""
        self.adapter.check_writable(None, f"a commit of {table.name}")
        found = self.adapter.jvm_catalog(table)
        if found is None:
            alter = sqlglot.parse_one("ALTER TABLE t ADD PARTITION (_commit = 0) LOCATION ''", read="spark")
            alter.set("this", table.copy())
            alter.find(exp.EQ).set("expression", exp.convert(number))
            alter.find(exp.LocationProperty).set("this", exp.Literal.string(directory))
            return self.adapter.execute(alter)
        catalog, name = found
        convert = java(self.spark, "org.apache.spark.api.python.PythonUtils")
        with self.adapter.errors():
            key = self.adapter.sql(table)
            if key not in self._storage:        # the table's storage format, which a new partition's copies
                self._storage[key] = catalog.getTableMetadata(name).storage()
            partition = java(self.spark, "org.apache.spark.sql.catalyst.catalog.CatalogTablePartition")(
                convert.toScalaMap({"_commit": str(number)}), storage_at(self.spark, self._storage[key], directory),
                convert.toScalaMap({}), int(time.time() * 1000), -1, java(self.spark, "scala.Option").empty())
            catalog.createPartitions(name, convert.toSeq([partition]), False)
