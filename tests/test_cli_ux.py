"""The command line's edge cases, checked the way a user meets them: the command run in process on a DuckDB file,
its output, its exit status and its one-line errors. (What the commands do on each engine is in
tests/behaviour/test_user_facing_edge_cases.py.)"""
from __future__ import annotations

import io
import json

import pytest

from seqdedup.cli import main


@pytest.fixture
def run(tmp_path, monkeypatch, capsys):
    """``run("topic", "list")``: (exit status, stdout, stderr) of one command in ``tmp_path``."""
    monkeypatch.chdir(tmp_path)

    def run(*args: str, stdin: bytes | None = None):
        if stdin is not None:
            monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        try:
            status = main(list(args))
        except SystemExit as exit_:        # argparse: --version, usage errors
            status = exit_.code
        out, err = capsys.readouterr()
        return status, out, err

    return run


def one_line_error(result, *words: str) -> None:
    status, _, err = result
    assert status == 1 and err.startswith("seqdedup: error: ") and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and all(word in err for word in words), err


def lines(rows: list[dict]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def events(run, *entries: tuple[str, int]) -> None:
    run("topic", "create", "events", "-c", "payload:STRING")
    rows = ", ".join(f"('{p}', {s}, '{p}/{s}')" for p, s in entries)
    assert run("sql", f"CREATE TEMPORARY VIEW staging AS SELECT * FROM VALUES {rows} AS t(producer, seq, payload); "
                      "INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq)")[0] == 0


def test_query_output_names_the_columns_the_engine_gives(run):
    events(run, ("p", 1), ("p", 2))
    status, out, _ = run("sql", "SELECT * FROM events ORDER BY _position")
    header = out.splitlines()[0].split()
    assert status == 0 and header[:3] == ["payload", "_producer", "_sequence_id"] and "*" not in header
    shown = json.loads(run("sql", "SELECT * FROM events", "--json")[1])
    assert len(shown["columns"]) == len(shown["rows"][0]) == 7
    counted = json.loads(run("sql", "SELECT count(*) FROM events", "--json")[1])
    assert counted["columns"] != ["*"] and counted["rows"] == [[2]]


def test_policies_that_brick_a_topic_are_one_clear_error(run):
    run("topic", "create", "events", "-c", "payload:STRING")
    one_line_error(run("topic", "alter", "events", "-p", "producer_inactivity_timeout=99999999999"),
                   "producer_inactivity_timeout", "never")
    one_line_error(run("topic", "alter", "events", "-p", "max_producers_in_snapshot=9223372036854775808"),
                   "max_producers_in_snapshot")
    status, out, _ = run("topic", "alter", "events", "-p", "producer_inactivity_timeout=never")
    assert status == 0 and "producer_inactivity_timeout = never  (topic)" in out
    assert run("sql", "SELECT last_sequence_id('events', 'p')")[0] == 0


def by_hand(tmp_path, *statements: str) -> None:
    """Change the database outside seqdedup, as a user with the duckdb command line would."""
    import duckdb

    with duckdb.connect(str(tmp_path / "seqdedup.duckdb")) as connection:
        for statement in statements:
            connection.execute(statement)


def test_recover_that_blesses_a_wrong_state_exits_nonzero_and_repairs_when_asked(run, tmp_path):
    events(run, ("p", 1), ("q", 2))
    by_hand(tmp_path, "INSERT INTO producer_sequences SELECT topic, 1000, (SELECT max(_position) FROM events), who, "
                      "CASE who WHEN 'p' THEN 100 ELSE 2 END, taken_at, NULL, 'snapshot', taken_at, commit_id, NULL, NULL, NULL "
                      "FROM producer_sequences, (VALUES ('p'), ('q'), (NULL)) AS m(who) WHERE snapshot_id = 1",
            "UPDATE producer_sequences SET producers = 2 WHERE snapshot_id = 1000 AND producer IS NULL")
    assert json.loads(run("state", "events", "--json")[1])["rows"][0][:2] == ["p", 100]
    status, out, err = run("recover", "events")
    one_line_error((status, out, err), "p (state 100, log 1)", "--repair")
    assert "DIFFERS" in out and "  p: state 100, log 1" in out
    assert json.loads(run("state", "events", "--json")[1])["rows"][0][:2] == ["p", 100]     # nothing written
    status, out, _ = run("recover", "events", "--repair")
    assert status == 0 and "repaired: snapshot 1001 holds the replayed marks" in out
    assert json.loads(run("state", "events", "--json")[1])["rows"][0][:2] == ["p", 1]
    assert run("recover", "events")[0] == 0
    by_hand(tmp_path, "INSERT INTO events SELECT * FROM events WHERE _sequence_id = 1")
    one_line_error(run("recover", "events", "--repair"), "more than once", "p id 1 (2 rows)")


def test_ingest_says_exactly_what_was_written_and_one_commit_writes_all_or_nothing(run, tmp_path):
    run("topic", "create", "events", "-c", "payload:STRING")
    (tmp_path / "a.jsonl").write_bytes(lines([{"producer": "p", "seq": s, "payload": "x"} for s in (0, 1)]))
    (tmp_path / "b.jsonl").write_bytes(lines([{"producer": "p", "seq": -5, "payload": "x"}]))
    keys = ["--producer-column", "producer", "--sequence-column", "seq"]
    one_line_error(run("ingest", "events", "a.jsonl", "b.jsonl", "--one-commit", *keys), "Nothing was written")
    assert json.loads(run("stats", "events", "--json")[1])["entries"] == 0
    one_line_error(run("ingest", "events", "a.jsonl", "b.jsonl", "--batch-rows", "2", *keys),
                   "are committed: 2 entries written, 0 dropped as duplicates", "--one-commit")
    assert "Nothing was written" not in run("ingest", "events", "a.jsonl", "b.jsonl", "--batch-rows", "2", *keys)[2]


def test_the_cli_a_user_reaches_for(run, tmp_path):
    status, out, _ = run("--version")
    assert status == 0 and out.startswith("seqdedup ")
    assert run("topic", "list")[1].startswith("no topics yet")
    run("topic", "create", "events", "-c", "payload:STRING")
    assert "main.events  enabled" in run("topic", "list")[1]
    keys = ["--producer-column", "producer", "--sequence-column", "seq"]
    for name, seqs in (("a1.jsonl", (0, 1)), ("a2.jsonl", (1, 2)), ("b.jsonl", (3,))):
        (tmp_path / name).write_bytes(lines([{"producer": "p", "seq": s, "payload": name} for s in seqs]))
    assert json.loads(run("ingest", "events", "a*.jsonl", "--json", *keys)[1])["written"] == 3      # a glob
    assert json.loads(run("ingest", "events", "a1.jsonl", "b.jsonl", "--json", *keys)[1])["written"] == 1
    from_stdin = json.loads(run("ingest", "events", "-", "--json", *keys, stdin=lines(
        [{"producer": "q", "seq": 7, "payload": "piped"}]))[1])
    assert (from_stdin["rows"], from_stdin["written"]) == (1, 1)
    described = run("sql", "DESCRIBE events")[1]
    assert "payload" in described and "_sequence_id" in described
    assert "events" in run("sql", "SHOW TABLES")[1].split()
    one_line_error(run("sql", "SELECT " + "(" * 400 + "1" + ")" * 400), "nests too deeply")
    for bad in ("-1", "'5'", "TRUE", "2.5"):
        one_line_error(run("sql", f"SELECT dup_status('events', 'p', {bad})"), "dup_status's sequence_id")
    one_line_error(run("topic", "drop", "events"), "--yes")
    assert "main.events" in run("topic", "list")[1]
    status, out, _ = run("topic", "drop", "events", "--yes")
    assert status == 0 and "dropped topic main.events (5 entries" in out
    assert run("topic", "list")[1].startswith("no topics yet")
    one_line_error(run("topic", "drop", "events", "--yes"), "unknown topic main.events")


def test_ingest_refuses_a_header_whose_names_differ_only_in_case(run, tmp_path):
    run("topic", "create", "events", "-c", "payload:STRING")
    (tmp_path / "in.csv").write_text("Producer,producer,seq,payload\nA,b,0,x\nA,b,1,y\n")
    one_line_error(run("ingest", "events", "in.csv", "--producer-column", "producer", "--sequence-column", "seq"),
                   "in.csv has columns whose names are the same whatever their case ('Producer' and 'producer')",
                   "Rename one of each in the file", "Nothing was written")
    assert json.loads(run("stats", "events", "--json")[1])["entries"] == 0


def test_a_policy_row_written_by_hand_is_one_clear_error_and_topic_alter_sets_it_right(run, tmp_path):
    events(run, ("p", 1))
    by_hand(tmp_path, "INSERT INTO seqdedup_policies VALUES ('global', '', 'snapshot_interval_entries', 'abc', 1000, "
                      "TIMESTAMP '2026-01-01 12:00:00')")
    row = "the global policy snapshot_interval_entries = 'abc' (a row of seqdedup_policies: scope 'global', target ''"
    for command in (["topic", "list"], ["topic", "show", "events"], ["recover", "events"]):
        one_line_error(run(*command), row, 'seqdedup sql "SET seqdedup.snapshot_interval_entries = VALUE"',
                       "seqdedup topic alter main.events -p snapshot_interval_entries=VALUE")
    status, out, _ = run("topic", "alter", "events", "-p", "snapshot_interval_entries=5")
    assert status == 0 and "snapshot_interval_entries = 5  (topic)" in out
    assert run("recover", "events")[0] == 0
    assert run("sql", "SET seqdedup.snapshot_interval_entries = 9")[0] == 0
    status, out, _ = run("topic", "alter", "events", "-p", "snapshot_interval_entries=")
    assert status == 0 and "snapshot_interval_entries = 9  (global)" in out
    assert "main.events  enabled" in run("topic", "list")[1]


def test_recover_explains_a_state_whose_snapshots_were_deleted_and_repair_rebuilds_it(run, tmp_path):
    events(run, ("p", 0), ("p", 1), ("q", 5))
    by_hand(tmp_path, "DELETE FROM producer_sequences")
    status, out, err = run("recover", "events")
    one_line_error((status, out, err), "main.events has no complete snapshot in producer_sequences",
                   "nothing was written; run `seqdedup recover events --repair` to rebuild the state")
    assert "no complete snapshot, so no state to recover; 3 entries in the log" in out
    status, out, _ = run("recover", "events", "--repair")
    assert status == 0 and "rebuilt: snapshot 1 holds the marks of a replay of the whole log" in out
    assert [row[:2] for row in json.loads(run("state", "events", "--json")[1])["rows"]] == [["p", 1], ["q", 5]]
    status, out, _ = run("recover", "events")
    assert status == 0 and "checked against a replay of the whole log: matches" in out


@pytest.mark.parametrize("args, message", [
    (("ingest", "events", "e.jsonl", "--producer-column", "producer", "--sequence-column", "seq", "--batch-rows", "0"),
     "argument --batch-rows: 1 or more, not 0"),
    (("dropped", "events", "--limit", "-1"), "argument --limit: 0 or more, not -1"),
    (("report", "events", "--commits", "0"), "argument --commits: 1 or more, not 0"),
    (("compact", "events", "--factor", "1"), "argument --factor: 2 or more, not 1"),
    (("demo", "--producers", "0"), "argument --producers: 1 or more, not 0"),
    (("demo", "--messages", "-5"), "argument --messages: 1 or more, not -5"),
    (("connect-server", "--port", "70000"), "argument --port: 0 to 65535, not 70000"),
    (("report", "events", "--commits", "ten"), "argument --commits: a whole number, not 'ten'"),
])
def test_a_number_out_of_range_is_refused_naming_its_option_and_nothing_runs(run, tmp_path, args, message):
    """(``--batch-rows 0`` was taken for the default and wrote; ``--limit -1`` was DuckDB's binder error.)"""
    (tmp_path / "e.jsonl").write_text('{"producer": "a", "seq": 1, "payload": "x"}\n')
    status, out, err = run(*args)
    assert status == 2 and message in err and not out, err
    assert not list(tmp_path.glob("*.duckdb")), "the command opened a database"
