"""A read-only database: a session opened with ``read_only=True``, and (test_read_only_files.py) a database file
or folder this process may not write. Every write fails with an EngineError that names the problem and the fix,
before anything is written; reads still work; opened writable afterwards, the data is intact and a retry writes
each entry once."""
from __future__ import annotations

import pytest

from seqdedup.errors import EngineError

from .helpers import dump


def writes(dedup) -> dict:
    """Every kind of write a session makes, each a callable."""
    session = dedup.session
    return {
        "a dedup INSERT": lambda: dedup.send([("p", 1), ("p", 2), ("q", 8)]),
        "create_topic": lambda: session.create_topic("other", {"payload": "STRING"}),
        "alter_topic": lambda: session.alter_topic("events", snapshot_interval_entries=5),
        "a namespace policy": lambda: session.set_namespace_policy(dedup.namespace, snapshot_interval_entries=5),
        "snapshot": lambda: session.snapshot("events"),
        "a plain CREATE TABLE": lambda: session.sql("CREATE TABLE scratch (x BIGINT)"),
    }


def test_a_read_only_session_refuses_every_write_and_loses_nothing(dedup):
    dedup.topic(snapshot_interval_entries=1000)      # entries since the last snapshot: a snapshot has to write
    dedup.send([("p", 0), ("p", 1), ("q", 7)])
    before = dump(dedup.session)
    dedup.session.close()                            # DuckDB opens a file one way at a time in a process
    dedup.session = dedup.connect(read_only=True)

    assert dedup.last("p") == 1 and dedup.session.last_sequence_id("events", "q") == 7
    assert [(p, s) for p, s, _ in dedup.session.producer_state("events").rows] == [("p", 1), ("q", 7)]
    assert dedup.ids("p") == [0, 1]
    for what, write in writes(dedup).items():
        with pytest.raises(EngineError, match="read-only") as refused:
            write()
        assert "connect without read_only=True to write" in str(refused.value), f"{what}: {refused.value}"
    assert dump(dedup.session) == before

    dedup.restart()                                  # writable again
    assert dump(dedup.session) == before
    assert dedup.send([("p", 1), ("p", 2), ("q", 7)]).written == 1
    assert dedup.entries() == [("p", 0, 0), ("p", 1, 1), ("q", 7, 7), ("p", 2, 2)]


def test_a_read_only_session_reads_the_logs_an_older_catalog_lacks_as_empty(dedup):
    """A catalog from before the ledger of dropped entries and the holes (R16, R17) lacks their tables, and only a
    writable session adds them: a read-only one reads no rows there, not the engine's "table not found"."""
    dedup.topic(dropped_entries="keys", gap_policy="record")
    dedup.send([("p", 0), ("p", 0), ("p", 5)])
    for table in ("seqdedup_dropped", "seqdedup_gaps"):
        dedup.around(f"DROP TABLE {table}")
    dedup.session.close()
    dedup.session = dedup.connect(read_only=True)
    dropped, gaps = dedup.session.dropped("events", producer="p", limit=5), dedup.session.gaps("events")
    assert (dropped.rows, gaps.rows) == ([], [])
    assert dropped.columns[:3] == ["topic", "commit_id", "statement_id"] and "after_id" in gaps.columns
