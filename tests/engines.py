"""The engines the behaviour suite runs on: the only place in the tests that names them."""
from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import os
from dataclasses import dataclass, field
from pathlib import Path

from sqlglot import exp

import seqdedup
from seqdedup.catalog.schema import SYSTEM_COLUMNS
from seqdedup.catalog.state import literal

from . import jvm
from .positions import position_problem


@dataclass(frozen=True)
class EngineUnderTest:
    name: str                       # the pytest marker and id
    family: str                     # the engine's name for seqdedup.connect: "duckdb" or "spark"


#: Spark Connect ("connect") is Spark through a Connect session: a server of the test process's own
#: (``connect_session``), reached over gRPC as a client with no JVM of its own.
ENGINES = [EngineUnderTest("duckdb", "duckdb"), EngineUnderTest("spark", "spark"),
           EngineUnderTest("connect", "spark")]
_spark = None
_connect = None
_connect_server = None
_databases = iter(range(1, 10**9))


def spark_session(home: str):
    """One SparkSession per test process (starting one costs seconds), with a Hive catalog under ``home``."""
    global _spark
    if _spark is None:
        from seqdedup.extensions.spark import local_session

        # This JVM runs the whole suite: the full JIT (tests/jvm.py gives the short-lived ones only its first
        # tier), read by the JVM from the environment when it starts.
        options = os.environ.get("JAVA_TOOL_OPTIONS")
        os.environ["JAVA_TOOL_OPTIONS"] = jvm.options(long_lived=True)
        try:
            _spark = local_session(home, master="local[2]")
        finally:
            if options is None:
                os.environ.pop("JAVA_TOOL_OPTIONS")
            else:
                os.environ["JAVA_TOOL_OPTIONS"] = options
        _spark.conf.set("spark.sql.shuffle.partitions", "1")
    return _spark


def connect_session(home: str):
    """One Spark Connect session per test process, on a server of its own with a Hive catalog beside ``home`` (a
    home of its own: the server is another process, and embedded Derby admits one)."""
    global _connect, _connect_server
    if _connect is None:
        from seqdedup.extensions.spark.connect_server import start_local_server

        _connect_server = start_local_server(f"{home}-connect")
        _connect = _connect_server.session()
        atexit.register(stop_connect)
        _connect.conf.set("spark.sql.shuffle.partitions", "1")
    return _connect


def connect_started() -> bool:
    return _connect is not None


def stop_connect() -> None:
    """Stop the test process's Spark Connect session and its server, if started: once its tests are done, an idle
    server still takes about 2 s of CPU a minute (a JVM's housekeeping) from the tests beside it, on 2 cores. A
    later test on Spark Connect starts another."""
    global _connect, _connect_server
    if _connect is not None:
        _connect.stop()
        _connect = None
    if _connect_server is not None:
        _connect_server.stop()
        _connect_server = None


def engine_session(engine: EngineUnderTest, home: str):
    """The test process's session on a Spark engine (classic or Connect)."""
    return connect_session(home) if engine.name == "connect" else spark_session(home)


#: Adapter settings under which every statement takes the way of large statements, whatever its size: the window
#: plan's (Spark: the marks joined as a relation, the rows distributed by producer, the job compiled), and the row
#: plan's (DuckDB: the marks joined, the outcome an aggregate of the engine's).
DISTRIBUTED = {"MARKS_AS_MAP": None, "ONE_TASK_BYTES": None, "INTERPRETED_BYTES": None,
               "FETCHED_OUTCOME_AT_MOST": None}


def _configured(session, settings: dict) -> None:
    for name, value in settings.items():
        setattr(session.adapter, name, value)


class Clock:
    """A clock tests move by hand (purges and time-based snapshots)."""

    def __init__(self, start: dt.datetime = dt.datetime(2026, 1, 1, 12, 0, 0)):
        self.now = start

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += dt.timedelta(**delta)


@dataclass
class Harness:
    """A fresh database on one engine, and the few moves the behaviour tests make."""

    engine: EngineUnderTest
    database: str                   # DuckDB: the database file; Spark: the home of the test process's session
    clock: Clock = field(default_factory=Clock)
    adapter: dict = field(default_factory=dict)     # adapter settings of every session opened (e.g. DISTRIBUTED)

    def __post_init__(self) -> None:
        if self.engine.family == "spark":
            # a database of its own per test: its own catalog tables and topics
            spark = engine_session(self.engine, self.database)
            self.namespace = f"test_{next(_databases)}"
            spark.sql(f"CREATE DATABASE {self.namespace}")
            spark.sql(f"USE {self.namespace}")
        else:
            self.namespace = "main"
        self.session = self.connect()

    def connect(self, target=None, **options):
        if target is None:
            target = engine_session(self.engine, self.database) if self.engine.family == "spark" else self.database
        session = seqdedup.connect(target, engine=self.engine.family, clock=self.clock, **options)
        _configured(session, self.adapter)
        return session

    def configure(self, **settings) -> None:
        """Adapter settings for the session open now and every session opened after it (``adapter``)."""
        self.adapter.update(settings)
        _configured(self.session, settings)

    def key(self, topic: str = "events") -> str:
        """The topic's name in the catalog tables: namespace.name."""
        return f"{self.namespace}.{topic}"

    def restart(self, *, new_spark_session: bool = False) -> None:
        """A new session on the same database, as a new process would open it: state comes back from the catalog
        alone (another session of this process, such as dbt's, would keep serving the marks in memory).
        ``new_spark_session``: on Spark, the new seqdedup session is on ``spark.newSession()`` (its own settings,
        temporary views and current database, which it selects with USE), as an application's second session."""
        self.session.close()
        if new_spark_session and self.engine.family == "spark":
            spark = engine_session(self.engine, self.database).newSession()
            spark.sql(f"USE {self.namespace}")
            self.session = self.connect(target=spark)
        else:
            self.session = self.connect()
        self.session.writer.forget()

    def topic(self, name: str = "events", **policies) -> str:
        self.session.create_topic(name, {"payload": "STRING"}, **policies)
        return name

    def stage(self, rows: list[tuple], name: str = "staging") -> None:
        """A temporary view of entries: (producer, seq), (producer, seq, highest) or (producer, seq, highest, payload),
        numbered in arrival order; the payload is ``producer/seq`` unless given."""
        padded = [(r[0], r[1], r[2] if len(r) > 2 else None, i, r[3] if len(r) > 3 else f"{r[0]}/{r[1]}")
                  for i, r in enumerate(rows)]
        padded = padded or [(None, None, None, None, None)]        # no entries: one row, filtered out below
        values = exp.values([tuple(literal(v) if v is not None else exp.null() for v in row) for row in padded],
                            alias="t", columns=["producer", "seq", "highest", "arrival", "payload"])
        select = exp.select(exp.cast(exp.column("producer"), "string").as_("producer"),
                            exp.cast(exp.column("seq"), "bigint").as_("seq"),
                            exp.cast(exp.column("highest"), "bigint").as_("highest"),
                            "arrival", "payload").from_(values).where(exp.true() if rows else exp.false())
        # (to the engine: through the session, the check that it replaces no topic reads the topic list each time)
        self.session.adapter.execute(exp.Create(this=exp.table_(name), kind="VIEW", replace=True, expression=select,
                                                properties=exp.Properties(expressions=[exp.TemporaryProperty()])))

    def temporary(self, name: str) -> str:
        """How a statement names a temporary view of the session whatever database is in use (DuckDB keeps them in
        the catalog ``temp``; Spark finds one by its bare name first)."""
        return f"temp.{name}" if self.engine.family == "duckdb" else name

    def send(self, rows: list[tuple], topic: str = "events", ordered: bool = True):
        """One statement with these entries, in this arrival order (or the default order when not ordered)."""
        self.stage(rows)
        order = " ORDER BY arrival" if ordered else ""
        return self.session.sql(f"INSERT INTO {topic} SELECT payload FROM staging "
                                f"WHERE is_not_dup(producer, seq, highest){order}")

    def entries(self, topic: str = "events") -> list[tuple]:
        """(producer, sequence_id, highest_sequence_id) of the topic's entries, in position order (the entries of
        one statement, a commit, in (producer, id) order: a statement's positions have no order among themselves)."""
        return [tuple(r) for r in self.session.sql(
            f"SELECT _producer, _sequence_id, _highest_sequence_id FROM {topic} "
            "ORDER BY _commit, _producer, _sequence_id, _highest_sequence_id").rows]

    def positions(self, topic: str = "events") -> list[int]:
        return [r[0] for r in self.session.sql(f"SELECT _position FROM {topic} ORDER BY _position").rows]

    def position_problem(self, topic: str = "events") -> str | None:
        """What breaks the rule for positions (unique, increasing in commit order) in the topic, or None."""
        return position_problem(self.session.sql(f"SELECT _commit, _position FROM {topic}").rows)

    def unread_directories(self, topic: str = "events") -> list[str]:
        """The directories seqdedup staged for the topic's commits that no partition reads (Spark; a DuckDB topic
        is one table, with none)."""
        if self.engine.family != "spark":
            return []
        from seqdedup.catalog.names import STAGING

        adapter, ref = self.session.adapter, self.session.ref(topic)
        root = Path(adapter.files.location(ref).removeprefix("file:")) / STAGING
        read = {Path(location.removeprefix("file:")).name for _, location in adapter.partitions.listing(ref.table)}
        return sorted(path.name for path in root.iterdir() if path.name not in read) if root.is_dir() else []

    def ids(self, producer: str, topic: str = "events") -> list[int]:
        return [s for p, s, _ in self.entries(topic) if p == producer]

    def last(self, producer: str, topic: str = "events") -> int:
        return self.session.last_sequence_id(topic, producer)

    def snapshot_rows(self, topic: str = "events") -> list[tuple]:
        return [tuple(r) for r in self.session.sql(
            "SELECT snapshot_id, position, producer, sequence_id, kind FROM producer_sequences "
            f"WHERE topic = '{self.key(topic)}' ORDER BY snapshot_id, producer NULLS FIRST").rows]

    def around(self, sql: str) -> None:
        """Run SQL on the engine itself, as a tool other than seqdedup would: no rewrite, no checks."""
        if self.engine.family == "spark":
            engine_session(self.engine, self.database).sql(sql)
        else:
            self.session.adapter.connection.execute(sql)

    def register_python_function(self, name: str, function) -> None:
        """A Python function of one string returning a string, registered on the engine under ``name`` as one with
        side effects (evaluated at every call: DuckDB's ``side_effects``, Spark's non-deterministic UDF)."""
        if self.engine.family == "spark":
            from pyspark.sql.functions import udf

            self.session.adapter.spark.udf.register(name, udf(function, "string").asNondeterministic())
            return
        connection = self.session.adapter.connection
        with contextlib.suppress(Exception):
            connection.remove_function(name)
        connection.create_function(name, function, ["VARCHAR"], "VARCHAR", side_effects=True)

    def unprotect(self, topic: str = "events") -> None:
        """Make the topic as seqdedup created topics before it declared their system columns NOT NULL (DuckDB;
        Spark's Parquet tables never enforce NOT NULL)."""
        if self.engine.name == "duckdb":
            for column in SYSTEM_COLUMNS:
                self.around(f"ALTER TABLE {topic} ALTER COLUMN {column} DROP NOT NULL")

    @contextlib.contextmanager
    def users_own_session(self, *, ansi: bool = True):
        """The engine as a user's own session has it. Spark: the test process's one session without the settings
        seqdedup needs (``SparkAdapter.SETTINGS``: a user's ``enableHiveSupport()`` session has Spark's defaults, so
        not the partition pruning fallback ``local_session`` sets), and with ANSI mode off if not ``ansi``; yields
        a function that reads those settings now (a value, and whether it is set); as it was, after."""
        if self.engine.family != "spark":
            yield dict
            return
        from seqdedup.extensions.spark import SparkAdapter

        conf = engine_session(self.engine, self.database).conf
        saved = {key: conf.get(key) for key in [*SparkAdapter.SETTINGS, "spark.sql.ansi.enabled"]}
        try:
            for key in SparkAdapter.SETTINGS:
                conf.unset(key)
            if not ansi:
                conf.set("spark.sql.ansi.enabled", "false")
            # the settings now: each one's value, and whether it is set (None: Spark's default, unset)
            yield lambda: {key: (conf.get(key), conf.get(key, None)) for key in saved}
        finally:
            for key, value in saved.items():
                conf.set(key, value)

    def close(self) -> None:
        self.session.close()
