"""A commit whose winner died between publishing its partition and logging its win (its COMMITS row), read by a
Spark Connect session new to the topic: its catalog rows (its snapshot, its run log rows) count, as its partition is
published. Such a session reads the snapshots alongside the read that finds those winners, with none assumed
(``Commits.beside_winners``); finding one, it reads them again."""
from __future__ import annotations

import pytest

from ..engines import ENGINES, Harness


@pytest.fixture
def connect(tmp_path_factory):
    harness = Harness(next(e for e in ENGINES if e.name == "connect"),
                      str(tmp_path_factory.getbasetemp() / "spark-home"))
    yield harness
    harness.close()


@pytest.mark.connect
def test_a_commit_whose_win_was_never_logged_counts_for_a_session_new_to_the_topic(connect):
    connect.topic(snapshot_interval_entries=3)
    connect.send([("p", 1), ("p", 2)])
    files = connect.session.adapter.files
    append = files.append_rows

    def died_before_logging(table, rows):
        if table.name == "seqdedup_commits":
            raise ConnectionError("died between publishing the partition and logging the win")
        return append(table, rows)

    files.append_rows = died_before_logging
    with pytest.raises(ConnectionError):
        connect.send([("p", 3), ("q", 1)])       # the 4th entry: a snapshot in the same commit
    files.append_rows = append
    connect.restart()
    stats = connect.session.stats("events")
    assert (stats["written"], stats["entries"], stats["entries_since_snapshot"]) == (4, 4, 0)
    assert stats["last_snapshot"]["position"] == stats["last_position"]
    assert connect.send([("p", 3), ("q", 1), ("q", 2)]).written == 1
