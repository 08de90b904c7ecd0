"""The function set on the engine connection, R6 (UNKNOWN while a statement is in flight), and state that a new
process reads back identically."""
from __future__ import annotations

import threading

import duckdb
import pytest

from seqdedup import DupStatus, SeqdedupError, failpoints


@pytest.mark.parametrize("statement", [
    "SELECT * FROM staging WHERE is_not_dup(producer, seq)",
    "SELECT is_not_dup(producer, seq, highest) FROM staging",
    "SELECT last_sequence_id('events', producer) FROM staging",
    "SELECT dup_status('events', producer, seq) FROM staging",
])
def test_unrewritten_functions_fail_loudly_on_the_engine(dedup, statement):
    dedup.topic()
    dedup.stage([("p", 1)])
    with pytest.raises(SeqdedupError, match="must be rewritten by seqdedup"):
        dedup.session.adapter.fetchall(statement)      # the engine's own SQL, not through seqdedup


NATURAL = "INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq)"
#: seqdedup's message, with the ways that work (the notebook's among them).
THE_WAY = r"must be rewritten by seqdedup.*seqdedup\.connect\(spark\).*%%seqdedup"


@pytest.mark.notyet(["duckdb"], reason="DuckDB checks an INSERT's column count before it binds the guard macro "
                    "('table events has 7 columns but 1 values were supplied'): no function speaks before that check")
def test_the_natural_insert_is_refused_with_the_way_that_works(dedup):
    """The statement a Spark user writes first, straight into the engine (``spark.sql``, a notebook's ``%sql``): it
    selects the payload only, where the topic's table also holds system columns, so the guard must refuse it before
    the engine checks the column count."""
    dedup.topic()
    dedup.stage([("p", 1)])
    with pytest.raises(SeqdedupError, match=THE_WAY):
        dedup.session.adapter.execute(NATURAL)
    assert dedup.entries() == []


def _spark_never_configured(dedup):
    spark = dedup.session.adapter.spark.newSession()        # its own temporary functions: none
    spark.sql(f"USE {dedup.namespace}")
    spark.sql("CREATE TEMPORARY VIEW staging AS SELECT 'x' AS payload, 'p' AS producer, 2L AS seq")
    return lambda statement: spark.sql(statement).collect()


def _duckdb_never_configured(dedup):
    connection = duckdb.connect(dedup.database)             # a connection of its own: no temporary macros
    connection.execute("CREATE TEMPORARY TABLE staging AS SELECT 'x' AS payload, 'p' AS producer, 2 AS seq")
    return connection.execute


#: A connection of the engine's own that seqdedup never configured, with a staging view of one entry.
NEVER_CONFIGURED = {"spark": _spark_never_configured, "duckdb": _duckdb_never_configured}
#: The statement it runs: on DuckDB with a column list, which passes the column count (see the test above).
FIRST_STATEMENT = {"spark": NATURAL, "duckdb": NATURAL.replace("events", "events (payload)")}


def test_a_connection_seqdedup_never_configured_refuses_is_not_dup_with_the_way_that_works(dedup):
    """The guards kept in the catalog's database (Spark's metastore, DuckDB's file): an application that never
    called ``seqdedup.connect``, or the DuckDB shell on the file, gets seqdedup's message, not UNRESOLVED_ROUTINE or
    'Scalar Function with name is_not_dup does not exist'. So does the form with a column list on seqdedup's own
    connection."""
    dedup.topic()
    dedup.stage([("p", 1)])
    with pytest.raises(SeqdedupError, match=THE_WAY):
        dedup.session.adapter.execute(NATURAL.replace("events", "events (payload)"))
    run = NEVER_CONFIGURED[dedup.engine.family](dedup)
    with pytest.raises(Exception, match=THE_WAY) as refused:
        run(FIRST_STATEMENT[dedup.engine.family])
    if dedup.engine.family == "spark":
        assert "USER_RAISED_EXCEPTION" in str(refused.value)     # Spark's error class for a message of one's own
    with pytest.raises(Exception, match=THE_WAY.replace("must", r"is_new\(\) must")):      # R20's too
        run(FIRST_STATEMENT[dedup.engine.family].replace("is_not_dup(producer, seq)", "is_new(producer)"))
    assert dedup.entries() == []


def test_kafka_producer_name_is_a_real_function(dedup):
    assert dedup.session.sql("SELECT kafka_producer_name(7, 0)").rows == [("KOP-PID-PREFIX-7-0",)]


def test_state_functions_in_queries(dedup):
    dedup.topic()
    dedup.send([("p", 3), ("q", 1)])
    s = dedup.session
    assert s.sql("SELECT producer, sequence_id FROM producer_state('events') ORDER BY producer").rows == [
        ("p", 3), ("q", 1)]
    assert s.sql("SELECT last_sequence_id('events', 'p'), last_sequence_id('events', 'nobody')").rows == [(3, -1)]
    assert s.sql("SELECT dup_status('events', 'p', 3), dup_status('events', 'p', 4), "
                 "dup_status('events', 'p', 2, 9)").rows == [("DUP", "NOT_DUP", "DUP")]


def test_unknown_while_a_statement_is_in_flight(dedup, monkeypatch):
    """R6: an id claimed by an uncommitted statement is UNKNOWN to everyone else; after commit it is DUP."""
    dedup.topic()
    dedup.send([("p", 1)])
    session = dedup.session
    claimed, release = threading.Event(), threading.Event()
    original = session.pushed.claim

    def claim_and_wait(topic, marks):
        original(topic, marks)
        claimed.set()
        release.wait(600)      # bounds, not timings: a loaded Spark takes long

    monkeypatch.setattr(session.pushed, "claim", claim_and_wait)
    dedup.stage([("p", 2), ("p", 3)])
    writer = threading.Thread(target=lambda: session.sql(
        "INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq)"))
    writer.start()
    assert claimed.wait(600)
    try:
        assert session.dup_status("events", "p", 3) is DupStatus.UNKNOWN
        assert session.dup_status("events", "p", 1) is DupStatus.DUP
        assert session.dup_status("events", "p", 4) is DupStatus.NOT_DUP
    finally:
        release.set()
        writer.join(600)
    assert session.dup_status("events", "p", 3) is DupStatus.DUP


def test_a_failed_statement_drops_its_claims(dedup, monkeypatch):
    """R6: after a failed write the pushed marks fall back, so the same ids can be sent again."""
    dedup.topic()
    session = dedup.session

    # the statement fails after its ids were claimed (R6), before it publishes
    failpoints.inject("after_run_log", RuntimeError("disk on fire"))
    with pytest.raises(RuntimeError):
        dedup.send([("p", 1)])
    assert session.dup_status("events", "p", 1) is DupStatus.NOT_DUP
    assert dedup.entries() == []
    assert dedup.send([("p", 1)]).written == 1
