"""The command line, run as users run it: a separate process per command, on a real database file."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest


def seqdedup(*args: str, cwd, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "seqdedup", *args], cwd=cwd, capture_output=True, text=True,
                            timeout=900)
    if check and result.returncode != 0:
        raise AssertionError(f"seqdedup {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def test_topic_sql_state_stats_snapshot_recover(tmp_path):
    seqdedup("init", cwd=tmp_path)
    assert (tmp_path / "seqdedup.duckdb").exists()
    seqdedup("topic", "create", "events", "-c", "payload:STRING", "-p", "snapshot_interval_entries=2", cwd=tmp_path)
    shown = json.loads(seqdedup("topic", "show", "events", "--json", cwd=tmp_path).stdout)
    assert shown["applied"]["snapshot_interval_entries"] == 2 and shown["settings"]["topic"] == {
        "snapshot_interval_entries": "2"}
    statements = tmp_path / "load.sql"
    statements.write_text(
        "CREATE TEMPORARY VIEW staging AS SELECT * FROM VALUES ('p1', 0, 'a'), ('p1', 0, 'a'), ('p1', 1, 'b'), "
        "('p2', 7, 'c') AS t(producer, seq, payload);\n"
        "INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq);\n")
    out = json.loads(seqdedup("sql", "--file", str(statements), "--json", cwd=tmp_path).stdout)
    assert (out[-1]["written"], out[-1]["duplicates"]) == (3, 1)
    # a new process sees the same state
    state = json.loads(seqdedup("state", "events", "--json", cwd=tmp_path).stdout)
    assert [row[:2] for row in state["rows"]] == [["p1", 1], ["p2", 7]]
    again = json.loads(seqdedup("sql", "--file", str(statements), "--json", cwd=tmp_path).stdout)
    assert (again[-1]["written"], again[-1]["duplicates"]) == (0, 4)
    stats = json.loads(seqdedup("stats", "events", "--json", cwd=tmp_path).stdout)
    assert (stats["entries"], stats["written"], stats["duplicates"]) == (3, 3, 5)
    recovered = json.loads(seqdedup("recover", "events", "--json", cwd=tmp_path).stdout)
    assert recovered["matches_full_replay"] is True and recovered["producers"] == 2
    seqdedup("sql", "SELECT last_sequence_id('events', 'p1') AS p1", cwd=tmp_path)
    query = json.loads(seqdedup("sql", "SELECT last_sequence_id('events', 'p1') AS p1", "--json", cwd=tmp_path).stdout)
    assert query["rows"] == [[1]]            # one statement: one object
    # DuckDB keeps a topic in one table: a compaction has nothing to merge, and says so
    assert "nothing to merge" in seqdedup("compact", "events", cwd=tmp_path).stdout
    assert json.loads(seqdedup("compact", "events", "--json", cwd=tmp_path).stdout)["merged"] == []


def test_dropped_lists_the_ledger_narrowed_by_producer_reason_and_time(tmp_path):
    seqdedup("topic", "create", "events", "-c", "payload:STRING", "-p", "dropped_entries=keys", cwd=tmp_path)
    rows = tmp_path / "in.jsonl"
    rows.write_text("".join(json.dumps({"p": p, "s": s, "payload": "x"}) + "\n"
                            for p, s in [("a", 1), ("a", 1), ("b", 2), ("a", 3), ("a", 2)]))
    seqdedup("ingest", "events", str(rows), "--producer-column", "p", "--sequence-column", "s", "--no-progress",
             cwd=tmp_path)
    seqdedup("ingest", "events", str(rows), "--producer-column", "p", "--sequence-column", "s", "--no-progress",
             cwd=tmp_path)        # again: every entry a retry
    every = json.loads(seqdedup("dropped", "events", "--json", cwd=tmp_path).stdout)
    column = every["columns"].index
    assert sorted((r[column("producer")], r[column("sequence_id")], r[column("reason")]) for r in every["rows"]) == \
        sorted([("a", 1, "repeat"), ("a", 2, "late")]      # (ingest sends in input order: 2 came after 3)
               + [(p, s, "retry") for p, s in [("a", 1), ("a", 1), ("b", 2), ("a", 3), ("a", 2)]])
    narrowed = json.loads(seqdedup("dropped", "events", "--producer", "a", "--reason", "repeat", "--json",
                                   cwd=tmp_path).stdout)
    assert [(r[column("sequence_id")], r[column("commit_id")]) for r in narrowed["rows"]] == [(1, 2)]
    assert "no dropped entry" in seqdedup("dropped", "events", "--since", "2999-01-01", cwd=tmp_path).stdout
    bad = seqdedup("dropped", "events", "--since", "yesterday", cwd=tmp_path, check=False)
    assert bad.returncode == 1 and "--since 'yesterday' is not a date or time" in bad.stderr


def test_a_topic_of_composite_ids_from_the_command_line(tmp_path):
    seqdedup("topic", "create", "cdc", "-c", "payload:STRING", "--id-parts", "2", cwd=tmp_path)
    seqdedup("sql", "INSERT INTO cdc SELECT payload FROM VALUES ('slot', 9, 0, 'a'), ('slot', 9, 1, 'b'), "
             "('slot', 9, 0, 'a') AS t(src, lsn, idx, payload) WHERE is_not_dup(src, (lsn, idx))", cwd=tmp_path)
    assert json.loads(seqdedup("topic", "show", "cdc", "--json", cwd=tmp_path).stdout)["id_parts"] == 2
    assert json.loads(seqdedup("state", "cdc", "--json", cwd=tmp_path).stdout)["rows"][0][:2] == ["slot", [9, 1]]
    refused = seqdedup("sql", "ALTER TABLE cdc SET TBLPROPERTIES ('seqdedup.id_parts' = '3')", cwd=tmp_path,
                       check=False)
    assert refused.returncode == 1 and "fixed when it is created" in refused.stderr


def test_ingest_files_of_every_format(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"producer": "p", "seq": s, "payload": f"m{s}"} for s in [0, 1, 1, 2, 0, 3]]
    (tmp_path / "in.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "in.csv").write_text("producer,seq,payload\n" + "".join(f"{r['producer']},{r['seq']},{r['payload']}\n" for r in rows))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "in.parquet")
    seqdedup("topic", "create", "events", "-c", "payload:STRING", cwd=tmp_path)
    for name, written in (("in.jsonl", 4), ("in.csv", 0), ("in.parquet", 0)):
        out = json.loads(seqdedup("ingest", "events", name, "--producer-column", "producer", "--sequence-column",
                                  "seq", "--batch-rows", "4", "--json", cwd=tmp_path).stdout)
        assert (out["rows"], out["written"], out["statements"]) == (6, written, 2)


def test_foreign_rows_are_reported_and_moved_aside(tmp_path):
    import duckdb

    seqdedup("sql", "CREATE TABLE events (payload STRING) TBLPROPERTIES ('seqdedup.deduplication_enabled' = 'true'); "
             "CREATE TEMPORARY VIEW s AS SELECT * FROM VALUES ('p', 1, 'a') AS t(producer, seq, payload); "
             "INSERT INTO events SELECT payload FROM s WHERE is_not_dup(producer, seq)", cwd=tmp_path)
    # another tool inserts into the topic, made as topics were before their system columns were NOT NULL
    with duckdb.connect(str(tmp_path / "seqdedup.duckdb")) as other:
        for column in ("_producer", "_sequence_id", "_highest_sequence_id", "_position", "_publish_time", "_commit"):
            other.execute(f"ALTER TABLE events ALTER COLUMN {column} DROP NOT NULL")
        other.execute("INSERT INTO events (payload) VALUES ('stray')")
    stats = seqdedup("stats", "events", cwd=tmp_path).stdout
    assert "entries:       1 (" in stats and "foreign rows:  1 (" in stats
    assert "main.events holds 1 row seqdedup did not write" in stats and "`seqdedup topic quarantine main.events`" in stats
    recovered = json.loads(seqdedup("recover", "events", "--json", cwd=tmp_path).stdout)
    assert recovered["ok"] and recovered["foreign_rows"] == 1
    moved = seqdedup("topic", "quarantine", "events", cwd=tmp_path).stdout
    assert moved.strip() == "moved 1 row seqdedup did not write from main.events into main.events_foreign"
    assert json.loads(seqdedup("stats", "events", "--json", cwd=tmp_path).stdout)["foreign_rows"] == 0
    rows = json.loads(seqdedup("sql", "SELECT payload, _move FROM events_foreign", "--json", cwd=tmp_path).stdout)
    assert rows["rows"] == [["stray", 1]]
    again = seqdedup("topic", "quarantine", "events", cwd=tmp_path).stdout
    assert again.strip() == "main.events holds no rows seqdedup did not write: nothing moved"


@pytest.mark.parametrize("args, message", [
    (["state", "nowhere"], "unknown topic main.nowhere"),
    (["topic", "quarantine", "nowhere"], "unknown topic main.nowhere"),
    (["sql", "INSERT INTO t SELECT a FROM s WHERE is_not_dup(a, b) OR b > 1"], "not inside OR"),
    (["topic", "create", "t", "-c", "payload"], "name:TYPE"),
    (["ingest", "t", "missing.csv", "--producer-column", "p", "--sequence-column", "s"], "no file missing.csv"),
])
def test_errors_are_one_clear_line_and_a_nonzero_exit(tmp_path, args, message):
    result = seqdedup(*args, cwd=tmp_path, check=False)
    assert result.returncode == 1
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_demo_reports_every_message_landed_once(tmp_path):
    result = seqdedup("demo", "--messages", "150", "--producers", "3", cwd=tmp_path)
    assert "OK: every message landed exactly once" in result.stdout
    assert "0 missing, 0 written twice" in result.stdout


@pytest.mark.spark
def test_demo_runs_on_spark(tmp_path):
    """The main job on Spark: a local session with its own Hive catalog in the working folder, Hive's folder for
    downloaded resources there too (not one more empty folder in /tmp per process). The folder's name has a space, a
    quote and a '%' (Spark's launcher splits the driver's options as a shell would, and a URI must encode them)."""
    folder = tmp_path / "a user's 100% folder"
    folder.mkdir()
    result = seqdedup("demo", "--engine", "spark", "--messages", "30", "--producers", "2", cwd=folder)
    assert "OK: every message landed exactly once" in result.stdout
    assert {"metastore_db", "hive-resources", "derby.log"} <= {p.name for p in (folder / "seqdedup-spark").iterdir()}
