"""What each of seqdedup's Spark calls runs under, whatever session it runs on: the runtime settings it needs
(``SETTINGS``, held while the call runs and put back after) and whether a statement writes (a read-only session
refuses those)."""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Iterator

import sqlglot
from sqlglot import exp

from seqdedup.sql.dialects import SparkAnsi

from .frames import is_remote

def writes(statement: exp.Expression | str) -> bool:
    """Whether a statement changes stored data (a read, or a temporary view or function, does not).

    Example:
        >>> writes("CREATE OR REPLACE TEMPORARY VIEW v AS SELECT 1"), writes("INSERT INTO t SELECT 1")
        (False, True)
    """
    if isinstance(statement, str):
        try:
            statement = sqlglot.parse_one(statement, read=SparkAnsi)
        except sqlglot.errors.ParseError:
            return True
    if isinstance(statement, (exp.Query, exp.Describe, exp.Show, exp.Use, exp.Set)):
        return False
    if isinstance(statement, exp.Command):   # what sqlglot does not parse: SHOW ..., EXPLAIN ... read
        return str(statement.this).upper() not in ("SHOW", "EXPLAIN")
    if isinstance(statement, exp.Create):
        properties = statement.args.get("properties")
        return not (properties and any(isinstance(p, exp.TemporaryProperty) for p in properties.expressions))
    if isinstance(statement, exp.Drop):
        return not statement.args.get("temporary")
    return True


#: Runtime SQL settings seqdedup's Spark calls need, whatever session they run on: a user's own session may lack
#: them, and seqdedup sets them on it only while one of its calls runs (``held_settings``), then puts back what it
#: found.
SETTINGS = {
    # A replay prunes a topic's partitions by ``_commit >= n``, a filter an embedded Derby metastore cannot evaluate
    # on a BIGINT partition column (INTERNAL_ERROR_HIVE_METASTORE_PARTITION_FILTER); Spark then lists the
    # partitions and prunes them itself.
    "spark.sql.hive.metastorePartitionPruningFallbackOnException": "true",
    # seqdedup reads and writes Spark SQL in ANSI mode (sql/dialects.py): a bad cast or an overflow fails, as on
    # DuckDB, rather than giving NULL.
    "spark.sql.ansi.enabled": "true",
    # A statement that keeps a ledger writes its dropped entries beside its written ones, partitioned by their fate
    # (extensions/spark/commits.py): with a writer per value open in each task, Spark does not sort each task's rows
    # by the value first (5M rows on local[2]: 2.6 s against 3.7 s).
    "spark.sql.maxConcurrentOutputFileWriters": "2",
    # ... but only where the write's sort is left to the writer: a planned write puts it in the query plan, where the
    # concurrent writers never see unsorted rows (the standard 5M-row statement with a ledger: 21% more CPU than
    # without one, sorted; 8%, not). Other writes are unchanged: the writer sorts what it must itself.
    "spark.sql.optimizer.plannedWrite.enabled": "false",
}


@dataclass
class _Held:
    """SETTINGS as seqdedup holds them on one SparkSession."""

    calls: int = 0                                  # seqdedup's Spark calls running on the session now
    found: dict = field(default_factory=dict)       # setting -> the session's value before them (None: unset)


_held: dict[int, _Held] = {}        # id(SparkSession) -> what seqdedup holds on it
_held_lock = threading.Lock()


@contextlib.contextmanager
def held_settings(spark) -> Iterator[None]:
    """SETTINGS on ``spark`` while one of seqdedup's calls runs on it, from any thread or adapter: the first call in
    sets those the session lacks, the last one out puts back what it found (unsets what was unset)."""
    conf = spark.conf
    with _held_lock:
        held = _held.setdefault(id(spark), _Held())
        if not held.calls:
            lacking = {key: value for (key, value), now in zip(SETTINGS.items(), _values(spark, list(SETTINGS)))
                       if now != value}
            # what to put back: a value set explicitly, or None (unset); ``getAll`` walked the whole configuration
            # through Py4J, about 27 ms (a session seqdedup started lacks none of them)
            held.found = dict(zip(lacking, _values(spark, list(lacking), explicit=True)))
            for key, value in lacking.items():
                conf.set(key, value)
        held.calls += 1
    try:
        yield
    finally:
        with _held_lock:
            held.calls -= 1
            if not held.calls:
                for key, value in held.found.items():
                    conf.unset(key) if value is None else conf.set(key, value)


def _values(spark, keys: list[str], *, explicit: bool = False) -> tuple:
    """The session's values of the settings ``keys`` (``explicit``: as set on the session, None where a setting is
    left at Spark's default, as ``conf.get(key, None)`` gives it): one request on Spark Connect, where ``conf.get``
    is one each (``held_settings`` asks at each of seqdedup's calls)."""
    client = getattr(spark, "client", None) if is_remote(spark) else None
    if explicit and hasattr(client, "get_config_with_defaults"):
        return client.get_config_with_defaults(*[(key, None) for key in keys])
    if not explicit and hasattr(client, "get_configs"):
        return client.get_configs(*keys)
    return tuple(spark.conf.get(key, None) if explicit else spark.conf.get(key) for key in keys)

