"""DuckDB only: a database file shared by processes."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ..engines import ENGINES, Harness


@pytest.fixture
def duckdb_dedup(tmp_path):
    harness = Harness(next(e for e in ENGINES if e.name == "duckdb"), str(tmp_path / "seqdedup.duckdb"))
    yield harness
    harness.close()


def test_a_new_process_reads_the_same_state(duckdb_dedup):
    duckdb_dedup.topic(snapshot_interval_entries=4)
    for batch in ([("a", 0), ("b", 5)], [("a", 1), ("a", 2), ("c", 9)], [("b", 6), ("b", 5)]):
        duckdb_dedup.send(batch)
    expected = [[p, s] for p, s, _ in duckdb_dedup.session.producer_state("events").rows]
    duckdb_dedup.close()
    code = ("import json, seqdedup; s = seqdedup.connect(%r); "
            "print(json.dumps([[p, m] for p, m, _ in s.producer_state('events').rows]))" % duckdb_dedup.database)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == expected
    duckdb_dedup.session = duckdb_dedup.connect()


def test_a_second_writer_process_waits_its_lock_timeout_then_gets_a_clear_error(duckdb_dedup):
    duckdb_dedup.topic()
    code = "import seqdedup; seqdedup.connect(%r, lock_timeout=0.5)" % duckdb_dedup.database
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode != 0
    assert f"is in use by process {os.getpid()} (waited 0.5 s for it)" in result.stderr
    assert "one process per file while a writer has it open" in result.stderr


def test_connect_refuses_an_object_it_cannot_use_and_makes_no_file(tmp_path, monkeypatch):
    """Anything but a path, a duckdb connection or a SparkSession is refused by name: it once became a DuckDB file
    named after its repr (a Spark Connect session did, in the working folder)."""
    import seqdedup

    monkeypatch.chdir(tmp_path)
    with pytest.raises(seqdedup.EngineError, match="takes a DuckDB file path.*not a builtins.object"):
        seqdedup.connect(object())
    assert list(tmp_path.iterdir()) == []


def test_statements_on_a_disabled_topic_cost_the_same_each_time(duckdb_dedup):
    """A disabled topic's statements take the window plan. Its decided rows once went to a temporary table of a new
    name per statement, and the statement DuckDB built around the kept plan was kept for each name, every one a copy
    of the plan with those before it: the kept trees doubled with each statement (the tenth took seconds, the
    twelfth a minute and gigabytes). Measured here by their size, not by a clock."""
    from seqdedup.core import statement

    duckdb_dedup.topic()
    duckdb_dedup.session.alter_topic("events", deduplication_enabled=False)

    def kept_nodes() -> int:
        trees = list(statement._KEPT.values())
        trees += [around for tree in trees for around in tree.meta.get("around", {}).values()]
        return sum(1 for tree in trees for _ in tree.walk())

    sizes = []
    for i in range(8):
        result = duckdb_dedup.send([("p", i), ("p", i)])
        assert (result.written, result.duplicates) == (2, 0)        # unchecked: every entry is written
        sizes.append(kept_nodes())
    assert sizes[3:] == [sizes[3]] * 5, sizes


def test_sessions_on_two_database_files_of_one_process_each_read_their_own_catalog(tmp_path):
    """seqdedup's catalog tables are named with their database (a temporary table cannot hide them): the name is
    put on a copy of each query, never on a template another session's query is made from."""
    import seqdedup

    for name, mark in (("one", 3), ("two", 7)):
        with seqdedup.connect(str(tmp_path / f"{name}.duckdb")) as session:
            session.create_topic("events", {"payload": "STRING"})
            session.sql(f"INSERT INTO events SELECT 'x' AS payload FROM (SELECT 'p' AS producer, {mark} AS seq) "
                        "WHERE is_not_dup(producer, seq)")
    for name, mark in (("one", 3), ("two", 7)):
        with seqdedup.connect(str(tmp_path / f"{name}.duckdb")) as session:
            assert session.last_sequence_id("events", "p") == mark


def test_a_small_statements_outcome_made_in_python_is_the_engines_own(tmp_path, monkeypatch):
    """A small statement without batch entries that removes none of its rows (no repeat; ordered, none rejected)
    writes first and has its outcome made in Python (``FETCHED_OUTCOME_AT_MOST``), from the keys its write returned
    (and its rows read back where one was not written), the write undone where an id repeats. Another, or a large
    one, has it from the engine's aggregates. The same statements both ways give the
    same counts per producer, the same entries in the same order, and the same run log; each way's positions are
    those of the entries it wrote (the write that returns its keys numbers the entries it writes, where the other
    gives each its row's place: both unique and increasing, R7). (The property tests against the reference model
    take both ways too: ``DISTRIBUTED``.)"""
    from seqdedup.core import plans

    engine = next(e for e in ENGINES if e.name == "duckdb")
    statements = [[("a", 0), ("b", 5), ("a", 3)], [("a", 1), ("a", 4), ("c", 9), ("b", 5)], [],
                  [("b", 6), ("b", 6), ("a", 5)], [("c", 9)], [("a", 9), ("b", 7), ("c", 2), ("d", 0)],
                  [("e", 5), ("e", 3)], [("f", n) for n in range(256)], [("g", n) for n in range(257)]]
    made = []
    original = plans.outcome_of_rows
    monkeypatch.setattr(plans, "outcome_of_rows", lambda *a: made.append(original(*a)) or made[-1])
    seen = []
    for at_most in (256, None):
        harness = Harness(engine, str(tmp_path / f"{at_most}.duckdb"), adapter={"FETCHED_OUTCOME_AT_MOST": at_most})
        harness.topic()
        harness.topic("inorder")
        outcomes, by_arrow, spans = [], [], []
        for rows in statements:
            for topic in ("events", "inorder"):
                made.clear()
                result = harness.send(rows, topic=topic, ordered=topic == "inorder")
                counts = [(c.producer, c.written, c.duplicates, c.out_of_order) for c in result.producers]
                outcomes.append(counts)
                by_arrow.append(any(outcome is not None for outcome in made))
                # each producer's first and last positions are those of the entries the commit wrote
                wrote = harness.session.sql(f"SELECT _producer, min(_position), max(_position) FROM {topic} WHERE "
                                            f"_commit = {result.commit or -1} GROUP BY _producer").rows
                assert sorted(wrote) == [(c.producer, c.first_position, c.last_position) for c in result.producers
                                         if c.written], (rows, topic)
                spans.extend((c.first_position, c.last_position) for c in result.producers)
        topic = [harness.session.sql(f"SELECT _producer, _sequence_id, _commit FROM {name} ORDER BY _position").rows
                 for name in ("events", "inorder")]
        log = harness.session.sql("SELECT producer, written, duplicates, first_position, last_position, highest "
                                  "FROM seqdedup_statements ORDER BY commit_id, topic, producer").rows
        assert [(first, last) for _, _, _, first, last, _ in log] == spans     # (the run log says the same)
        seen.append((outcomes, topic, [(p, w, d, h) for p, w, d, _, _, h in log], by_arrow))
        harness.close()
    assert seen[0][:3] == seen[1][:3]
    # the first way made the outcome of each statement with entries and nothing to remove, sent to each topic in
    # turn (unordered, in order): the fourth repeats b's 6 (in order, the second 6 is rejected), the seventh comes
    # out of order, and the last has one entry more than FETCHED_OUTCOME_AT_MOST
    assert seen[0][3] == [True, True, True, True, False, False, False, False, True, True, True, True, True, False,
                          True, True, False, False]
    assert seen[1][3] == [False] * 18
