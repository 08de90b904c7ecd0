"""A database whose files this process may not write: DuckDB's file at mode 0444 and its folder at 0555, Spark's
warehouse folder with every table in it. Every write fails with an EngineError that names the problem and the
fix, before anything is written; reads still work; with the modes given back the data is intact and a retry writes
each entry once. Real files, real modes, in a real child process (read_only_child.py) that root's permission
override does not cover."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CHILD = Path(__file__).with_name("read_only_child.py")

#: way -> (what a writable connect says, when it refuses at once; what every write says)
EXPECTED = {
    "file": ("this user may not write the database", "is open read-only, so nothing can be written; connect "
                                                     "without read_only=True to write"),
    "folder": (None, "this user may not write the database"),
    "warehouse": (None, "Spark may not write to the warehouse"),
}
FIX = {"file": "connect without read_only=True", "folder": "make the file and its folder writable",
       "warehouse": "make its folder writable by this user, or connect with read_only=True to only read"}


def test_read_only_files_fail_clearly_and_lose_nothing(engine, tmp_path, capsys):
    database = tmp_path / ("home" if engine.family == "spark" else "db/seqdedup.duckdb")
    database.parent.mkdir(parents=True, exist_ok=True)
    child = subprocess.run([sys.executable, str(CHILD), engine.name, str(database)], capture_output=True, text=True,
                           timeout=900)
    assert child.returncode == 0, child.stderr[-4000:]
    lines = [json.loads(line) for line in child.stdout.splitlines() if line.startswith("{")]
    how, reports = lines[0]["how"], lines[1:]
    with capsys.disabled():
        print(f"\n[{engine.name}] read-only files by {how}")
    assert [r["way"] for r in reports] == (["warehouse"] if engine.family == "spark" else ["file", "folder"])

    for i, report in enumerate(reports):
        way = report["way"]
        assert report["probe"] == "denied", f"{way}: the child could still write there ({how}): nothing was tested"
        connect, refused = EXPECTED[way]
        if connect:
            assert report["connect"].startswith("EngineError: ") and connect in report["connect"], report["connect"]
            assert "connect with read_only=True to only read" in report["connect"]
        else:
            assert "connect" not in report, report["connect"]
        marks = i + 1                                  # each way starts with ids 0..i of both producers
        assert report["reads"] == {"last_sequence_id": marks, "select": 2 * (marks + 1),
                                   "producer_state": [["p0", marks], ["p1", marks]]}
        for what, outcome in report["writes"].items():
            assert outcome.startswith("EngineError: ") and refused in outcome, f"{way}, {what}: {outcome}"
            assert FIX[way] in outcome, f"{way}, {what}: {outcome}"
        assert report["intact"], f"{way}: the data changed"
        assert report["retry_written"] == 2
        ids = [(p, s) for p, s in map(tuple, report["entries"])]
        assert sorted(ids) == sorted((f"p{p}", s) for s in range(marks + 2) for p in range(2))   # each once
        assert report["create_topic_after"] == "ok"
        with capsys.disabled():
            print(f"[{engine.name}] {way}: {report['writes']['a dedup INSERT'][:400]}")
