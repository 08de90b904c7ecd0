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
    # by the value first. One more than the two values: a task falls back to sorting the rest of its rows as soon as
    # the writers it holds open reach this number, so at 2 every task that met a dropped entry sorted (the standard
    # 5M-row statement keeping keys: 1.16x the same keeping counts, 1.04x at 3; medians of six alternated runs).
    "spark.sql.maxConcurrentOutputFileWriters": "3",
    # ... but only where the write's sort is left to the writer: a planned write puts it in the query plan, where the
    # concurrent writers never see unsorted rows (the standard 5M-row statement with a ledger: 21% more CPU than
    # without one, sorted; 8%, not). Other writes are unchanged: the writer sorts what it must itself.
    "spark.sql.optimizer.plannedWrite.enabled": "false",
}


#: Settings a small statement's job runs under (``sized``): its expressions evaluated as they are, not compiled.
#: Spark generates and compiles Java code for each query it runs (some 15 to 40 ms a class), and writes a BIGINT or
#: TIMESTAMP constant into the code, so a statement's own values (its commit, its time) make a new class each time:
#: a 10-entry statement compiled four, about 50 ms of its 0.45 s. For a few thousand rows, evaluating the
#: expressions costs less than compiling them; past that it costs more (10,000 entries: 0.14 s more).
INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


@dataclass
class _Held:
    """SETTINGS, and INTERPRETED, as seqdedup holds them on one SparkSession."""

    calls: int = 0                                  # seqdedup's Spark calls running on the session now
    found: dict = field(default_factory=dict)       # setting -> the session's value before them (None: unset)
    small: int = 0                                  # small statements' jobs running now (``sized``)
    large: int = 0                                  # other statements' jobs running now
    interpreted: dict | None = None                 # INTERPRETED's settings as found, while they are held


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


@contextlib.contextmanager
def sized(spark, small: bool) -> Iterator[None]:
    """The job of a statement, ``small`` or not: a small one's runs under INTERPRETED, held on the session while
    one runs and no other statement's job of seqdedup's does (a large one's job, compiled, is faster by far; when one
    starts, the small ones under way finish compiled, which changes no result). The last one out puts back what it
    found."""
    def _apply(held: _Held) -> None:
        wanted = held.small > 0 and held.large == 0
        if wanted and held.interpreted is None:
            held.interpreted = dict(zip(INTERPRETED, _values(spark, list(INTERPRETED), explicit=True)))
            for key, value in INTERPRETED.items():
                spark.conf.set(key, value)
        elif not wanted and held.interpreted is not None:
            for key, value in held.interpreted.items():
                spark.conf.unset(key) if value is None else spark.conf.set(key, value)
            held.interpreted = None

    with _held_lock:
        held = _held.setdefault(id(spark), _Held())
        if small:
            held.small += 1
        else:
            held.large += 1
        _apply(held)
    try:
        yield
    finally:
        with _held_lock:
            if small:
                held.small -= 1
            else:
                held.large -= 1
            _apply(held)


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

