"""Several Spark drivers on one shared metastore (PostgreSQL, started by the test), one topic, at once: C17 across
processes. Nothing makes them take turns: each decides on the state it last saw and publishes its commit by
registering the topic's next partition, which the metastore lets only one driver do; the others decide again
(docs/engines/spark.md). Every entry lands exactly once, and the writers' counts add up.
"""
from __future__ import annotations

import pytest

from tests.metastore import PostgresServer

from . import c17
from .test_processes import Writer


@pytest.fixture(scope="module")
def metastore():
    with PostgresServer() as server:
        yield server.metastore()


@pytest.mark.spark
def test_c17_three_drivers_on_a_shared_metastore_write_each_entry_once(metastore, tmp_path):
    home, go = str(tmp_path / "home"), tmp_path / "go"
    writers = [Writer("spark", home, name, lock_timeout=600, metastore=metastore, size=250, go=str(go))
               for name in "abc"]
    for writer in writers:
        writer.wait_for("opened")
    go.touch()                          # all three at once: they race for every commit
    for writer in writers:
        assert writer.finish() == 0, (writer.lines.get("error"), writer.stderr[-3000:])
    last = max(writers, key=lambda w: w.lines["at"])
    expected = c17.expected("abc")
    assert [tuple(e) for e in last.lines["entries"]] == expected       # each distinct entry once
    written, duplicates, conflicts = (sum(s[i] for w in writers for s in w.sent) for i in (0, 1, 2))
    assert (written, duplicates) == (len(expected), 3000 - len(expected))
    assert conflicts > 0                # the metastore refused some commits, and their statements decided again
