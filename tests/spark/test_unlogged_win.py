"""A commit whose winner died between publishing its partition and logging its win (its COMMITS row), read by a
Spark Connect session new to the topic: its catalog rows (its snapshot, its run log rows) count, as its partition is
published. Such a session reads the snapshots alongside the read that finds those winners, with none assumed
(``Commits.beside_winners``); finding one, it reads them again."""
from __future__ import annotations

import contextlib

import pytest

from ..engines import ENGINES, Harness

CONNECT = next(e for e in ENGINES if e.name == "connect")


# (parametrized, so that its test ids name connect: tests/conftest.py sends the modules on Spark Connect to one worker)
@pytest.fixture(params=[pytest.param(CONNECT, id="connect")])
def connect(request, tmp_path_factory):
    harness = Harness(request.param, str(tmp_path_factory.getbasetemp() / "spark-home"))
    yield harness
    harness.close()


@contextlib.contextmanager
def dying_before_logging_its_win(session):
    """The session's commits publish their partition, then fail before their COMMITS row, as a process killed
    there."""
    files = session.adapter.files
    append = files.append_rows

    def died_before_logging(table, rows):
        if table.name == "seqdedup_commits":
            raise ConnectionError("died between publishing the partition and logging the win")
        return append(table, rows)

    files.append_rows = died_before_logging
    try:
        with pytest.raises(ConnectionError):
            yield
    finally:
        files.append_rows = append


@pytest.mark.connect_ci
def test_a_commit_whose_win_was_never_logged_counts_for_a_session_new_to_the_topic(connect):
    connect.topic(snapshot_interval_entries=3)
    connect.send([("p", 1), ("p", 2)])
    with dying_before_logging_its_win(connect.session):
        connect.send([("p", 3), ("q", 1)])       # the 4th entry: a snapshot in the same commit
    connect.restart()
    stats = connect.session.stats("events")
    assert (stats["written"], stats["entries"], stats["entries_since_snapshot"]) == (4, 4, 0)
    assert stats["last_snapshot"]["position"] == stats["last_position"]
    assert connect.send([("p", 3), ("q", 1), ("q", 2)]).written == 1


@pytest.mark.connect_ci
def test_a_commit_published_while_a_new_session_reads_its_snapshots_is_counted_once(connect):
    """A commit published (by a driver that then died before logging its win) after a session new to the topic
    listed the commits for its read of the snapshots, which runs on the winners it assumed: the state it recovers
    holds that commit's entries all the same (from the log, where the snapshot is not seen), so none is written
    twice."""
    connect.topic(snapshot_interval_entries=3)
    connect.send([("p", 1), ("p", 2)])
    with dying_before_logging_its_win(connect.session):
        connect.send([("p", 3), ("q", 1)])       # the 4th entry: a snapshot in the same commit
    connect.restart()
    commits = connect.session.adapter.commits
    listed = commits.published
    late = max(listed(connect.session.ref("events")))
    calls = []

    def published_late(topic):
        """The commits published, the last one not yet at the first listing (the one the read beside the
        winners starts from)."""
        calls.append(bool(commits._assumed))      # (a read on assumed winners in flight)
        return listed(topic) - ({late} if len(calls) == 1 else set())

    commits.published = published_late
    try:
        state = dict(connect.session.sql("SELECT producer, sequence_id FROM producer_state('events')").rows)
    finally:
        del commits.published
    assert any(calls[1:]), "no read on assumed winners listed the late commit: the case is not reached"
    assert state == {"p": 3, "q": 1}
    assert connect.send([("p", 3), ("q", 1), ("q", 2)]).written == 1
    assert connect.ids("p") == [1, 2, 3] and connect.ids("q") == [1, 2]
