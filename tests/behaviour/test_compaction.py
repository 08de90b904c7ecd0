"""Compaction (seqdedup/core/compaction.py), on every engine: a topic's commits merged into fewer partitions keep every
entry once, at its position, for statements, restarts, readers, and after a compaction cut short at any step. On
DuckDB a topic is one table: a compaction finds nothing to merge, and everything else holds the same."""
from __future__ import annotations

import pytest

from seqdedup import TopicError, failpoints
from seqdedup.core.compaction import Compaction
from seqdedup.clients.consumer import Reader
from seqdedup.core.recovery import recover

ENTRIES = "SELECT _producer, _sequence_id, _position, payload FROM events ORDER BY _position"


@pytest.fixture(autouse=True)
def no_leftover_faults():
    yield
    failpoints._injected.clear()


def history(dedup, statements: int = 5) -> None:
    """A topic that never compacts by itself, and ``statements`` statements, each a new id of two producers and a
    retransmit of the one before."""
    dedup.topic(compact_every_commits="never")
    for i in range(statements):
        dedup.send([("a", i), ("b", i), ("a", i - 1 if i else 0)])


def check_once(dedup, entries: list[tuple]) -> None:
    """The topic holds ``entries``, each once, at its position, for every read seqdedup makes."""
    assert dedup.session.sql(ENTRIES).rows == entries
    assert dedup.position_problem() is None
    assert dedup.session.stats("events")["entries"] == len(entries)
    assert positions(Reader(dedup.session, "events").read()) == [e[2] for e in entries]


def positions(read) -> list[int]:
    return [row[read.columns.index("_position")] for row in read.rows]


def test_a_compacted_topic_keeps_every_entry_once_at_its_position(dedup):
    history(dedup, 6)
    entries = dedup.session.sql(ENTRIES).rows
    reader = Reader(dedup.session, "events")
    first = positions(reader.read(max_entries=5))

    done = dedup.session.compact("events", factor=2)

    assert isinstance(done, Compaction) and done.topic == dedup.key()
    if dedup.engine.family == "duckdb":      # one table: nothing to merge
        assert (done.partitions_before, done.partitions_after, done.merged, done.rows) == (0, 0, [], 0)
    else:                                  # 7 commits (the topic's, then 6): 1-4 and 5-6 merge, 7 waits
        assert (done.partitions_before, done.partitions_after, done.merged) == (7, 3, [(1, 4), (5, 6)])
        assert done.rows == 10
    check_once(dedup, entries)
    rest = positions(reader.read())                 # a reader goes on from where it was, across the compaction
    assert first + rest == [e[2] for e in entries]

    result = dedup.send([("a", 5), ("b", 2), ("a", 6)])     # marks survive: the retransmits are dropped
    assert (result.written, result.duplicates) == (1, 2)
    marks = dedup.session.producer_state("events").rows
    dedup.restart()                                 # recovered from the catalog over the compacted partitions
    assert dedup.session.producer_state("events").rows == marks
    assert recover(dedup.session.broker, "events").ok


@pytest.mark.connect_ci
def test_commits_without_entries_merge_like_any_other(dedup):
    """The topic's own commit and a snapshot's hold no entry (on Spark, partitions with no file, whose read runs no
    task): merged on their own, they make one partition with no entry (found by the crash fuzzer, seed 41)."""
    dedup.topic(compact_every_commits="never")
    dedup.session.snapshot("events")
    dedup.send([("a", 0)])
    entries = dedup.session.sql(ENTRIES).rows
    done = dedup.session.compact("events", factor=2)
    if dedup.engine.family == "spark":
        assert (done.merged, done.rows, done.partitions_after) == ([(1, 2)], 0, 2)
    check_once(dedup, entries)
    assert dedup.send([("a", 0), ("a", 1)]).written == 1


@pytest.mark.notyet(["connect"], raises=AssertionError, reason="a Spark Connect server may serve other clients, so "
                    "seqdedup writes there as one of several drivers and never removes a directory another driver "
                    "might still read: those a compaction cut short stay (docs/engines/spark.md, Spark Connect)")
def test_a_compaction_cut_short_at_any_step_leaves_each_entry_once_and_the_next_one_finishes_it(dedup):
    history(dedup, 4)
    entries = dedup.session.sql(ENTRIES).rows
    for point in ("compact_after_write", "compact_after_switch", "compact_after_drop"):
        failpoints.inject(point, RuntimeError(f"killed at {point}"))
        if dedup.engine.family == "spark":
            with pytest.raises(RuntimeError, match=point):
                dedup.session.compact("events", factor=2)
        else:
            assert dedup.session.compact("events", factor=2).merged == []
        failpoints._injected.clear()
        # every read, a plain SELECT as much as seqdedup's own, holds each entry once at once (the partitions
        # switch in one metastore transaction); the next writer to recover the topic drops what is left
        check_once(dedup, entries)
        dedup.restart()
        assert dedup.send([("a", 0), ("b", 3)]).written == 0
        check_once(dedup, entries)
        assert dedup.unread_directories() == []      # and removes the directories nobody reads any more
    done = dedup.session.compact("events", factor=2)
    if dedup.engine.family == "spark":     # 1-4 and 5-6 were merged by the compactions cut short; 7 and 8 join them
        assert (done.merged, done.partitions_after, done.repaired) == ([(1, 8)], 1, 0)
    check_once(dedup, entries)
    assert dedup.unread_directories() == []
    assert recover(dedup.session.broker, "events").ok


def test_a_topic_compacts_itself_every_n_commits(dedup):
    dedup.topic(compact_every_commits=3)        # commit 1 made the topic
    results = [dedup.send([("a", i)]) for i in range(3)]
    assert [r.commit for r in results] == [2, 3, 4]
    ran = [r.compaction is not None for r in results]
    assert ran == ([False, True, False] if dedup.engine.family == "spark" else [False, False, False])
    assert dedup.session.topic("events").applied.compact_every_commits == 3


def test_rows_written_around_seqdedup_are_moved_aside_before_their_partitions_merge(dedup):
    history(dedup, 2)
    dedup.unprotect()
    dedup.around("INSERT INTO events (payload, _commit) VALUES ('stray', 2)")    # into a commit seqdedup published
    entries = dedup.session.sql(ENTRIES + " NULLS FIRST").rows
    if dedup.engine.family == "spark":
        with pytest.raises(TopicError, match="1 rows seqdedup did not write.*seqdedup topic quarantine"):
            dedup.session.compact("events", factor=2)
        assert dedup.session.sql(ENTRIES + " NULLS FIRST").rows == entries       # nothing changed
    assert dedup.session.quarantine_foreign_rows("events")["rows"] == 1
    assert dedup.session.compact("events", factor=2).partitions_after == (2 if dedup.engine.family == "spark" else 0)
    check_once(dedup, entries[1:])


def test_compact_refuses_a_bad_factor_and_an_unknown_topic_before_doing_anything(dedup):
    dedup.topic()
    with pytest.raises(TopicError, match="factor=1.*2 or more"):
        dedup.session.compact("events", factor=1)
    with pytest.raises(TopicError, match="nope"):
        dedup.session.compact("nope")
