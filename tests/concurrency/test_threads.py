"""Concurrent writers inside one process, on every engine: threads on one session and on several sessions of one
database (C17, R6, R14), several topics at once, one producer shared by threads, and a bounded wait with a clear
error for the loser.

Writes take the database's writer lock (seqdedup/core/locks.py), so they run one at a time whatever session they use;
reads of committed state do not wait.
"""
from __future__ import annotations

import threading
import time

import pytest

from seqdedup import DupStatus, EngineError, failpoints
from seqdedup.errors import ProducerError

from . import c17

#: Entries per statement: a Spark statement costs seconds whatever its size, so it gets bigger ones.
SIZE = {"duckdb": 100, "spark": 500}
#: Sends per producer thread, for the same reason.
SENDS = {"duckdb": 3, "spark": 1}


def in_threads(*jobs) -> list:
    """Run each job in a thread of its own, all started together; their results, or the first error raised."""
    results, errors = [None] * len(jobs), []
    start = threading.Barrier(len(jobs))

    def run(i, job):
        start.wait()
        try:
            results[i] = job()
        except BaseException as error:      # handed to the test's thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i, job)) for i, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    if errors:
        raise errors[0]
    return results


def writer(session, name: str, size: int):
    return lambda: [c17.send(session, name, rows) for rows in c17.statements(name, size)]


def test_c17_two_writers_on_one_topic_each_entry_once(dedup, engine):
    dedup.topic(snapshot_interval_entries=300)
    other = dedup.connect()          # a second session on the same database
    try:
        results = in_threads(writer(dedup.session, "a", SIZE[engine.name]), writer(other, "b", SIZE[engine.name]))
    finally:
        other.close()
    assert c17.topic_entries(dedup.session) == c17.EXPECTED      # each of the 1500 entries once
    written = sum(r.written for rs in results for r in rs)
    duplicates = sum(r.duplicates for rs in results for r in rs)
    assert (written, duplicates) == (1500, 500)
    assert len(dedup.positions()) == 1500 and dedup.position_problem() is None
    dedup.restart()
    assert {p: dedup.last(p) for p in ("p0", "p1", "p2", "p3")} == {"p0": 249, "p1": 249, "p2": 499, "p3": 499}


def test_threads_on_one_session_and_several_topics_at_once(dedup, engine):
    for topic in ("t1", "t2", "t3"):
        dedup.topic(topic)
    session, sends = dedup.session, SENDS[engine.name]

    def topic_writer(topic: str, producer: str):
        def job():
            with session.producer(topic, name=producer) as producer_:
                return [producer_.send([(f"{topic}-{i}-{j}",) for j in range(5)]).written for i in range(sends)]
        return job

    results = in_threads(topic_writer("t1", "x"), topic_writer("t2", "x"), topic_writer("t3", "x"),
                         topic_writer("t1", "y"))
    assert results == [[5] * sends] * 4
    for topic, producers in (("t1", ["x", "y"]), ("t2", ["x"]), ("t3", ["x"])):
        ids = range(5 * sends)
        assert sorted(dedup.entries(topic)) == sorted((p, s, s) for p in producers for s in ids), topic
        assert len(dedup.positions(topic)) == len(ids) * len(producers), topic
        assert dedup.position_problem(topic) is None, topic


def test_a_producer_shared_by_threads_writes_every_send_once_with_its_own_receipts(dedup, engine):
    """As Pulsar's, a producer may be shared: its sends run one at a time, each gets ids of its own and receipts for
    its own entries, and nothing written is reported as failed."""
    dedup.topic()
    sends, threads = SENDS[engine.name], 4
    with dedup.session.producer("events", name="shared") as producer:
        def job(thread: int):
            return lambda: [producer.send([(f"{thread}-{i}-{j}",) for j in range(5)]) for i in range(sends)]

        results = in_threads(*[job(thread) for thread in range(threads)])
        assert producer.flush() == [] and producer.pending == 0
        assert producer.last_sequence_id == threads * sends * 5 - 1
    rows = {position: (s, payload) for s, payload, position in dedup.session.sql(
        "SELECT _sequence_id, payload, _position FROM events WHERE _producer = 'shared'").rows}
    assert sorted(s for s, _ in rows.values()) == list(range(threads * sends * 5))     # each id once
    for thread, receipts in enumerate(results):
        for i, receipt in enumerate(receipts):
            ids = [r.sequence_id for r in receipt]
            assert receipt.written == 5 and ids == list(range(ids[0], ids[0] + 5))   # a send's ids are its own
            assert [rows[r.position] for r in receipt] == [(s, f"{thread}-{i}-{j}") for j, s in enumerate(ids)]
    assert dedup.position_problem() is None


def test_the_loser_waits_a_bounded_time_and_gets_a_clear_error(dedup):
    dedup.topic()
    dedup.send([("p", 0)])
    impatient = dedup.connect(lock_timeout=0.5)
    impatient.sql("CREATE TEMPORARY VIEW staging_late AS SELECT 'p' AS producer, 1 AS seq, 'late' AS payload")
    try:
        with dedup.session.writer:           # another writer holds the database
            started = time.monotonic()
            with pytest.raises(EngineError, match=r"another writer of .* held it for more than lock_timeout=0.5 s"):
                in_threads(lambda: impatient.sql(
                    "INSERT INTO events SELECT payload FROM staging_late WHERE is_not_dup(producer, seq)"))
            assert time.monotonic() - started >= 0.5
        assert dedup.entries() == [("p", 0, 0)]          # the loser changed nothing
        assert dedup.snapshot_rows()[-1][-1] == "enabled"
        # once the lock is free the same statement goes through
        assert impatient.sql("INSERT INTO events SELECT payload FROM staging_late "
                             "WHERE is_not_dup(producer, seq)").written == 1
    finally:
        impatient.close()


def test_unknown_to_every_session_while_a_statement_is_in_flight(dedup):
    """R6 across sessions: an id claimed by another session's uncommitted statement is UNKNOWN, never DUP or
    NOT_DUP; after the commit it is DUP everywhere. One producer name has one live writer (R14) per process."""
    dedup.topic()
    reader = dedup.connect()
    inside, release = threading.Event(), threading.Event()

    def pause():
        inside.set()
        assert release.wait(600)

    failpoints.inject("before_publish", pause)
    try:
        writer_ = threading.Thread(target=dedup.send, args=([("p", 1), ("p", 2)],))
        writer_.start()
        assert inside.wait(600)
        try:
            assert [reader.dup_status("events", "p", s) for s in (1, 2, 3)] == [
                DupStatus.UNKNOWN, DupStatus.UNKNOWN, DupStatus.NOT_DUP]
            assert reader.last_sequence_id("events", "p") == -1          # persisted: nothing yet
        finally:
            release.set()
            writer_.join(120)
        assert [reader.dup_status("events", "p", s) for s in (1, 2, 3)] == [
            DupStatus.DUP, DupStatus.DUP, DupStatus.NOT_DUP]
        with reader.producer("events", name="n"):
            with pytest.raises(ProducerError, match="already connected"):
                dedup.session.producer("events", name="n")
    finally:
        failpoints._injected.clear()
        reader.close()
