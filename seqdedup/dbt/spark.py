"""The dbt-spark bridge: an adapter of type ``seqdedup_spark``, which is dbt-spark plus one method.

dbt-spark runs no Python models outside Databricks, and a macro cannot reach the SparkSession, so the way in is an
adapter that builds on dbt-spark (as dbt-databricks does): its ``@available`` method ``seqdedup`` serves the dbt
package's requests on dbt's own SparkSession (``method: session``), opening a connection registers seqdedup's
guards on that session, and a statement of dbt's that calls ``is_not_dup`` (a plain model's) is refused before it
runs. dbt looks an adapter up as the module ``dbt.adapters.<type>``; seqdedup ships that module
(``seqdedup/dbt/seqdedup_spark``) in its distribution. Everything else, macros and materializations included, is
dbt-spark's: the adapter declares it as its dependency.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from dbt.adapters.base import available
from dbt.adapters.spark import SparkAdapter, SparkConnectionManager, SparkCredentials
from sqlglot import exp

import seqdedup
from seqdedup.extensions.spark import java_option, quiet_java_options, spark_defaults
from seqdedup.sql.dialects import SparkAnsi

from .bridge import refuse_is_not_dup, serve
from .model import DbtSpark, Target, engine_type

TYPE = "seqdedup_spark"

#: How long a topic statement waits for another thread's (seconds).
LOCK_TIMEOUT = 600.0


def spark_session(parameters: dict[str, Any] | None = None):
    """The SparkSession dbt-spark's ``method: session`` runs on: built as dbt-spark builds it (Hive support, the
    profile's ``server_side_parameters``), so whichever of the two comes first, both get the same session; when
    seqdedup's bridge comes first (it does, on opening dbt's connection), with ``quiet_settings`` too."""
    from dbt.adapters.spark.session import SparkSession     # dbt-spark's import of pyspark: loaded with it

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # workers run this Python, which has pyarrow
    builder = SparkSession.builder.enableHiveSupport()
    for key, value in {**(parameters or {}), **quiet_settings(parameters or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


#: The driver's Java options, which seqdedup adds to where a profile gives some (see ``quiet_settings``).
JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def quiet_settings(parameters: dict[str, Any]) -> dict[str, str]:
    """What a dbt run's SparkSession gets besides the profile's settings (``parameters``), none of which it
    overrides: Spark logs errors only (its default, WARN, prints some 45 lines a run about Hive, Derby and native
    libraries, none of them the user's concern), and so does the JVM as it starts, before ``spark.log.level``
    applies (seqdedup's log4j2 configuration, unless the user chose one: ``quiet_java_options``); no progress bars;
    and the embedded Derby metastore writes its ``derby.log`` beside its database, not in the folder dbt runs in
    (unless the profile's Java options set a ``derby.`` property). The Java options the profile gives (where it
    gives none, those of ``spark-defaults.conf``) are kept, with seqdedup's after them.

    Example:
        >>> settings = quiet_settings({"spark.hadoop.javax.jdo.option.ConnectionURL":
        ...                            "jdbc:derby:;databaseName=/data/spark/metastore_db;create=true",
        ...                            "spark.driver.extraJavaOptions": "-Xss4m"})
        >>> settings["spark.log.level"], settings["spark.driver.extraJavaOptions"].split()[:2]
        ('ERROR', ['-Xss4m', '-Dderby.stream.error.file=/data/spark/derby.log'])
        >>> "-Dlog4j2.configurationFile=file:" in settings["spark.driver.extraJavaOptions"]
        True
        >>> quiet_settings({"spark.log.level": "WARN"}).get("spark.log.level") is None
        True
    """
    settings = {"spark.log.level": "ERROR", "spark.ui.showConsoleProgress": "false"}
    # a profile's Java options replace spark-defaults.conf's, and so would seqdedup's where the profile gives none
    options = str(parameters.get(JAVA_OPTIONS) or spark_defaults().get(JAVA_OPTIONS, ""))
    added = []
    database = derby_database(str(parameters.get("spark.hadoop.javax.jdo.option.ConnectionURL", "")))
    if database is not None:
        home = Path(database).resolve().parent
        if "-Dderby." not in options:
            added.append(java_option("derby.stream.error.file", home / "derby.log"))
        # Hive's session makes a folder for downloaded resources, by default in /tmp, that nothing removes.
        settings["spark.hadoop.hive.downloaded.resources.dir"] = str(home / "hive-resources")
    settings = {key: value for key, value in settings.items() if key not in parameters}
    options = quiet_java_options(" ".join([options, *added]).strip(),
                                 chosen=str(parameters.get("spark.driver.defaultJavaOptions", "")))
    if options:
        settings[JAVA_OPTIONS] = options
    return settings


def derby_database(url: str) -> str | None:
    """The database path of an embedded Derby metastore's JDBC URL (None for any other metastore, or Derby in memory).

    Example:
        >>> derby_database("jdbc:derby:;databaseName=spark-home/metastore_db;create=true")
        'spark-home/metastore_db'
        >>> derby_database("jdbc:postgresql://db:5432/metastore") is None
        True
    """
    if not url.startswith("jdbc:derby:"):
        return None
    name, *attributes = url[len("jdbc:derby:"):].split(";")
    for attribute in attributes:
        key, _, value = attribute.partition("=")
        if key.strip().lower() == "databasename":
            name = value
    return name if name and not name.startswith(("memory:", "//")) else None


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

    def add_query(self, sql, *args, **kwargs):
        # A plain model that calls is_not_dup is refused before it runs: Spark would refuse a view for its temporary
        # function with a message that names no fix, and a table would fail on the guard.
        refuse_is_not_dup(sql, DbtSpark)
        return super().add_query(sql, *args, **kwargs)


class Seqdedup_SparkAdapter(SparkAdapter):
    # (dbt reads the adapter's module from the class name: Seqdedup_SparkAdapter -> dbt.adapters.seqdedup_spark)
    ConnectionManager = SeqdedupSparkConnectionManager

    @available
    def seqdedup(self, request: dict) -> object:
        """Serve a request of the seqdedup dbt package (a topic model's run, producer_state, last_sequence_id)."""
        return serve(TARGET, request)
