"""The example dbt project on DuckDB, run for real with dbt-duckdb in this process (dbtRunner): a topic model
writes each entry once however often it runs, bad input fails and writes nothing, a full refresh leaves the marks
alone unless forgetting them is asked for on purpose, plain models cannot call is_not_dup (refused before anything is
created), threads do not conflict, and a kill -9 in the middle of a topic model leaves the topic as it was."""
from __future__ import annotations

import json

import pytest

from .project import Project, duckdb_rows

pytestmark = pytest.mark.duckdb

ENTRIES = "SELECT _producer, _sequence_id FROM main.events ORDER BY _producer, _sequence_id"
#: The seed's entries, each once (the seed holds 13 rows: 4 of them retransmits or repeats).
SEEDED = [("sensor-1", 0), ("sensor-1", 1), ("sensor-1", 2), ("sensor-2", 0), ("sensor-2", 1), ("sensor-2", 2),
          ("sensor-3", 10), ("sensor-3", 12), ("sensor-3", 13)]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The example project, copied and built once (seed, staging, the topic, downstream models, tests)."""
    project = Project.copy(tmp_path_factory.mktemp("dbt-duckdb"))
    outcome = project.dbt("build")
    assert outcome.success, outcome.exception
    return project, outcome


def test_build_writes_each_entry_once_and_reports_the_counts(built):
    project, outcome = built
    events = project.results(outcome)["events"]
    commit = duckdb_rows(project.database, "SELECT DISTINCT _commit FROM main.events")      # the run's one commit
    assert len(commit) == 1 and events.message == f"INSERT 9 (duplicates 4, commit {commit[0][0]})"
    assert duckdb_rows(project.database, ENTRIES) == SEEDED
    # The YAML's data_type where it gives one, the SELECT's type elsewhere, then seqdedup's system columns.
    assert duckdb_rows(project.database, "SELECT column_name, data_type FROM duckdb_columns() "
                                         "WHERE table_name = 'events' ORDER BY column_index")[:4] == [
        ("reading", "DECIMAL(7,2)"), ("unit", "VARCHAR"), ("recorded_at", "TIMESTAMP"), ("_producer", "VARCHAR")]
    # The counts reach run_results.json.
    run_results = json.loads((project.path.parent / "target" / "run_results.json").read_text())
    response = next(r for r in run_results["results"] if r["unique_id"].endswith(".events"))["adapter_response"]
    assert (response["written"], response["duplicates"], response["rows_affected"]) == (9, 4, 9)
    assert response["_message"] == events.message and response["commit"] == commit[0][0]
    assert response["created"] is True
    # Downstream models read the topic; the generic test passed in the build.
    assert duckdb_rows(project.database, "SELECT sensor, readings, last_sequence_id FROM main.readings_per_sensor "
                                         "ORDER BY sensor") == [("sensor-1", 3, 2), ("sensor-2", 3, 2),
                                                                ("sensor-3", 3, 13)]
    assert duckdb_rows(project.database, "SELECT sensor, mark FROM main.sensor_marks ORDER BY sensor") == [
        ("sensor-1", 2), ("sensor-2", 2), ("sensor-3", 13)]
    assert project.results(outcome)["seqdedup_seqdedup_unique_entries_events_"].status == "pass"


def test_a_rerun_writes_nothing(built):
    project, _ = built
    before = duckdb_rows(project.database, ENTRIES)
    outcome = project.dbt("run", "--select", "events")
    assert outcome.success
    response = project.results(outcome)["events"].adapter_response
    assert (response["written"], response["duplicates"], response["created"]) == (0, 13, False)
    assert duckdb_rows(project.database, ENTRIES) == before


def test_appended_rows_are_written_and_only_they(built):
    project, _ = built
    rows = project.seed_rows()
    new = [("sensor-1", 3, 14, 21.0, "C", "2026-03-01 10:03:00"), ("sensor-4", 0, 15, 5.0, "m/s", "2026-03-01 10:03:00"),
           ("sensor-1", 2, 16, 20.9, "C", "2026-03-01 10:02:00")]      # the last: a late retransmit
    project.seed([*rows, *new])
    try:
        outcome = project.dbt("build", "--select", "raw_events", "stg_events", "events")
        assert outcome.success, outcome.exception
        assert project.results(outcome)["events"].message.startswith("INSERT 2 (duplicates 14, commit ")
        entries = duckdb_rows(project.database, ENTRIES)
        assert entries == sorted([*SEEDED, ("sensor-1", 3), ("sensor-4", 0)])
    finally:
        project.seed(rows)
        assert project.dbt("seed").success


def test_a_null_sequence_id_fails_the_model_and_writes_nothing(built):
    project, _ = built
    rows = project.seed_rows()
    before = duckdb_rows(project.database, ENTRIES)
    project.seed([*rows, ("sensor-5", None, 20, 1.0, "C", "2026-03-01 10:05:00"),
                  ("sensor-5", 0, 21, 1.0, "C", "2026-03-01 10:05:00")])
    try:
        assert project.dbt("seed").success
        outcome = project.dbt("run", "--select", "events")
        assert not outcome.success
        result = project.results(outcome)["events"]
        assert result.status == "error"
        assert "1 entry has a NULL sequence_id" in result.message and "Nothing was written" in result.message
        assert duckdb_rows(project.database, ENTRIES) == before      # not even sensor-5's valid entry
    finally:
        project.seed(rows)
        assert project.dbt("seed").success


#: What refuses a plain model that calls is_not_dup, before it runs.
REFUSED = "calls is_not_dup(), which means something only in a seqdedup topic model"
FIX = "{{ config(materialized='seqdedup_topic') }}"


def relations(database: str, names: list[str]) -> list[tuple]:
    """The tables and views of these names, and of their dbt temporaries (``<name>__dbt_tmp``)."""
    names = ", ".join(f"'{n}', '{n}__dbt_tmp'" for n in names)
    return duckdb_rows(database, f"SELECT table_name FROM duckdb_tables() WHERE table_name IN ({names}) UNION ALL "
                                 f"SELECT view_name FROM duckdb_views() WHERE view_name IN ({names})")


def test_is_not_dup_belongs_in_topic_models_and_topic_models_need_it(built):
    project, _ = built
    with project.models(plain_dedup="{{ config(materialized='table') }}\n"
                                    "select reading from {{ ref('stg_events') }} where is_not_dup(producer, seq)",
                        no_dedup="{{ config(materialized='seqdedup_topic') }}\n"
                                 "select reading from {{ ref('stg_events') }}"):
        outcome = project.dbt("run", "--select", "plain_dedup", "no_dedup")
        assert not outcome.success
        message = project.results(outcome)["plain_dedup"].message
        assert REFUSED in message and FIX in message and "does not exist" not in message
        message = project.results(outcome)["no_dedup"].message
        assert "has no WHERE is_not_dup(producer, sequence_id)" in message
        assert not relations(project.database, ["plain_dedup", "no_dedup"])


def test_a_topic_model_by_key_writes_each_key_once_and_only_topic_models_may_say_is_new(built):
    # R20: the seed's (producer, seq) as keys; a view calling is_new is refused as one calling is_not_dup is
    project, _ = built
    keyed = "select reading from {{ ref('stg_events') }} where is_new(producer, seq)"
    with project.models(events_by_key="{{ config(materialized='seqdedup_topic') }}\n" + keyed,
                        plain_keyed="{{ config(materialized='view') }}\n" + keyed):
        first = project.results(project.dbt("run", "--select", "events_by_key"))["events_by_key"].adapter_response
        again = project.results(project.dbt("run", "--select", "events_by_key"))["events_by_key"].adapter_response
        assert (first["written"], first["duplicates"], again["written"], again["duplicates"]) == (9, 4, 0, 13)
        assert duckdb_rows(project.database, "SELECT count(DISTINCT _producer), max(_sequence_id) "
                                             "FROM main.events_by_key") == [(9, 0)]
        outcome = project.dbt("run", "--select", "plain_keyed")
        assert "plain_keyed (materialized as view) calls is_new(), which means something only in a seqdedup " \
               "topic model" in project.results(outcome)["plain_keyed"].message
        assert not relations(project.database, ["plain_keyed"])


def test_a_topic_model_of_composite_ids_and_a_shape_it_was_not_created_with(built):
    # R19 through dbt: seqdedup_id_parts on the model creates a topic of composite ids; saying another shape later
    # is refused, naming both, and writes nothing
    project, _ = built
    composite = "select reading from {{ ref('stg_events') }} where is_not_dup(producer, (seq, 0))"
    config = "{{{{ config(materialized='seqdedup_topic', seqdedup_id_parts={}) }}}}\n"
    with project.models(events_by_position=config.format(2) + composite):
        first = project.results(project.dbt("run", "--select", "events_by_position"))["events_by_position"]
        assert (first.adapter_response["written"], first.adapter_response["duplicates"]) == (9, 4)
        assert duckdb_rows(project.database, "SELECT max(_sequence_id) FROM main.events_by_position") == [
            ("b13a0",)]      # (sensor-3's (13, 0): each part's digits after a letter that counts them)
        project.model("events_by_position", config.format(3) + composite)
        again = project.results(project.dbt("run", "--select", "events_by_position"))["events_by_position"]
        assert again.status == "error" and "seqdedup_id_parts is 3, but topic main.events_by_position was created " \
            "with ids of 2 parts" in again.message, again.message
        assert duckdb_rows(project.database, "SELECT count(*) FROM main.events_by_position") == [(9,)]


def test_a_view_calling_is_not_dup_is_refused_at_run_and_nothing_is_created(built):
    # A view would be created, and fail only when read; an ephemeral model is refused in the model that inlines it.
    project, _ = built
    project.model("plain_view", "{{ config(materialized='view') }}\n"
                                "select reading from {{ ref('stg_events') }} where is_not_dup(producer, seq)")
    project.model("plain_ephemeral", "{{ config(materialized='ephemeral') }}\n"
                                     "select reading from {{ ref('stg_events') }} where is_not_dup(producer, seq)")
    project.model("plain_reader", "{{ config(materialized='view') }}\nselect * from {{ ref('plain_ephemeral') }}")
    try:
        outcome = project.dbt("run", "--select", "plain_view", "plain_ephemeral", "plain_reader")
        assert not outcome.success
        results = project.results(outcome)
        for name in ("plain_view", "plain_reader"):
            assert results[name].status == "error"
            assert f"model.seqdedup_example.{name} (materialized as view) {REFUSED}" in results[name].message
            assert FIX in results[name].message
        assert not relations(project.database, ["plain_view", "plain_ephemeral", "plain_reader"])
    finally:
        for name in ("plain_view", "plain_ephemeral", "plain_reader"):
            (project.path / "models" / f"{name}.sql").unlink()


#: The line a --full-refresh run logs for a topic it leaves alone.
SKIPPED = "--full-refresh skipped, the producers' marks are kept and the model runs as usual"


def test_a_full_refresh_build_keeps_the_marks_unless_forgetting_them_is_asked_for(built, capsys):
    project, _ = built
    before = duckdb_rows(project.database, ENTRIES)
    capsys.readouterr()
    outcome = project.dbt("build", "--full-refresh")     # the whole project: seed, staging, topic, downstream, tests
    output = capsys.readouterr().out
    assert outcome.success, [r.message for r in outcome.result.results if r.status not in ("success", "pass")]
    results = project.results(outcome)
    assert results["events"].message.startswith("INSERT 0 (duplicates 13, commit ")     # no retry written twice
    assert duckdb_rows(project.database, ENTRIES) == before
    assert results["seqdedup_seqdedup_unique_entries_events_"].status == "pass"
    assert output.count(SKIPPED) == 1 and "set seqdedup_full_refresh: forget_marks on the model" in output

    # On purpose: the marks go, every selected entry is written again, and the generic test sees each twice.
    # (The last test of the module: the topic keeps its duplicates.)
    model = project.path / "models" / "events.sql"
    model.write_text(model.read_text().replace("seqdedup_policies=", "seqdedup_full_refresh='forget_marks', "
                                                                     "seqdedup_policies="))
    outcome = project.dbt("build", "--select", "events", "--full-refresh")
    assert SKIPPED not in capsys.readouterr().out
    results = project.results(outcome)
    assert results["events"].message.startswith("INSERT 9 (duplicates 4, commit ")
    assert duckdb_rows(project.database, ENTRIES) == sorted(before + SEEDED)
    assert results["seqdedup_seqdedup_unique_entries_events_"].status == "fail"
    assert results["seqdedup_seqdedup_unique_entries_events_"].failures == 9


def test_a_profile_without_the_plugin_gets_told_how_to_add_it(built):
    project, _ = built
    profiles = project.path / "profiles.yml"
    text = profiles.read_text()
    bare = ("    bare:\n      type: duckdb\n"
            "      path: \"{{ env_var('SEQDEDUP_EXAMPLE_DUCKDB') }}\"\n")      # no plugins
    profiles.write_text(text.replace("    spark:", bare + "    spark:"))
    try:
        project.target = "bare"
        outcome = project.dbt("run", "--select", "events")
        assert not outcome.success
        message = project.results(outcome)["events"].message
        assert "seqdedup's dbt-duckdb plugin is not in this profile" in message
        assert "- module: seqdedup.dbt.duckdb" in message
    finally:
        project.target = "duckdb"
        profiles.write_text(text)
