"""Rows another tool wrote into a topic, and a user's own session, on every engine.

A row seqdedup did not write (a plain ``INSERT INTO events (payload) VALUES (...)`` run on the engine) must not brick
the topic: seqdedup's reads and statements go on over its own rows, ``stats`` and ``recover`` report the foreign
ones, and ``quarantine_foreign_rows`` (``seqdedup topic quarantine``) moves them into ``<topic>_foreign``. DuckDB
refuses such rows outright (the system columns of a topic are NOT NULL). A user's own Hive-enabled SparkSession works
without seqdedup's settings, and keeps its own.
"""
from __future__ import annotations

import pytest

import seqdedup
from seqdedup import TopicError
from seqdedup.errors import EngineError
from seqdedup.core.recovery import recover

SYSTEM = "_producer, _sequence_id, _highest_sequence_id, _position, _publish_time, _commit"


def payloads(dedup, table: str = "events") -> list[str]:
    return [row[0] for row in dedup.session.sql(f"SELECT payload FROM {table} ORDER BY payload").rows]


def test_rows_written_around_seqdedup_are_left_out_reported_and_moved_aside(dedup):
    dedup.topic()
    dedup.send([("p", 1), ("p", 2)])                  # commits 1 (the topic's creation) and 2
    dedup.unprotect()
    # another tool inserts: a row with no system columns, one in the commit seqdedup takes next, one far above
    dedup.around("INSERT INTO events (payload) VALUES ('stray')")
    dedup.around("INSERT INTO events (payload, _commit) VALUES ('next', 3)")
    dedup.around("INSERT INTO events (payload, _commit) VALUES ('far', 999)")
    dedup.restart()                                   # a new process: the state comes back from catalog and log
    assert dedup.last("p") == 2
    result = dedup.send([("p", 2), ("p", 3)])
    assert (result.written, result.duplicates) == (1, 1)
    assert result.commit < 999                        # the foreign number is neither reused nor taken as published
    reader = seqdedup.Reader(dedup.session, "events")
    assert [row[0] for row in reader.read().rows] == ["p/1", "p/2", "p/3"]

    stats = dedup.session.stats("events")
    assert (stats["entries"], stats["foreign_rows"]) == (3, 3)
    assert f"seqdedup topic quarantine {dedup.key()}" in stats["foreign"]
    report = recover(dedup.session.broker, "events")
    assert report.ok and report.matches_full_replay and report.foreign_rows == 3
    assert f"seqdedup topic quarantine {dedup.key()}" in report.foreign

    moved = dedup.session.quarantine_foreign_rows("events")
    assert (moved["rows"], moved["table"]) == (3, dedup.key("events_foreign"))
    assert dedup.session.sql("SELECT payload, _commit, _move FROM events_foreign ORDER BY payload").rows == [
        ("far", 999, 1), ("next", 3, 1), ("stray", None, 1)]
    assert payloads(dedup) == ["p/1", "p/2", "p/3"]
    assert dedup.session.stats("events")["foreign_rows"] == 0 and "foreign" not in dedup.session.stats("events")
    assert dedup.session.quarantine_foreign_rows("events")["rows"] == 0        # nothing left: nothing changes
    assert dedup.send([("p", 3), ("p", 4)]).written == 1
    assert dedup.ids("p") == [1, 2, 3, 4]


def test_a_foreign_row_made_while_a_session_holds_the_state_costs_one_statement_at_most(dedup):
    """Spark: a session that holds the topic's state in memory (nobody else publishes) does not see a partition
    another tool registers with the next commit's number: that statement fails, nothing published, with an error
    that says to run it again; run again, it takes the next number. DuckDB: the statement writes at once."""
    dedup.topic()
    dedup.unprotect()
    dedup.send([("p", 1)])                           # commit 2: the state in memory says the next is 3
    dedup.around("INSERT INTO events (payload, _commit) VALUES ('next', 3)")
    try:
        result = dedup.send([("p", 2)])
    except EngineError as error:
        assert "partition exists already" in str(error) and "run the statement again" in str(error)
        result = dedup.send([("p", 2)])
    assert result.written == 1 and dedup.ids("p") == [1, 2]
    assert dedup.session.stats("events")["foreign_rows"] == 1


@pytest.mark.notyet(["duckdb"], reason="a DuckDB topic is a plain table: a row with every system column set is "
                                        "indistinguishable from seqdedup's (the constraints refuse rows without them)")
def test_a_partition_seqdedup_never_published_is_foreign_even_with_every_column_set(dedup):
    dedup.topic()
    dedup.send([("p", 1)])
    dedup.around(f"INSERT INTO events (payload, {SYSTEM}) VALUES ('forged', 'p', 9, 9, 99, "
                 "TIMESTAMP '2026-01-01 00:00:00', 999)")
    dedup.restart()
    assert dedup.last("p") == 1
    assert dedup.session.stats("events")["foreign_rows"] == 1


@pytest.mark.notyet(["spark"], reason="Spark's Parquet tables do not enforce NOT NULL: foreign rows are accepted, "
                                      "then left out, reported and moved aside")
def test_the_engine_refuses_a_row_without_system_columns(dedup):
    dedup.topic()
    with pytest.raises(Exception, match="NOT NULL"):
        dedup.around("INSERT INTO events (payload) VALUES ('stray')")
    # a topic created before the constraints gets them when its foreign rows are moved aside
    dedup.topic("old")
    dedup.unprotect("old")
    dedup.around("INSERT INTO old (payload) VALUES ('stray')")
    assert dedup.session.quarantine_foreign_rows("old")["rows"] == 1
    with pytest.raises(Exception, match="NOT NULL"):
        dedup.around("INSERT INTO old (payload) VALUES ('stray')")


def test_moving_aside_changes_nothing_on_bad_input(dedup):
    with pytest.raises(TopicError, match="unknown topic"):
        dedup.session.quarantine_foreign_rows("nowhere")
    dedup.topic()
    dedup.unprotect()
    dedup.around("INSERT INTO events (payload) VALUES ('stray')")
    dedup.around("CREATE TABLE events_foreign (a INT)")
    with pytest.raises(TopicError, match="events_foreign exists with other columns"):
        dedup.session.quarantine_foreign_rows("events")
    assert dedup.session.stats("events")["foreign_rows"] == 1
    assert dedup.session.sql("SELECT count(*) FROM events_foreign").rows == [(0,)]


def test_a_users_own_session_needs_no_seqdedup_settings_and_keeps_its_own(dedup):
    """Item 6: a SparkSession built with enableHiveSupport() and nothing else; seqdedup.connect(spark) on it."""
    with dedup.users_own_session() as settings:
        before = settings()
        dedup.restart()
        dedup.topic()
        dedup.send([("p", 1)])
        dedup.restart()       # recovery replays the partitions written since the snapshot: `_commit >= n`
        assert dedup.last("p") == 1
        assert dedup.send([("p", 1), ("p", 2)]).written == 1
        assert settings() == before       # seqdedup set what it needs only while its own queries ran


def test_statements_are_ansi_spark_sql_whatever_the_session_says(dedup):
    with dedup.users_own_session(ansi=False) as settings:
        before = settings()
        dedup.restart()
        with pytest.raises(EngineError, match="CAST_INVALID_INPUT|Could not convert"):
            dedup.session.sql("SELECT CAST('x' AS BIGINT)")
        assert settings() == before


def test_a_session_keeps_its_catalog_when_the_user_switches_database(dedup):
    """A user's own session is theirs to move: after ``USE other`` in it, the seqdedup session connected before
    keeps its topics, their state and its catalog (a new process: nothing of the topic in memory), while the user's
    own names follow the switch."""
    dedup.topic()
    dedup.send([("p", 1)])
    dedup.restart()
    other = f"{dedup.namespace}_other"
    dedup.around(f"CREATE SCHEMA {other}")
    dedup.around(f"USE {other}")
    try:
        assert dedup.send([("p", 1), ("p", 2)]).written == 1
        assert dedup.session.topics() == [dedup.key()]
        dedup.around("CREATE TABLE src AS SELECT 'p' AS producer, CAST(3 AS BIGINT) AS seq, 'p/3' AS payload")
        result = dedup.session.sql("INSERT INTO events SELECT payload FROM src WHERE is_not_dup(producer, seq)")
        assert result.written == 1
    finally:
        dedup.around(f"USE {dedup.namespace}")
    assert dedup.ids("p") == [1, 2, 3]
