"""Helpers for a classic session's JVM (Py4J): its classes, looked up once, and the copies of Spark's catalog entries
that point a table or partition at another directory; the optimizer's estimate of a frame's size."""
from __future__ import annotations

import functools
import re

_STORAGE_FIELDS: int | None = None      # see _storage_fields


def _storage_fields(storage) -> int:
    """The fields of Spark's CatalogStorageFormat (the arguments of its ``copy``), looked up once per process."""
    global _STORAGE_FIELDS
    if _STORAGE_FIELDS is None:
        _STORAGE_FIELDS = len(next(m for m in storage.getClass().getMethods()
                                   if m.getName() == "copy").getParameterTypes())
    return _STORAGE_FIELDS


def java(spark, name: str):
    """The JVM class ``name`` (a full name) of a classic session's JVM."""
    return _java_class(spark._jvm._gateway_client, name)


@functools.lru_cache(maxsize=64)
def _java_class(client, name: str):
    # Looked up once: py4j resolves ``jvm.org.apache.x.Y`` a segment at a time, a round trip each, and each segment
    # that is not a class is a class lookup that fails only after searching every jar. A small statement made 81
    # lookups through py4j, now 38 (pyspark's own).
    from py4j.java_gateway import JavaClass

    return JavaClass(name, client)


def storage_at(spark, storage, location: str):
    """A copy of Spark's storage format of a table or partition, at another directory (the other fields, whatever
    this Spark version has, kept as they are)."""
    # (``location`` as Spark writes a directory, a space or a '%' as is: Spark's own parse encodes them)
    uri = java(spark, "org.apache.spark.sql.catalyst.catalog.CatalogUtils").stringToURI(location)
    return storage.copy(java(spark, "scala.Option").apply(uri),
                        *[getattr(storage, f"copy$default${i}")() for i in range(2, _storage_fields(storage) + 1)])


def with_location(spark, partition, location: str):
    """A copy of Spark's catalog entry for a partition, with another directory."""
    return partition.copy(partition.spec(), storage_at(spark, partition.storage(), location), partition.parameters(),
                          partition.createTime(), partition.lastAccessTime(), partition.stats())



def optimized(frame):
    """A (classic) frame's optimized logical plan, in the JVM."""
    return frame._jdf.queryExecution().optimizedPlan()


def estimated_bytes(plan) -> int:
    """The size of an optimized plan's rows as Spark's optimizer estimates it."""
    return int(str(plan.stats().sizeInBytes()))   # (a Scala BigInt)


#: A generator or table function in a plan's tree (Spark estimates none of their rows beyond their input's)
GENERATOR = re.compile(r"^[\s:+|-]*(Generate|\w*UDTF)", re.MULTILINE)

