"""The dbt-spark bridge: an adapter of type ``seqdedup_spark``, which is dbt-spark plus one method.

dbt-spark runs no Python models outside Databricks, and a macro cannot reach the SparkSession, so the way in is an
adapter that builds on dbt-spark (as dbt-databricks does): its ``@available`` method ``seqdedup`` serves the dbt
package's requests on dbt's own SparkSession (``method: session``), and opening a connection registers seqdedup's
guards on that session. dbt looks an adapter up as the module ``dbt.adapters.<type>``; seqdedup ships that module
(``seqdedup/dbt/seqdedup_spark``) in its distribution. Everything else, macros and materializations included, is
dbt-spark's: the adapter declares it as its dependency.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
from dataclasses import dataclass
from typing import Any, Iterator

from dbt.adapters.base import available
from dbt.adapters.spark import SparkAdapter, SparkConnectionManager, SparkCredentials
from sqlglot import exp

import seqdedup
from seqdedup.sql.dialects import SparkAnsi

from .bridge import serve
from .model import Target, engine_type

TYPE = "seqdedup_spark"

#: How long a topic statement waits for another thread's (seconds).
LOCK_TIMEOUT = 600.0


def spark_session(parameters: dict[str, Any] | None = None):
    """The SparkSession dbt-spark's ``method: session`` runs on: built as dbt-spark builds it (Hive support, the
    profile's ``server_side_parameters``), so whichever of the two comes first, both get the same session."""
    from dbt.adapters.spark.session import SparkSession     # dbt-spark's import of pyspark: loaded with it

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # workers run this Python, which has pyarrow
    builder = SparkSession.builder.enableHiveSupport()
    for key, value in (parameters or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


class SparkTarget(Target):
    """One seqdedup session per SparkSession, kept for the process: it keeps each topic's recovered marks warm, and
    its writer lock lets one statement write at a time whatever dbt's thread count."""

    DIALECT = SparkAnsi
    _sessions: dict[int, Any] = {}
    _lock = threading.Lock()

    @contextlib.contextmanager
    def session(self) -> Iterator[Any]:
        spark = spark_session()
        with self._lock:
            session = self._sessions.get(id(spark))
            if session is None:
                session = self._sessions[id(spark)] = seqdedup.connect(spark, lock_timeout=LOCK_TIMEOUT)
        yield session

    def close(self) -> None:
        """Close the sessions kept for this process: a process that goes on after dbt (its tests, a scheduler that
        runs dbt in-process) then stops serving the marks it recovered to its other sessions."""
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
        for session in sessions:
            session.close()

    def describe(self, query: exp.Query) -> list[tuple[str, exp.DataType]]:
        fields = spark_session().sql(query.sql(dialect=self.DIALECT)).schema.fields
        return [(f.name, engine_type(f.name, f.dataType.simpleString(), SparkAnsi)) for f in fields]


TARGET = SparkTarget()


@dataclass
class SeqdedupSparkCredentials(SparkCredentials):
    @property
    def type(self) -> str:
        return TYPE


class SeqdedupSparkConnectionManager(SparkConnectionManager):
    TYPE = TYPE

    @classmethod
    def open(cls, connection):
        connection = super().open(connection)
        spark_session(connection.credentials.server_side_parameters)
        with TARGET.session():     # connecting registers the guards on the session (once per SparkSession)
            pass
        return connection


class Seqdedup_SparkAdapter(SparkAdapter):
    # (dbt reads the adapter's module from the class name: Seqdedup_SparkAdapter -> dbt.adapters.seqdedup_spark)
    ConnectionManager = SeqdedupSparkConnectionManager

    @available
    def seqdedup(self, request: dict) -> object:
        """Serve a request of the seqdedup dbt package (a topic model's run, producer_state, last_sequence_id)."""
        return serve(TARGET, request)
