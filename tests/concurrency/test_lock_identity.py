"""The writer lock belongs to the database, not to the Python object that reached it. Two DuckDB connection objects
of one file (``duckdb.connect(path)`` twice, a connection and its cursor) or two cursors of one in-memory database
are one database: their sessions take one writer lock, so two threads writing at once land every entry once. A second path to an open file (a hard link) would make DuckDB open
the file twice, as two instances that overwrite each other: it is refused.

DuckDB only: a SparkSession is one object per process, and its identity is its warehouse.
"""
from __future__ import annotations

import os
import threading

import duckdb
import pytest

import seqdedup

ENTRIES = 2_000          # per thread; both threads send the same (producer, id) pairs
STATEMENT = 200          # entries per statement


def _connections(kind: str, tmp_path):
    path = str(tmp_path / "one.duckdb")
    if kind == "two-connects":
        return duckdb.connect(path), duckdb.connect(path)
    if kind == "connection-and-cursor":
        first = duckdb.connect(path)
        return first, first.cursor()
    first = duckdb.connect(":memory:")
    return first, first.cursor()


def _write(session, errors: list) -> None:
    try:
        for start in range(0, ENTRIES, STATEMENT):
            session.sql("INSERT INTO events SELECT payload FROM (SELECT 'p' AS producer, i AS seq, "
                        "CAST(i AS VARCHAR) AS payload FROM range(%d, %d) AS r(i)) "
                        "WHERE is_not_dup(producer, seq)" % (start, start + STATEMENT))
    except BaseException as error:
        errors.append(error)


@pytest.mark.duckdb
@pytest.mark.parametrize("kind", ["two-connects", "connection-and-cursor", "memory-cursor"])
def test_two_connections_of_one_database_share_one_writer_lock(kind, tmp_path):
    first, second = _connections(kind, tmp_path)
    one = seqdedup.connect(first, dialect="duckdb")
    two = seqdedup.connect(second, dialect="duckdb")
    assert one.adapter.identity == two.adapter.identity
    one.create_topic("events", {"payload": "STRING"})
    errors: list = []
    threads = [threading.Thread(target=_write, args=(s, errors)) for s in (one, two)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    assert not errors, errors
    rows = one.sql("SELECT count(*), count(DISTINCT _sequence_id), count(DISTINCT _position) FROM events").rows
    assert rows == [(ENTRIES, ENTRIES, ENTRIES)]
    assert one.last_sequence_id("events", "p") == ENTRIES - 1


@pytest.mark.duckdb
def test_two_in_memory_databases_are_two_databases():
    one, two = seqdedup.connect(":memory:"), seqdedup.connect(":memory:")
    assert one.adapter.identity != two.adapter.identity


@pytest.mark.duckdb
def test_a_hard_link_to_an_open_database_is_refused_and_the_first_path_keeps_working(tmp_path):
    path = tmp_path / "one.duckdb"
    one = seqdedup.connect(str(path))
    one.create_topic("events", {"payload": "STRING"})
    os.link(path, tmp_path / "link.duckdb")
    with pytest.raises(seqdedup.EngineError, match="already open in this process as .*one.duckdb"):
        seqdedup.connect(str(tmp_path / "link.duckdb"))
    assert one.sql("INSERT INTO events SELECT 'x' FROM (SELECT 'p' AS producer, 1 AS seq) "
                   "WHERE is_not_dup(producer, seq)").written == 1
    one.close()
    with seqdedup.connect(str(tmp_path / "link.duckdb")) as again:      # once closed, any path will do
        assert again.last_sequence_id("events", "p") == 1
