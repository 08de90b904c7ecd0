"""Incremental snapshots and retention (R7): a snapshot holds what changed since the one before it, a full one
comes every ``full_snapshot_interval`` snapshots (or sooner when the increments grow as large as the state), the
snapshots recovery no longer needs are removed with the full one that replaces them, and recovery gives the same
state whatever the chain looks like. On every engine."""
from __future__ import annotations

import pytest
from sqlglot import exp

from seqdedup.catalog.state import literal
from seqdedup.core.recovery import recover


#: A known gap, found for retention on 2026-11-27 with SEQDEDUP_CONNECT=all (CI does not run it).
NO_PRUNING_ON_CONNECT = pytest.mark.notyet(
    ["connect"], raises=AssertionError, reason="a Spark Connect server may serve other clients, so seqdedup writes "
    "there as one of several drivers, which prune no snapshot: removing catalog rows rewrites the table under the "
    "others' appends (docs/engines/spark.md, Spark Connect)")


def headers(dedup, topic: str = "events") -> list[tuple]:
    """(snapshot_id, position, kind, parent_id, producers) of each snapshot header, oldest first."""
    return [tuple(r) for r in dedup.session.sql(
        "SELECT snapshot_id, position, kind, parent_id, producers FROM producer_sequences "
        f"WHERE topic = '{dedup.key(topic)}' AND producer IS NULL ORDER BY snapshot_id").rows]


def producer_rows(dedup, topic: str = "events") -> list[tuple]:
    """(snapshot_id, producer, sequence_id) of every producer row, tombstones (NULL sequence_id) too."""
    return [tuple(r) for r in dedup.session.sql(
        "SELECT snapshot_id, producer, sequence_id FROM producer_sequences "
        f"WHERE topic = '{dedup.key(topic)}' AND producer IS NOT NULL ORDER BY snapshot_id, producer").rows]


def tear(dedup, snapshot_id: int, producer: str) -> None:
    """Lose one producer row of a snapshot, as a hand edit or a bad restore would."""
    dedup.session.adapter.storage.delete_rows(exp.table_("producer_sequences"), exp.and_(
        exp.column("topic").eq(literal(dedup.key())), exp.column("snapshot_id").eq(literal(snapshot_id)),
        exp.column("producer").eq(literal(producer))))


@NO_PRUNING_ON_CONNECT
def test_c08_increments_hold_what_changed_and_a_full_snapshot_replaces_them(dedup):
    # C08 restated: a snapshot after every 3 entries, a full one every 3 snapshots, retention 0
    dedup.configure(PRUNE_SPACING=1)     # every full snapshot prunes (on Spark a small state's in batches)
    dedup.topic(snapshot_interval_entries=3, full_snapshot_interval=3)
    dedup.send([(p, 0) for p in "abcdef"])                # 2: an increment of 1 (the empty "enabled" snapshot)
    dedup.send([("a", 1), ("a", 2), ("a", 3)])           # 3: full, as the increments would outgrow the state
    # the snapshots before it are removed with it, but for the "enabled" one: recover checks from there
    assert [(i, k, parent, n) for i, _, k, parent, n in headers(dedup)] == [
        (1, "enabled", None, 0), (3, "snapshot", None, 6)]
    dedup.send([("b", 1), ("b", 2), ("b", 3)])           # 4: only b changed
    dedup.send([("c", 1), ("c", 2), ("c", 3)])           # 5: only c
    assert [(i, k, parent, n) for i, _, k, parent, n in headers(dedup)][2:] == [
        (4, "increment", 3, 1), (5, "increment", 4, 1)]
    assert producer_rows(dedup)[-2:] == [(4, "b", 3), (5, "c", 3)]
    dedup.restart()                                      # the chain 3, 4, 5 is the state
    assert [dedup.last(p) for p in "abcdef"] == [3, 3, 3, 0, 0, 0]
    dedup.send([("d", 1), ("d", 2), ("d", 3)])           # the 3rd snapshot of the chain: full, 6
    assert [(i, k, parent) for i, _, k, parent, _ in headers(dedup)] == [(1, "enabled", None), (6, "snapshot", None)]
    assert [(p, s) for i, p, s in producer_rows(dedup)] == [(p, 3) for p in "abcd"] + [("e", 0), ("f", 0)]
    dedup.send([("e", 1)])                               # below the interval: replayed after a restart
    dedup.restart()
    assert dedup.session.stats("events")["entries_since_snapshot"] == 1
    assert [dedup.last(p) for p in "abcdef"] == [3, 3, 3, 3, 1, 0]
    assert dedup.send([("e", 1), ("e", 2)]).written == 1
    report = recover(dedup.session.broker, "events")
    assert report.ok and report.matches_full_replay, report.problems()


def test_purge_writes_tombstones_and_recovery_and_recover_agree(dedup):
    dedup.topic(producer_inactivity_timeout=1, snapshot_interval_entries=2, full_snapshot_interval=1)
    dedup.send([("p", 0), ("r", 0)])
    dedup.clock.advance(seconds=30)
    dedup.send([(f"x{i}", 0) for i in range(20)])
    dedup.session.alter_topic("events", full_snapshot_interval=100)
    dedup.clock.advance(seconds=31)
    dedup.send([("x0", 1), ("x1", 1)])         # p and r are idle over a minute by the clock, not yet by the log
    dedup.send([("y", 0)])                     # by both now (R11, the clock): purged first, in an increment
    purge = [h for h in headers(dedup) if h[2] == "purge"]
    assert len(purge) == 1 and purge[0][3] is not None
    assert [(p, s) for i, p, s in producer_rows(dedup) if i == purge[0][0]] == [("p", None), ("r", None)]
    dedup.restart()
    assert [dedup.last(p) for p in ("p", "r", "x0", "x2")] == [-1, -1, 1, 0]
    assert dedup.send([("p", 0)]).written == 1                # purged: its old ids are new again (R11)
    report = recover(dedup.session.broker, "events")
    assert report.ok and report.matches_full_replay, report.problems()
    dedup.restart()
    assert [dedup.last(p) for p in ("p", "r", "x0", "x2")] == [0, -1, 1, 0]


def test_a_torn_increment_is_never_used(dedup):
    dedup.topic(snapshot_interval_entries=1, full_snapshot_interval=1)
    dedup.send([("p", 0), ("q", 0)])
    dedup.session.alter_topic("events", full_snapshot_interval=100)
    dedup.send([("p", 1), ("q", 1)])
    last = headers(dedup)[-1]
    assert last[2:] == ("increment", last[0] - 1, 2)
    tear(dedup, last[0], "q")
    dedup.restart()
    stats = dedup.session.stats("events")
    assert stats["last_snapshot"]["snapshot_id"] == last[0] - 1     # the chain stops before the torn one
    assert stats["entries_since_snapshot"] == 2                      # and the replay covers its entries
    assert [dedup.last(p) for p in "pq"] == [1, 1]


def test_a_first_snapshot_written_twice_still_starts_the_chain(dedup):
    """Drivers that create a topic at once each publish its first snapshot, empty, with id 1 (found by the
    three-driver test, 2026-11-28): two headers of one id, each complete, from which recovery starts."""
    dedup.topic()
    dedup.send([("p", 0), ("q", 0)])
    dedup.session.adapter.execute("INSERT INTO producer_sequences SELECT * FROM producer_sequences "
                                  f"WHERE topic = '{dedup.key()}' AND snapshot_id = 1")
    assert [h[:3] for h in headers(dedup)] == [(1, 0, "enabled")] * 2
    dedup.restart()
    assert dedup.send([("p", 0), ("p", 1)]).written == 1
    assert [dedup.last(p) for p in "pq"] == [1, 0]
    assert recover(dedup.session.broker, "events").ok


@NO_PRUNING_ON_CONNECT
def test_retention_keeps_snapshots_for_the_minutes_asked_and_the_run_log_too(dedup):
    dedup.configure(PRUNE_SPACING=1)     # every full snapshot prunes (on Spark a small state's in batches)
    dedup.topic(snapshot_interval_entries=1, full_snapshot_interval=2, snapshot_retention_minutes=10,
                run_log_retention_minutes=5)
    dedup.send([("p", 0)])                     # 2: increment
    dedup.send([("p", 1)])                     # 3: full; 1 and 2 are kept (taken less than 10 minutes ago)
    assert [h[0] for h in headers(dedup)] == [1, 2, 3]
    dedup.clock.advance(minutes=11)
    dedup.send([("p", 2)])                     # 4: increment
    dedup.send([("p", 3)])                     # 5: full; 2, 3 and 4 are unneeded, 2 and 3 old enough
    assert [h[0] for h in headers(dedup)] == [1, 4, 5]
    stats = dedup.session.stats("events")
    assert stats["written"] == 2               # the run log keeps the last 5 minutes: the last two statements
    assert stats["catalog"]["snapshot_rows"] == len(headers(dedup)) + len(producer_rows(dedup))
    dedup.restart()
    assert dedup.last("p") == 3


@NO_PRUNING_ON_CONNECT
def test_a_small_state_is_pruned_in_batches_where_a_removal_rewrites_the_table(dedup):
    """On Spark (``PRUNE_SPACING`` 16) removing rows rewrites ``producer_sequences`` whole, and a few producers
    that all change at each statement make a full snapshot every other statement: their snapshots go at the first
    full snapshot of each run of 16 ids, a state of ``PRUNE_AT_ROWS`` producers or more at every one. Here with
    runs of 4 ids and 3 rows, on every engine."""
    dedup.configure(PRUNE_SPACING=4, PRUNE_AT_ROWS=3)
    dedup.topic(snapshot_interval_entries=1, full_snapshot_interval=1)
    for s in range(3):
        dedup.send([("p", s)])                 # full snapshots 2 and 3 prune nothing; 4 starts a run of ids
    assert [h[0] for h in headers(dedup)] == [1, 4]           # (1, where the state started, stays)
    dedup.send([("p", 3)])
    assert [h[0] for h in headers(dedup)] == [1, 4, 5]
    dedup.send([("a", 0), ("b", 0)])           # 6: a state of 3 producers
    assert [h[0] for h in headers(dedup)] == [1, 6]
    assert [r[1:] for r in producer_rows(dedup)] == [("a", 0), ("b", 0), ("p", 3)]
    dedup.restart()
    assert [dedup.last(p) for p in "abp"] == [0, 0, 3]


@NO_PRUNING_ON_CONNECT
def test_a_session_writes_on_after_another_session_of_the_process_pruned_the_snapshots(dedup):
    """On Spark a prune rewrites producer_sequences into a new directory and removes the old one: the other session
    knew the old one (from its own last snapshot) and appended its next snapshot there (found in CI by C17 of two
    sessions in threads: "Failed to open local file")."""
    dedup.configure(PRUNE_SPACING=1)     # every full snapshot prunes (on Spark a small state's in batches)
    dedup.topic(snapshot_interval_entries=1, full_snapshot_interval=1, snapshot_retention_minutes=10)
    other = dedup.connect()
    try:
        other.sql("INSERT INTO events SELECT 'o' AS payload WHERE is_not_dup('o', 0)")   # full snapshot 2, nothing pruned
        dedup.clock.advance(minutes=11)
        dedup.send([("p", 0)])                  # a full snapshot: 2 goes, producer_sequences is rewritten
        result = other.sql("INSERT INTO events SELECT 'o' AS payload WHERE is_not_dup('o', 1)")
        assert result.written == 1
        assert [h[0] for h in headers(dedup)] == [1, 3, 4]     # (1, where the state started, stays)
    finally:
        other.close()
    dedup.restart()
    assert (dedup.last("o"), dedup.last("p")) == (1, 0)


def test_a_large_state_joins_only_the_marks_of_the_producers_a_statement_carries(dedup):
    dedup.topic()
    dedup.send([(p, 5) for p in "abc"])
    dedup.session.adapter.SEMI_JOIN_ABOVE = 0           # as if the state were large: the semi-join path
    result = dedup.send([("a", 5), ("a", 6), ("d", 0), ("b", 4)])
    assert (result.written, result.duplicates) == (2, 2)
    assert [dedup.last(p) for p in "abcd"] == [6, 5, 5, 0]
    dedup.session.adapter.MARKS_AS_MAP = None           # the carried marks joined as a relation (Spark: not a map)
    result = dedup.send([("a", 6), ("e", 1), ("c", 6), ("c", 5)])
    assert (result.written, result.duplicates) == (2, 2)
    assert [dedup.last(p) for p in "abcde"] == [6, 5, 6, 0, 1]


def test_a_large_snapshot_is_written_whole_with_its_times(dedup):
    dedup.session.adapter.FILE_ROWS = 1      # as if the marks were many (Spark: read from a Parquet file)
    dedup.topic(snapshot_interval_entries=3, producer_inactivity_timeout=1)
    dedup.send([("p", 0), ("q", 0), ("r", 0)])
    times = dedup.session.sql(f"SELECT DISTINCT last_publish_time FROM producer_sequences "
                              f"WHERE topic = '{dedup.key()}' AND producer IS NOT NULL").rows
    assert [t[0] for t in times] == [dedup.clock.now]
    dedup.restart()
    dedup.clock.advance(seconds=61)          # the times read back are the ones written: all three expire
    dedup.session.purge_inactive("events")
    assert [dedup.last(p) for p in "pqr"] == [-1, -1, -1]


def test_a_large_state_is_recovered_whole_with_its_times(dedup):
    def marks():
        return dedup.session.state("events").marks.table.sort_by("producer")

    dedup.topic(snapshot_interval_entries=3)
    dedup.send([("p", 0), ("q", 4), ("r", 0)])
    dedup.clock.advance(seconds=5)
    dedup.send([("s", 2), ("p", 1)])       # replayed after the snapshot, at a later time
    before = marks()
    dedup.restart()
    dedup.session.adapter.BULK_BYTES = 0      # as if the state were large (Spark: brought back by a Parquet file)
    assert marks().equals(before)
    assert [dedup.last(p) for p in "pqrs"] == [1, 4, 0, 2]
