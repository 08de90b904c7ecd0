"""Producer leases in a Hive metastore (seqdedup/core/leases.py), for Spark sessions that share one with other drivers.

A lease's epoch is the partition ``(lease, epoch)`` of the table ``seqdedup_leases`` (catalog/schema.py), which
holds no row. Everything is SQL, so a Spark Connect client (no JVM) does it as a classic session does:

- the epochs of a lease: ``SHOW PARTITIONS seqdedup_leases PARTITION (lease = '<key>')``, filtered in the metastore;
- a claim: ``ALTER TABLE seqdedup_leases ADD PARTITION (lease = '<key>', epoch = <n>) LOCATION '.../<key>/<n>-<ms>'``,
  refused with PARTITIONS_ALREADY_EXIST (or the metastore database's unique key, when both are inside at once) to
  every driver but the first: the compare-and-set a commit's publish uses (``Commits.publish``). The
  directory's name carries the claim's time, so that an epoch whose claimant died before writing its properties
  still expires;
- a record: ``ALTER TABLE ... PARTITION (...) SET SERDEPROPERTIES (...)`` (Spark's only statement that changes a
  partition's metadata in place), read back with ``DESCRIBE TABLE EXTENDED ... PARTITION (...)``.

Calls to the metastore: a claim 4 (list, read the latest, register, write), a renewal 2 (write, list), a release 1;
the first claim of a process 2 more (the table made if missing, its directory read). A statement's check of the
names it writes (``seqdedup.core.leases.refuse_held_names``) 1 (every partition listed: the table is not made for it),
and 1 more per name with a live-looking lease.
"""
from __future__ import annotations

import functools
import re
import urllib.parse

from sqlglot import exp

from seqdedup.catalog.schema import LEASE_COLUMNS, LEASE_PARTITIONS, LEASES_TABLE, create_table, in_catalog
from seqdedup.errors import EngineError, already_exists

from .errors import causes

#: Property keys of a lease's epoch are this followed by the name a ``seqdedup.core.leases.Record`` reads.
PREFIX = "seqdedup."


def _properties(text: str) -> dict[str, str]:
    """seqdedup's properties from the ``Storage Properties`` Spark describes a partition with: ``[k=v, k=v]``, not
    escaped, which is why the values are written percent-encoded (a host name may hold a comma).

    Example:
        >>> _properties("[seqdedup.host=a%2Cb%5D, serialization.format=1, seqdedup.pid=7]")
        {'host': 'a,b]', 'pid': '7'}
    """
    pairs = (item.partition("=") for item in text.strip().removeprefix("[").removesuffix("]").split(", "))
    return {key.removeprefix(PREFIX): urllib.parse.unquote(value) for key, _, value in pairs if key.startswith(PREFIX)}


def _claimed_at(location: str) -> float:
    """When an epoch was registered, from its directory's name (``<epoch>-<milliseconds>``); 0 for a partition
    seqdedup did not make (long expired).

    Example:
        >>> _claimed_at("file:/w/seqdedup_leases/9f2c/3-1795700000250"), _claimed_at("file:/w/t/lease=9f2c/epoch=3")
        (1795700000.25, 0.0)
    """
    match = re.fullmatch(r"\d+-(\d+)", location.rstrip("/").rpartition("/")[2])
    return int(match[1]) / 1000 if match else 0.0


class HiveLeases:
    """The leases of a SparkAdapter's database (``seqdedup.core.leases.Store``)."""

    def __init__(self, adapter):
        self.adapter = adapter
        self.table = in_catalog(exp.table_(LEASES_TABLE))
        self._seen = False          # the table was seen to exist, or made (``latest``, ``_made``)

    @functools.cached_property
    def application(self) -> str:
        return self.adapter.spark.conf.get("spark.app.id")

    def epochs(self, key: str) -> list[int]:
        self._made     # (the table made first, if missing)
        # sqlglot has no SHOW PARTITIONS node: the command's text is the generated table and partition after it
        spec = f"PARTITIONS {self.adapter.sql(self.table)} {self.adapter.sql(self._partition(key))}"
        rows = self.adapter.fetchall(exp.Command(this="SHOW", expression=exp.Literal.string(spec)))
        return [int(row[0].rpartition("epoch=")[2]) for row in rows]

    def latest(self, keys) -> dict[str, int]:
        """The latest epoch of each of ``keys`` that has one: the table's partitions, listed in one call (none
        before the table exists; it is not made for a look-up)."""
        if not self._seen:
            if not self.adapter.columns(self.table):
                return {}
            self._seen = True
        spec = f"PARTITIONS {self.adapter.sql(self.table)}"
        found: dict[str, int] = {}
        for (partition,) in self.adapter.fetchall(exp.Command(this="SHOW", expression=exp.Literal.string(spec))):
            values = dict(part.partition("=")[::2] for part in partition.split("/"))
            key = values.get("lease")
            if key in keys:
                found[key] = max(found.get(key, 0), int(values["epoch"]))
        return found

    @property
    def stopped(self) -> bool:
        """Whether the SparkSession was stopped: a Spark Connect client's ``is_stopped``; a classic session's
        context has no JVM counterpart any more."""
        spark = self.adapter.spark
        if hasattr(type(spark), "is_stopped"):
            return spark.is_stopped
        return getattr(getattr(spark, "_sc", None), "_jsc", None) is None

    def read(self, key: str, epoch: int) -> tuple[dict[str, str], float]:
        rows = self.adapter.fetchall(exp.Describe(this=self.table.copy(), style="EXTENDED", kind="TABLE",
                                                  partition=self._partition(key, epoch)))
        names = [row[0] for row in rows]
        fields: dict[str, str] = {}
        for name, value, _ in rows[names.index("# Detailed Partition Information"):]:
            fields.setdefault(name, value)        # the partition's Location, not the table's after it
        return _properties(fields.get("Storage Properties", "")), _claimed_at(fields["Location"])

    def register(self, key: str, epoch: int, at: float) -> bool:
        location = f"{self._location}/{key}/{epoch}-{round(at * 1000)}"
        try:
            self.adapter.execute(exp.Alter(this=self.table.copy(), kind="TABLE", actions=[exp.AddPartition(
                this=self._partition(key, epoch), location=exp.LocationProperty(this=exp.Literal.string(location)))]))
        except EngineError as error:
            if already_exists(" / ".join(causes(error.__cause__ or error))):
                return False
            raise
        return True

    def write(self, key: str, epoch: int, properties: dict[str, str]) -> None:
        table = self.table.copy()
        table.set("partition", self._partition(key, epoch))
        self.adapter.execute(exp.Alter(this=table, kind="TABLE", actions=[exp.AlterSet(expressions=[exp.Properties(
            expressions=[exp.SerdeProperties(expressions=[
                exp.Property(this=exp.Literal.string(PREFIX + name),
                             value=exp.Literal.string(urllib.parse.quote(value, safe="")))
                for name, value in properties.items()])])])]))

    def unregister(self, key: str, epoch: int) -> None:
        self.adapter.execute(exp.Alter(this=self.table.copy(), kind="TABLE", actions=[exp.DropPartition(
            exists=True, expressions=[self._partition(key, epoch)])]))

    @functools.cached_property
    def _location(self) -> str:
        """The table's directory (the table made first, if missing): read only where a lease is registered, where a
        look-up needs only the table (on Spark Connect a DESCRIBE is a round trip)."""
        self._made
        return self.adapter.files.table_location(self.table)

    @functools.cached_property
    def _made(self) -> bool:
        """The table, created first if it is missing (as a Hive table: Spark sets a partition's storage properties
        only on those)."""
        if not self.adapter.columns(self.table):
            create = create_table(self.table, {**LEASE_COLUMNS, **LEASE_PARTITIONS})
            create.set("properties", exp.Properties(expressions=[
                exp.PartitionedByProperty(this=exp.Schema(expressions=[
                    exp.to_identifier(name) for name in LEASE_PARTITIONS])),
                exp.FileFormatProperty(this=exp.Var(this="PARQUET"), hive_format=True)]))
            self.adapter.files.precreate(self.table)
            try:
                self.adapter.execute(create)
            except EngineError as error:      # another driver created it at the same moment
                if not already_exists(error):
                    raise
        self._seen = True
        return True

    @staticmethod
    def _partition(key: str, epoch: int | None = None) -> exp.Partition:
        values = {"lease": exp.Literal.string(key), "epoch": None if epoch is None else exp.convert(epoch)}
        return exp.Partition(expressions=[exp.column(name).eq(value) for name, value in values.items()
                                          if value is not None])
