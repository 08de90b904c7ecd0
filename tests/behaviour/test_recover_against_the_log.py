"""``recover`` holds what it starts from against the log, never trusts it (seqdedup/core/recovery.py): a snapshot
written around seqdedup (a COPY of forged rows, a restore from elsewhere) that would let retries be written twice is
found and, with repair, set right; a topic whose snapshots were all deleted around seqdedup is explained, and rebuilt
from its log with repair. A history the log explains (a purge, R11; a disable and an enable, R10) passes. On every
engine."""
from __future__ import annotations

import pytest
from sqlglot import exp

from seqdedup.catalog.state import literal, snapshot_insert
from seqdedup.errors import CatalogError
from seqdedup.core.recovery import recover


def forge(dedup, kind: str, marks: dict[str, int], *, position: int | None = None) -> None:
    """A complete full snapshot of ``marks`` written into producer_sequences around seqdedup, as ``COPY
    producer_sequences FROM 'forged.csv'`` would (in the last published commit, at the log's end unless told)."""
    end, commit = dedup.session.sql("SELECT max(_position), max(_commit) FROM events").rows[0]
    rows = exp.select("*").from_(exp.values(
        [(literal(p), literal(m), literal(dedup.clock())) for p, m in marks.items()], alias="m",
        columns=["producer", "sequence_id", "last_publish_time"])) if marks else None
    with dedup.session.adapter.parameters({"__sd_attempt": None}):      # rows without an attempt (one writer)
        dedup.session.adapter.execute(snapshot_insert(dedup.key(), rows, snapshot_id=1000, kind=kind,
                                                      position=end if position is None else position,
                                                      now=dedup.clock(), commit=commit))


#: A forged snapshot a session would start from, and the marks it then has for p and q (the log holds p 0..1, q 5).
FORGERIES = {
    "a purge that drops a producer still writing": ("purge", {"q": 5}, None, (-1, 5)),
    "an enable where deduplication was never disabled": ("enabled", {}, None, (-1, -1)),
    "a start that holds a lower mark": ("purge", {"p": 0, "q": 5}, None, (0, 5)),
    "a snapshot past the log's end": ("snapshot", {"p": 0, "q": 5}, 1000, (0, 5)),
}


@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_a_forged_snapshot_recovery_would_start_from_is_found_and_repair_sets_it_right(dedup, forgery):
    kind, marks, position, forged = FORGERIES[forgery]
    dedup.topic()
    dedup.send([("p", 0), ("p", 1), ("q", 5)])
    report = recover(dedup.session.broker, "events")                       # the true state: checked, and trusted
    assert report.ok and report.start_differences == [] and report.start_refused is None, report.problems()
    forge(dedup, kind, marks, position=position)
    dedup.restart()
    assert (dedup.last("p"), dedup.last("q")) == forged             # what a new process would start from

    report = recover(dedup.session.broker, "events")
    assert not report.ok and report.matches_full_replay is False, report.problems()
    assert {"producer": "p", "state": forged[0] if forged[0] >= 0 else None, "log": 1} in report.differences
    assert (dedup.last("p"), dedup.last("q")) == forged             # nothing written
    repaired = recover(dedup.session.broker, "events", repair=True)
    assert repaired.ok and repaired.repaired_snapshot_id is not None, repaired.problems()
    dedup.restart()
    assert (dedup.last("p"), dedup.last("q")) == (1, 5)
    assert dedup.send([("p", 0), ("p", 1), ("p", 2), ("q", 5)]).written == 1       # the retries are duplicates
    assert recover(dedup.session.broker, "events").ok


def test_recover_trusts_a_purge_and_an_enable_the_log_explains(dedup):
    dedup.topic(producer_inactivity_timeout=1, snapshot_interval_entries=1, full_snapshot_interval=1)
    dedup.send([("a", 0), ("a", 1), ("b", 0)])
    dedup.clock.advance(seconds=40)
    dedup.send([("b", 1)])
    dedup.clock.advance(seconds=40)
    dedup.send([("b", 2)])
    dedup.send([("b", 3)])          # a is idle over a minute (R11): purged, in a full snapshot that keeps b
    assert dedup.last("a") == -1 and dedup.last("b") == 3
    report = recover(dedup.session.broker, "events")
    assert report.ok and report.checked_from["kind"] == "purge", report.problems()
    assert report.start_differences == [] and report.start_refused is None
    dedup.session.alter_topic("events", deduplication_enabled=False)
    dedup.send([("b", 0)])                      # not checked while disabled (R10)
    dedup.session.alter_topic("events", deduplication_enabled=True)
    report = recover(dedup.session.broker, "events")
    assert report.ok and report.checked_from["kind"] == "enabled", report.problems()
    assert report.start_differences == [] and report.start_refused is None


def test_a_state_whose_snapshots_were_deleted_is_explained_and_repair_rebuilds_it_from_the_log(dedup):
    dedup.topic()
    dedup.send([("p", 0), ("p", 1), ("q", 5)])
    dedup.around("TRUNCATE TABLE producer_sequences")       # as DELETE FROM would (Spark's tables take no DELETE)
    dedup.restart()
    with pytest.raises(CatalogError, match=f"no complete snapshot.*seqdedup recover {dedup.key()} --repair"):
        dedup.send([("p", 1), ("p", 2)])

    report = recover(dedup.session.broker, "events")
    assert report.missing_state and not report.ok and report.repaired_snapshot_id is None
    assert "has no complete snapshot in producer_sequences" in report.problems()
    assert dedup.snapshot_rows() == []                      # nothing written
    rebuilt = recover(dedup.session.broker, "events", repair=True)
    assert rebuilt.ok and rebuilt.repaired_snapshot_id is not None, rebuilt.problems()
    assert (dedup.last("p"), dedup.last("q")) == (1, 5)
    assert dedup.send([("p", 1), ("p", 2), ("q", 5)]).written == 1
    dedup.restart()
    assert recover(dedup.session.broker, "events").ok and dedup.ids("p") == [0, 1, 2]
