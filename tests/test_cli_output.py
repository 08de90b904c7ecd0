"""What the command line prints reads as documented: ``sql --json`` one object per statement (a list for several),
``stats`` as text with the repeats ``result.by_producer()`` has."""
from __future__ import annotations

import json

import seqdedup

from . import test_cli_ux

run = test_cli_ux.run          # the fixture: a command run in process, in a folder of its own


def test_sql_json_prints_one_object_for_one_statement_and_a_list_for_several(run):
    run("topic", "create", "events", "-c", "payload:STRING")
    one = json.loads(run("sql", "SELECT 1 AS a", "--json")[1])
    assert one == {"columns": ["a"], "rows": [[1]]}
    several = json.loads(run("sql", "CREATE TEMPORARY VIEW s AS SELECT * FROM VALUES ('p', 1, 'x') AS t(producer, seq, "
                                    "payload); INSERT INTO events SELECT payload FROM s WHERE is_not_dup(producer, seq); "
                                    "SELECT count(*) AS n FROM events", "--json")[1])
    assert [sorted(r)[:2] for r in several] == [["columns", "rows"], ["commit", "compaction"], ["columns", "rows"]]
    assert several[1]["written"] == 1 and several[2]["rows"] == [[1]]


def test_stats_reads_as_text_and_counts_the_repeats(run, tmp_path):
    run("init")
    with seqdedup.connect(str(tmp_path / "seqdedup.duckdb")) as session:
        session.create_topic("events", {"payload": "STRING"})
        result = session.sql(
            "CREATE TEMPORARY VIEW s AS SELECT * FROM VALUES ('p', 0, 1), ('p', 1, 2), ('p', 1, 3), ('p', 5, 4), "
            "('p', 3, 5), ('q', 2, 6), ('q', 2, 7) AS t(producer, seq, arrival); "
            "INSERT INTO events SELECT CAST(arrival AS STRING) FROM s WHERE is_not_dup(producer, seq) ORDER BY arrival")
    counts = result.by_producer()
    assert (counts["p"].repeats, counts["p"].out_of_order, counts["q"].repeats) == (1, 1, 1)
    status, out, _ = run("stats", "events")
    assert status == 0 and not any(mark in out for mark in ("{", "}", "[", "'")), out      # no Python reprs
    assert "duplicates:    3 (2 repeats, 1 out of order)" in out
    assert "last snapshot: 1 (enabled) at position 0, taken " in out
    table = out[out.index("producer  "):].splitlines()
    assert table[0].split() == ["producer", "written", "duplicates", "repeats", "out_of_order"]
    assert [row.split() for row in table[2:]] == [["p", "3", "2", "1", "1"], ["q", "1", "1", "1", "0"]]
    shown = json.loads(run("stats", "events", "--json")[1])
    assert {p: c["repeats"] for p, c in shown["producers"].items()} == {p: c.repeats for p, c in counts.items()}
    assert shown["repeats"] == 2 and shown["last_snapshot"]["snapshot_id"] == 1
