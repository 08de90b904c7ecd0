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


def test_a_rerun_on_spark_writes_nothing_and_plain_models_get_the_guard(built):
    project, _, spark, schema = built
    outcome = project.dbt("run", "--select", "events")
    assert outcome.success
    assert project.results(outcome)["events"].adapter_response["written"] == 0
    assert entries(spark, schema) == SEEDED

    project.model("plain_dedup", "{{ config(materialized='table') }}\n"
                                 "select reading from {{ ref('stg_events') }} where is_not_dup(producer, seq)")
    outcome = project.dbt("run", "--select", "plain_dedup")
    message = project.results(outcome)["plain_dedup"].message
    assert not outcome.success
    assert "is_not_dup() must be rewritten by seqdedup" in message and "UNRESOLVED_ROUTINE" not in message
