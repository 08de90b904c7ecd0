"""seqdedup: effectively-once ingestion for tables, the way Apache Pulsar deduplicates messages, written as SQL.

    >>> import seqdedup
    >>> session = seqdedup.connect(":memory:")
    >>> _ = session.create_topic("events", {"payload": "STRING"})
    >>> _ = session.sql("CREATE TEMPORARY VIEW staging AS SELECT * FROM VALUES ('p1', 0, 'a'), ('p1', 0, 'a'), ('p1', 1, 'b') AS t(producer, seq, payload)")
    >>> session.sql("INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq)").written
    2
"""
from __future__ import annotations

from seqdedup.errors import (CatalogError, EngineError, InvalidEntryError, NotRewrittenError, PolicyError,
                             RewriteError, SeqdedupError, TopicError)
from seqdedup.udfs import DupStatus

__version__ = "0.1.0"


def connect(database=None, *, engine: str = "duckdb", read_only: bool = False, clock=None, dialect: str = "spark"):
    """A seqdedup session on an engine.

    ``database`` is a DuckDB file path (default ``seqdedup.duckdb`` in the working folder), ``":memory:"``, an
    open ``duckdb`` connection, or a ``SparkSession`` (then the engine is Spark; with ``engine="spark"`` and no
    session, a local one with a Hive catalog in ``seqdedup-spark/``). Statements are read as Spark SQL unless
    ``dialect`` says otherwise.
    """
    from seqdedup.extensions import create_adapter
    from seqdedup.session import Session, utcnow

    if hasattr(database, "sparkContext"):      # a SparkSession: the Spark engine, whatever engine says
        engine = "spark"
    adapter = create_adapter(engine, database, read_only=read_only)
    return Session(adapter, clock=clock or utcnow, dialect=dialect)


__all__ = ["connect", "DupStatus", "SeqdedupError", "InvalidEntryError", "RewriteError", "TopicError",
           "PolicyError", "CatalogError", "EngineError", "NotRewrittenError"]
