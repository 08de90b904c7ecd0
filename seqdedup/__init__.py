"""seqdedup: effectively-once ingestion for tables, the way Apache Pulsar deduplicates messages, written as SQL.

    >>> import seqdedup
    >>> session = seqdedup.connect(":memory:")
    >>> _ = session.create_topic("events", {"payload": "STRING"})
    >>> _ = session.sql("CREATE TEMPORARY VIEW staging AS SELECT * FROM VALUES ('p1', 0, 'a'), ('p1', 0, 'a'), ('p1', 1, 'b') AS t(producer, seq, payload)")
    >>> session.sql("INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq)").written
    2
"""
from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Any, Callable

from seqdedup.errors import (CatalogError, CommitConflict, EngineError, InvalidEntryError, NotRewrittenError,
                             PayloadConflictError, PolicyError, RewriteError, SeqdedupError, SequenceGapError,
                             TopicError)
from seqdedup.udfs import DupStatus

__version__ = "0.1.0"

if TYPE_CHECKING:       # what the lazy names below are, for type checkers; nothing is imported at run time
    from seqdedup.clients import consumer, kafka, producer, streaming  # noqa: F401
    from seqdedup.clients.consumer import Reader, consume, consumer_position
    from seqdedup.clients.producer import Producer
    from seqdedup.clients.streaming import foreach_batch
    from seqdedup.core import recovery  # noqa: F401
    from seqdedup.session import Session


def connect(database: object = None, *, engine: str = "duckdb", read_only: bool = False,
            clock: Callable[[], _dt.datetime] | None = None, dialect: str = "spark",
            lock_timeout: float | None = 60.0) -> Session:
    """A seqdedup session on an engine.

    ``database`` is a DuckDB file path (default ``seqdedup.duckdb`` in the working folder), ``":memory:"``, an
    open ``duckdb`` connection, or a ``SparkSession``, classic or Spark Connect (then the engine is Spark; with
    ``engine="spark"`` and no session, a local one with a Hive catalog in ``seqdedup-spark/``). Statements are read as Spark SQL unless
    ``dialect`` says otherwise. One write runs at a time per database: a writer waits at most ``lock_timeout``
    seconds for another (a thread of this process, or another process holding the DuckDB file or the Spark home),
    then gets an EngineError; ``None`` waits as long as it takes (see ``seqdedup.core.locks``).
    """
    from seqdedup.extensions import create_adapter
    from seqdedup.session import Session, utcnow

    if type(database).__module__.startswith("pyspark.sql"):     # a SparkSession, classic or Spark Connect
        engine = "spark"
    adapter = create_adapter(engine, database, read_only=read_only, lock_timeout=lock_timeout)
    try:
        return Session(adapter, clock=clock or utcnow, dialect=dialect, lock_timeout=lock_timeout)
    except BaseException:      # a refused catalog: let go of the database (a DuckDB file stays locked while open)
        adapter.close()
        raise


#: Loaded on first use, so that ``import seqdedup`` stays light: name -> module.
_LAZY = {"consume": "seqdedup.clients.consumer", "consumer_position": "seqdedup.clients.consumer",
         "Reader": "seqdedup.clients.consumer", "Producer": "seqdedup.clients.producer",
         "foreach_batch": "seqdedup.clients.streaming",
         "load_ipython_extension": "seqdedup.notebook"}    # %load_ext seqdedup, in Jupyter or IPython


#: Modules reachable as attributes without an import of their own (``seqdedup.streaming.foreach_batch``): name ->
#: module.
_SUBMODULES = {"streaming": "seqdedup.clients.streaming", "consumer": "seqdedup.clients.consumer",
               "producer": "seqdedup.clients.producer", "kafka": "seqdedup.clients.kafka",
               "recovery": "seqdedup.core.recovery"}


def __getattr__(name: str) -> Any:
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(_SUBMODULES[name])
    raise AttributeError(f"module 'seqdedup' has no attribute {name!r}")


__all__ = ["connect", "consume", "consumer_position", "Reader", "Producer", "foreach_batch", "DupStatus", "SeqdedupError", "InvalidEntryError", "RewriteError", "TopicError",
           "PolicyError", "CatalogError", "EngineError", "CommitConflict", "NotRewrittenError", "SequenceGapError",
           "PayloadConflictError"]
