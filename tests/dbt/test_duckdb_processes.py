"""dbt-duckdb runs that need a project of their own: four topic models written by four threads at once, and a dbt
process killed with SIGKILL in the middle of a topic model's statement."""
from __future__ import annotations

import signal

import pytest

from seqdedup.failpoints import ENVIRONMENT

from .project import Project, duckdb_rows

pytestmark = pytest.mark.duckdb

TOPICS = ["events_a", "events_b", "events_c", "events_d"]


def entries(project: Project, topic: str) -> list[tuple]:
    return duckdb_rows(project.database, f"SELECT _producer, _sequence_id FROM main.{topic} "
                                         "ORDER BY _producer, _sequence_id")


def test_four_threads_write_four_topics_without_conflicts_or_duplicates(tmp_path):
    project = Project.copy(tmp_path)
    for i, topic in enumerate(TOPICS):     # each topic its own share of the sensors' readings (dbt's CTE style)
        project.model(topic, "{{ config(materialized='seqdedup_topic') }}\n"
                             "with readings as (select * from {{ ref('stg_events') }})\n"
                             "select reading, unit from readings\n"
                             f"where is_not_dup(producer, seq) and (seq + {i}) % 2 = 0\norder by arrival")
    assert project.dbt("seed").success
    first = project.dbt("run", "--threads", "4")
    assert first.success, [r.message for r in first.result.results if r.status != "success"]
    second = project.dbt("run", "--threads", "4")
    assert second.success, [r.message for r in second.result.results if r.status != "success"]
    seeded = sorted({(p, int(s)) for p, s, *_ in project.seed_rows()})
    for i, topic in enumerate(TOPICS):
        wanted = [(p, s) for p, s in seeded if (s + i) % 2 == 0]
        assert entries(project, topic) == wanted, topic
        assert project.results(first)[topic].adapter_response["written"] == len(wanted)
        assert project.results(second)[topic].adapter_response["written"] == 0


def test_a_run_killed_in_the_middle_of_a_topic_model_leaves_the_topic_as_it_was(tmp_path):
    project = Project.copy(tmp_path)
    done = project.dbt_process("build", "--select", "raw_events", "stg_events", "events")
    assert done.returncode == 0, done.stdout[-3000:]
    before = entries(project, "events")
    rows = project.seed_rows()
    project.seed([*rows, ("sensor-1", 3, 14, 21.0, "C", "2026-03-01 10:03:00"),
                  ("sensor-1", 3, 15, 21.0, "C", "2026-03-01 10:03:00"), ("sensor-9", 0, 16, 1.0, "C", "2026-03-01 10:03:00")])
    assert project.dbt_process("seed").returncode == 0

    # SIGKILL once the statement's rows and run log are written, before its transaction commits.
    killed = project.dbt_process("run", "--select", "events", **{ENVIRONMENT: "before_publish"})
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-3000:]
    assert "START sql seqdedup_topic model main.events" in killed.stdout
    assert entries(project, "events") == before

    again = project.dbt("run", "--select", "events")
    assert again.success
    assert project.results(again)["events"].adapter_response["written"] == 2
    assert entries(project, "events") == sorted([*before, ("sensor-1", 3), ("sensor-9", 0)])
