"""On a classic Spark session, a small statement's job evaluates its expressions as they are instead of compiling
them (``calls.INTERPRETED``, held by ``calls.sized``): Spark writes a statement's own values (its commit, its time)
into the code it compiles, so each small statement compiled classes of its own, about a tenth of its time. A large
statement's job is compiled, and the session's own settings are as they were after either. The same holds for the
job that rewrites a small table without some of its rows (``TableFiles.delete_rows``)."""
from __future__ import annotations

import pytest
from sqlglot import exp

from seqdedup.extensions.spark import calls

pytestmark = pytest.mark.spark


def compiled(spark) -> int:
    """How many classes Spark's code generator has compiled in this JVM so far."""
    return spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount()


def test_a_small_statement_compiles_no_code_a_large_one_does_and_the_session_keeps_its_settings(spark_dedup):
    session = spark_dedup.session
    spark, conf = session.adapter.spark, session.adapter.spark.conf
    conf.set("spark.sql.codegen.wholeStage", "true")        # the user's own, set explicitly; factoryMode unset
    try:
        own = {key: conf.get(key, None) for key in calls.INTERPRETED}
        spark_dedup.send([("p", 1)])        # (the topic's first statement reads the catalog: that compiles)
        spark_dedup.clock.advance(seconds=1)         # (a new time: a new constant in the code, were it compiled)
        before = compiled(spark)
        # (none repeated: R18 judges a repeat against the topic, in queries of its own)
        assert spark_dedup.send([("p", 2), ("p", 3)]).producers[0].written == 2
        assert compiled(spark) == before
        assert {key: conf.get(key, None) for key in calls.INTERPRETED} == own
        # 5,000 entries: Spark estimates them past INTERPRETED_BYTES
        assert 5000 * 56 > session.adapter.INTERPRETED_BYTES
        spark.sql("CREATE OR REPLACE TEMPORARY VIEW large AS "
                  "SELECT 'q' AS producer, id AS seq, 'x' AS payload FROM range(5000)")
        spark_dedup.clock.advance(seconds=1)
        result = session.sql("INSERT INTO events SELECT payload FROM large WHERE is_not_dup(producer, seq)")
        assert result.producers[0].written == 5000
        assert compiled(spark) > before
        assert {key: conf.get(key, None) for key in calls.INTERPRETED} == own
    finally:
        conf.unset("spark.sql.codegen.wholeStage")


def test_a_large_job_under_way_keeps_the_session_compiling(spark_dedup):
    """Jobs of several threads on one session: the settings are held while small jobs run and no large one does."""
    conf = spark_dedup.session.adapter.spark.conf

    def mode():
        return conf.get("spark.sql.codegen.factoryMode", None)

    spark = spark_dedup.session.adapter.spark
    with calls.sized(spark, small=True):
        assert mode() == "NO_CODEGEN"
        with calls.sized(spark, small=False):
            assert mode() is None
            with calls.sized(spark, small=True):
                assert mode() is None
        assert mode() == "NO_CODEGEN"
    assert mode() is None


def test_a_delete_from_a_small_table_compiles_no_code(spark_dedup):
    """A full snapshot's retention deletes the older snapshots from ``producer_sequences`` (``delete_rows``: the
    rows kept written anew), a job whose constants are new at each delete."""
    adapter = spark_dedup.session.adapter
    spark = adapter.spark
    table = exp.table_("small_rows", db=spark_dedup.namespace)
    spark.sql(f"CREATE TABLE {spark_dedup.namespace}.small_rows (k BIGINT, label STRING) USING parquet")
    spark.sql(f"INSERT INTO {spark_dedup.namespace}.small_rows SELECT id, 'row' FROM range(10)")
    before = compiled(spark)
    adapter.files.delete_rows(table, exp.column("k") < exp.Literal.number(4))
    adapter.files.delete_rows(table, exp.column("k") >= exp.Literal.number(7))
    assert compiled(spark) == before
    assert sorted(r[0] for r in spark.table(f"{spark_dedup.namespace}.small_rows").collect()) == [4, 5, 6]


def test_a_small_statement_makes_few_round_trips_to_the_jvm(spark_dedup, monkeypatch):
    """Each pyspark ``Column`` costs 3 to 11 Py4J round trips (pyspark 4 asks the session for its debugging settings
    and sets the call site in the JVM at each): a statement's aggregates, filter and marks are made from SQL text
    instead. A 10-entry statement of three producers made 263 round trips on this thread when they were ``Column``s,
    138 since, 141 with the outcome read as text (py4j's releases of dropped Java objects, made from its own
    thread, are not counted)."""
    import threading

    from py4j.clientserver import ClientServerConnection

    spark_dedup.send([(f"p{i % 3}", i) for i in range(10)])      # the producers' marks are in the state from here
    spark_dedup.clock.advance(seconds=1)
    here, made = threading.current_thread(), []
    send = ClientServerConnection.send_command

    def counted(connection, command):
        if threading.current_thread() is here:
            made.append(command[:1])
        return send(connection, command)

    monkeypatch.setattr(ClientServerConnection, "send_command", counted)
    assert sum(p.written for p in spark_dedup.send([(f"p{i % 3}", 10 + i) for i in range(10)]).producers) == 10
    monkeypatch.undo()
    assert len(made) <= 180, f"{len(made)} Py4J round trips for a 10-entry statement"
