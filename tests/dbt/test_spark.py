"""The example dbt project on Spark: the seqdedup_spark adapter (dbt-spark, ``method: session``) on this test
process's SparkSession with its Hive catalog, the same model SQL as on DuckDB."""
from __future__ import annotations

import itertools

import pytest

from tests.engines import spark_session

from .project import Project

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SEEDED = [("sensor-1", 0), ("sensor-1", 1), ("sensor-1", 2), ("sensor-2", 0), ("sensor-2", 1), ("sensor-2", 2),
          ("sensor-3", 10), ("sensor-3", 12), ("sensor-3", 13)]
_schemas = itertools.count(1)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The test process's SparkSession first (dbt-spark's getOrCreate() then returns it), the project built once."""
    home = tmp_path_factory.getbasetemp() / "spark-home"
    spark = spark_session(str(home))
    partitions = spark.conf.get("spark.sql.shuffle.partitions")    # the profile's server_side_parameters set it
    spark.sql("CREATE DATABASE IF NOT EXISTS seqdedup_dbt")    # where seqdedup keeps its catalog for dbt's runs
    spark.sql("USE seqdedup_dbt")
    schema = f"dbt_example_{next(_schemas)}"
    project = Project.copy(tmp_path_factory.mktemp("dbt-spark"), target="spark",
                           SEQDEDUP_EXAMPLE_SPARK_SCHEMA=schema, SEQDEDUP_EXAMPLE_SPARK_HOME=str(home))
    outcome = project.dbt("build")
    assert outcome.success, [r.message for r in outcome.result.results if r.status not in ("success", "pass")]
    yield project, outcome, spark, schema
    from seqdedup.dbt.spark import TARGET

    TARGET.close()       # its seqdedup session would otherwise outlive the module (tests/engines.py: restart)
    spark.sql("USE default")       # the session is shared with the other Spark tests of this process
    spark.conf.set("spark.sql.shuffle.partitions", partitions)


def entries(spark, schema: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(f"SELECT _producer, _sequence_id FROM {schema}.events "
                                        "ORDER BY _producer, _sequence_id").collect()]


def test_build_on_spark_writes_each_entry_once(built):
    project, outcome, spark, schema = built
    results = project.results(outcome)
    commit = [r[0] for r in spark.sql(f"SELECT DISTINCT _commit FROM {schema}.events").collect()]
    assert len(commit) == 1 and results["events"].message == f"INSERT 9 (duplicates 4, commit {commit[0]})"
    assert results["events"].adapter_response["written"] == 9
    assert entries(spark, schema) == SEEDED
    assert [tuple(r) for r in spark.sql(f"SELECT sensor, readings FROM {schema}.readings_per_sensor "
                                        "ORDER BY sensor").collect()] == [("sensor-1", 3), ("sensor-2", 3),
                                                                           ("sensor-3", 3)]
    assert results["seqdedup_seqdedup_unique_entries_events_"].status == "pass"


def test_a_rerun_on_spark_writes_nothing_and_plain_models_calling_is_not_dup_are_refused(built):
    project, _, spark, schema = built
    outcome = project.dbt("run", "--select", "events")
    assert outcome.success
    assert project.results(outcome)["events"].adapter_response["written"] == 0
    assert entries(spark, schema) == SEEDED

    # A table, a view (Spark would refuse it for the temporary function, naming no fix) and a view that inlines an
    # ephemeral model: each refused before it runs, with the way to write it, and nothing created.
    # So is a view calling is_new (R20), while a topic model by key writes each key once.
    dedup = "select reading from {{ ref('stg_events') }} where is_not_dup(producer, seq)"
    keyed = "select reading from {{ ref('stg_events') }} where is_new(producer, seq)"
    models = {"plain_dedup": "{{ config(materialized='table') }}\n" + dedup,
              "plain_view": "{{ config(materialized='view') }}\n" + dedup,
              "plain_ephemeral": "{{ config(materialized='ephemeral') }}\n" + dedup,
              "plain_reader": "{{ config(materialized='view') }}\nselect * from {{ ref('plain_ephemeral') }}",
              "plain_keyed": "{{ config(materialized='view') }}\n" + keyed,
              "events_by_key": "{{ config(materialized='seqdedup_topic') }}\n" + keyed,
              # (and one of composite ids, R19: seqdedup_id_parts)
              "events_by_position": "{{ config(materialized='seqdedup_topic', seqdedup_id_parts=2) }}\n"
                                    + dedup.replace("is_not_dup(producer, seq)", "is_not_dup(producer, (seq, 0))")}
    for name, text in models.items():
        project.model(name, text)
    try:
        outcome = project.dbt("run", "--select", *models)
        assert not outcome.success
        results = project.results(outcome)
        for name, materialized, function in (("plain_dedup", "table", "is_not_dup"), ("plain_view", "view", "is_not_dup"),
                                             ("plain_reader", "view", "is_not_dup"), ("plain_keyed", "view", "is_new")):
            message = results[name].message
            assert (f"model.seqdedup_example.{name} (materialized as {materialized}) calls {function}(), which means "
                    "something only in a seqdedup topic model") in message, message
            assert "{{ config(materialized='seqdedup_topic') }}" in message and "UNRESOLVED_ROUTINE" not in message
        tables = {r.tableName for r in spark.sql(f"SHOW TABLES IN {schema}").collect()}
        assert not {name for name in tables if name.startswith("plain_")}, tables
        for name in ("events_by_key", "events_by_position"):
            assert (results[name].adapter_response["written"], results[name].adapter_response["duplicates"]) == (9, 4)
    finally:
        for name in models:
            (project.path / "models" / f"{name}.sql").unlink()
