"""What a new user (or an attacker) meets around the statements, on every engine: each test is named after what it
checks. Policies that would brick a topic, ``recover`` on a wrong state, the SQL state functions, a producer past
int64, query output, Spark SQL file sources, DataFrames in and out, ingest's report and dropping a topic. (A
statement's own edge cases are in test_statement_edge_cases.py.)
"""
from __future__ import annotations

import pytest
import sqlglot

from seqdedup import InvalidEntryError, PolicyError, RewriteError, SeqdedupError, TopicError
from seqdedup.errors import ProducerError
from seqdedup.sql.functions import expand_state_functions

# --- SQL state functions read each row's producer --------------------------------------------------------------------


def test_sql_state_functions_read_the_producer_of_each_row(dedup):
    """A column named ``producer`` (or like any state column) is the caller's column, never the state's."""
    dedup.topic()
    dedup.send([("p", 3), ("q", 9)])
    dedup.session.sql("CREATE OR REPLACE TEMPORARY VIEW probes AS SELECT * FROM VALUES ('p', 3, 'p'), ('p', 4, 'q'), "
                      "('q', 1, 'p'), ('nobody', 0, 'x') AS t(producer, seq, sequence_id)")
    rows = dedup.session.sql(
        "SELECT producer, last_sequence_id('events', producer), dup_status('events', producer, seq), "
        "last_sequence_id('events', sequence_id) FROM probes ORDER BY producer, seq").rows
    assert rows == [("nobody", -1, "NOT_DUP", -1), ("p", 3, "DUP", 3), ("p", 3, "NOT_DUP", 9), ("q", 9, "DUP", 3)]


def test_sql_dup_status_with_a_column_argument_can_answer_unknown(dedup):
    """R6 for column arguments: an id an uncommitted statement claims is UNKNOWN, from a relation of the claims."""
    state = sqlglot.parse_one("SELECT * FROM VALUES ('p', 3) AS s(producer, sequence_id)", read="spark")
    query = sqlglot.parse_one("SELECT producer, seq, dup_status('t', producer, seq) FROM VALUES ('p', 2), ('p', 4), "
                              "('p', 6), ('q', 0), ('q', 1) AS probes(producer, seq) ORDER BY producer, seq",
                              read="spark")
    expanded = expand_state_functions(query, lambda topic: state.copy(), lambda topic: {"p": 5, "q": 0})
    assert dedup.session.adapter.fetchall(expanded) == [
        ("p", 2, "DUP"), ("p", 4, "UNKNOWN"), ("p", 6, "NOT_DUP"), ("q", 0, "UNKNOWN"), ("q", 1, "NOT_DUP")]


def test_sql_dup_status_refuses_what_is_no_sequence_id_like_the_python_api(dedup):
    dedup.topic()
    for sql, python in (("-1", -1), ("'5'", "5"), ("TRUE", True), ("2.5", 2.5)):
        with pytest.raises(InvalidEntryError, match="dup_status's sequence_id"):
            dedup.session.sql(f"SELECT dup_status('events', 'p', {sql})")
        with pytest.raises(InvalidEntryError, match="dup_status: sequence_id"):
            dedup.session.dup_status("events", "p", python)


def test_sql_dup_status_refuses_negative_and_non_integer_columns_when_it_runs(dedup):
    dedup.topic()
    dedup.session.sql("CREATE OR REPLACE TEMPORARY VIEW probes AS SELECT * FROM VALUES ('p', -2, 'five') AS t(p, s, text)")
    with pytest.raises(Exception, match="must be 0 or more"):
        dedup.session.sql("SELECT dup_status('events', p, s) FROM probes")
    with pytest.raises(Exception, match="must be an integer"):
        dedup.session.sql("SELECT dup_status('events', p, text) FROM probes")


# --- Query output: DESCRIBE, SHOW TABLES, deep nesting ---------------------------------------------------------------


def test_query_output_takes_column_names_from_the_engine(dedup):
    dedup.topic()
    dedup.send([("p", 1), ("p", 2)])
    everything = dedup.session.sql("SELECT * FROM events")
    assert everything.columns[:3] == ["payload", "_producer", "_sequence_id"]
    assert all(len(row) == len(everything.columns) for row in everything.rows) and len(everything.rows) == 2
    counted = dedup.session.sql("SELECT count(*), last_sequence_id('events', 'p') AS mark FROM events")
    assert counted.columns[0] != "*" and counted.columns[1] == "mark" and counted.rows == [(2, 2)]
    assert dedup.session.sql("SELECT last_sequence_id('events', 'p')").columns == ["last_sequence_id('events', 'p')"]


def test_describe_and_show_tables_return_their_rows(dedup):
    dedup.topic()
    described = dedup.session.sql("DESCRIBE events")
    assert described.columns and ("payload" in [row[0] for row in described.rows])
    shown = dedup.session.sql("SHOW TABLES")
    assert any("events" in row for row in shown.rows)


def test_four_hundred_nested_parentheses_are_one_clear_error(dedup):
    with pytest.raises(RewriteError, match="nests too deeply"):
        dedup.session.sql("SELECT " + "(" * 400 + "1" + ")" * 400)


# --- Policies that would brick a topic -------------------------------------------------------------------------------


def test_policies_that_brick_a_topic_are_refused_when_set(dedup):
    dedup.topic(snapshot_interval_entries=1)
    for policy, value in (("producer_inactivity_timeout", 10**10), ("producer_inactivity_timeout", 1_100_000_000),
                          ("max_producers_in_snapshot", 2**63), ("max_producers_in_snapshot", 2**31)):
        with pytest.raises(PolicyError, match=f"bad value '{value}' for policy {policy}: .* above the largest"):
            dedup.session.alter_topic("events", **{policy: value})
    with pytest.raises(PolicyError, match="for policy max_producers_in_snapshot"):
        dedup.session.sql("ALTER TABLE events SET TBLPROPERTIES ('seqdedup.max_producers_in_snapshot' = "
                          "'9223372036854775808')")
    assert dedup.session.topic("events").settings["topic"] == {"snapshot_interval_entries": "1"}
    assert dedup.send([("p", 1)]).written == 1


def test_never_expire_is_spelled_never_and_the_largest_values_work(dedup):
    dedup.topic(producer_inactivity_timeout="never", max_producers_in_snapshot=2**31 - 1, snapshot_interval_entries=1)
    assert dedup.session.topic("events").applied.producer_inactivity_timeout is None
    dedup.send([("p", 1)])
    dedup.clock.advance(days=365 * 500)
    dedup.send([("q", 1)])        # a purge would run here: "never" keeps p
    assert (dedup.last("p"), dedup.last("q")) == (1, 1)
    dedup.session.alter_topic("events", producer_inactivity_timeout=1000 * 365 * 24 * 60)    # 1000 years: the largest
    dedup.send([("q", 2)])
    assert dedup.last("p") == 1


def test_a_value_too_large_stored_by_an_older_seqdedup_reads_as_unlimited(dedup):
    """Topics bricked before the values were refused work again: such a value meant "never" (or "no cap")."""
    dedup.topic(snapshot_interval_entries=1)
    dedup.send([("p", 1)])
    dedup.session.set_global_policy(producer_inactivity_timeout=5)
    dedup.session.adapter.execute(     # what seqdedup 0.1 wrote for "-p producer_inactivity_timeout=99999999999"
        "INSERT INTO seqdedup_policies SELECT scope, target, key, '99999999999', version + 1, set_at "
        "FROM seqdedup_policies WHERE key = 'producer_inactivity_timeout'")
    dedup.restart()                # a process that opens the catalog as the older seqdedup left it
    dedup.clock.advance(days=365)
    assert dedup.send([("q", 1)]).written == 1
    assert dedup.last("p") == 1 and dedup.session.topic("events").applied.producer_inactivity_timeout is None


# --- A producer past the top of int64 --------------------------------------------------------------------------------


def test_producer_past_the_top_of_int64_is_refused_clearly_and_stays_usable(dedup):
    dedup.topic()
    with dedup.session.producer("events", name="p", initial_sequence_id=2**63 - 4, send_timeout=5) as producer:
        assert producer.send([("a",), ("b",)]).written == 2           # ids 2**63-3 and 2**63-2
        with pytest.raises(ProducerError, match="run out of automatic sequence ids.*1 left.*Nothing was sent"):
            producer.send([("c",), ("d",)])
        assert producer.pending == 0
        assert producer.send([("e",)]).positions[0] is not None     # the last id, 2**63-1, is still free
        with pytest.raises(ProducerError, match="0 left"):
            producer.send([("f",)])
    assert dedup.ids("p") == [2**63 - 3, 2**63 - 2, 2**63 - 1]


# --- DataFrames in and out -------------------------------------------------------------------------------------------


def _frames(kind: str, columns: dict, spark) -> tuple:
    """Two frames of the same rows: pandas and pyarrow, or two Spark DataFrames of ``spark``."""
    import pyarrow as pa

    table = pa.table(columns)
    if kind == "spark":
        frame = spark.createDataFrame(table.to_pandas())
        return frame, frame
    return table.to_pandas(), table


@pytest.mark.parametrize("kind", ["pandas_and_arrow", pytest.param("spark", marks=pytest.mark.spark)])
def test_dataframes_in_by_name_and_results_out(dedup, kind, tmp_path_factory):
    dedup.topic()
    from tests.engines import spark_session

    # A DuckDB session takes a Spark DataFrame too (read through Arrow); a Spark one takes its own session's frames.
    spark = getattr(dedup.session.adapter, "spark", None) or spark_session(
        str(tmp_path_factory.getbasetemp() / "spark-home"))
    frame, other = _frames(kind, {"producer": ["p", "p", "q"], "seq": [1, 1, 2], "payload": ["a", "b", "c"]}, spark)
    insert = "INSERT INTO events SELECT payload FROM {} WHERE is_not_dup(producer, seq) ORDER BY producer, payload"
    result = dedup.session.sql(insert.format("staging"), staging=frame)
    assert (result.written, result.duplicates) == (2, 1)
    assert result.to_pandas()[["producer", "written", "duplicates"]].values.tolist() == [["p", 1, 1], ["q", 1, 0]]
    with pytest.raises(SeqdedupError):
        dedup.session.sql("SELECT * FROM staging")        # registered for that statement only
    dedup.session.register("again", other)
    assert dedup.session.sql(insert.format("again")).duplicates == 3
    query = dedup.session.sql("SELECT _producer, _sequence_id, payload FROM events ORDER BY _producer")
    assert query.to_arrow().column_names == ["_producer", "_sequence_id", "payload"]
    assert query.to_pandas().values.tolist() == [["p", 1, "a"], ["q", 2, "c"]]
    with pytest.raises(TopicError, match="'events' is a topic"):
        dedup.session.register("events", frame)
    with pytest.raises(TopicError, match=r"'again' names a DataFrame .*session.unregister\('again'\)"):
        dedup.session.create_topic("again", {"payload": "STRING"})     # the other way round: it would hide the topic
    dedup.session.unregister("again")          # (a Spark session outlives the test: its views would too)
    with pytest.raises(SeqdedupError, match="again"):
        dedup.session.sql("SELECT * FROM again")
    if kind == "spark" and dedup.engine.name == "connect":     # a classic session's frame, in a process with both kinds
        classic = spark_session(str(tmp_path_factory.getbasetemp() / "spark-home")).createDataFrame(other.toPandas())
        with pytest.raises(TopicError, match="'mine' belongs to another SparkSession .a classic one.; create it with"):
            dedup.session.register("mine", classic)


def test_receipts_can_be_sliced(dedup):
    dedup.topic()
    with dedup.session.producer("events", name="p") as producer:
        receipts = producer.send([("a",), ("b",), ("c",)])
    assert [r.sequence_id for r in receipts[:2]] == [0, 1] and receipts[1:].written == 2


# --- Spark SQL file sources on every engine --------------------------------------------------------------------------


def test_spark_sql_file_sources_read_the_same_on_every_engine(dedup, tmp_path):
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"producer": "p", "seq": s, "payload": f"m{s}"} for s in [0, 1, 1, 2]]
    pq.write_table(pa.Table.from_pylist(rows[:2]), tmp_path / "a.parquet")
    pq.write_table(pa.Table.from_pylist(rows[2:]), tmp_path / "b.parquet")
    (tmp_path / "e.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "e.csv").write_text("producer,seq,payload\n" + "".join(f"p,{r['seq']},m{r['seq']}\n" for r in rows))
    dedup.topic()
    s = dedup.session
    result = s.sql(f"INSERT INTO events SELECT payload FROM parquet.`{tmp_path}/*.parquet` "
                   "WHERE is_not_dup(producer, seq)")
    assert (result.written, result.duplicates) == (3, 1)
    assert s.sql(f"SELECT producer, seq FROM json.`{tmp_path}/e.json` AS j WHERE j.seq > 0 ORDER BY seq").rows == [
        ("p", 1), ("p", 1), ("p", 2)]
    assert s.sql(f"SELECT _c0, _c1 FROM csv.`{tmp_path}/e.csv` ORDER BY _c1").rows == [      # no header: strings
        ("p", "0"), ("p", "1"), ("p", "1"), ("p", "2"), ("producer", "seq")]
    s.sql(f"CREATE OR REPLACE TEMPORARY VIEW v USING csv OPTIONS (path '{tmp_path}/e.csv', header 'true', "
          "inferSchema 'true')")
    assert s.sql("SELECT producer, seq, payload FROM v WHERE seq = 2").rows == [("p", 2, "m2")]


# --- recover names a wrong state and repairs it only when asked ------------------------------------------------------


def snapshot_by_hand(dedup, marks: dict[str, int]) -> None:
    """A complete snapshot written outside seqdedup (a restored backup, a bug) at the log's end."""
    import sqlglot.expressions as exp

    from seqdedup.catalog.state import literal, snapshot_insert

    position, commit = dedup.session.sql("SELECT max(_position), max(_commit) FROM events").rows[0]
    rows = exp.values([(literal(p), literal(m), literal(dedup.clock())) for p, m in marks.items()], alias="m",
                      columns=["producer", "sequence_id", "last_publish_time"])
    with dedup.session.adapter.parameters({"__sd_attempt": None}):      # rows without an attempt (one writer)
        dedup.session.adapter.execute(snapshot_insert(dedup.key(), exp.select("*").from_(rows), snapshot_id=1000,
                                                      position=position, kind="snapshot", now=dedup.clock(),
                                                      commit=commit))


def test_recover_that_blesses_a_wrong_state_names_the_producers_and_repairs_only_when_asked(dedup):
    from seqdedup.core.recovery import recover

    dedup.topic()
    dedup.send([("p", 1), ("q", 2)])
    snapshot_by_hand(dedup, {"p": 100, "q": 2})
    dedup.restart()                                 # a process that starts from the damaged catalog ...
    assert dedup.last("p") == 100                   # ... would drop new ids up to 100
    report = recover(dedup.session.broker, "events")
    assert not report.ok and report.matches_full_replay is False
    assert report.differences == [{"producer": "p", "state": 100, "log": 1}]
    assert "p (state 100, log 1)" in report.problems()
    assert dedup.last("p") == 100                   # nothing was written
    repaired = recover(dedup.session.broker, "events", repair=True)
    assert repaired.ok and repaired.repaired_snapshot_id is not None
    assert dedup.last("p") == 1 and dedup.send([("p", 2)]).written == 1
    assert recover(dedup.session.broker, "events").ok


def test_recover_finds_a_topic_row_duplicated_by_hand(dedup):
    from seqdedup.core.recovery import recover

    dedup.topic()
    dedup.send([("p", 1), ("p", 2)])
    dedup.session.adapter.execute("INSERT INTO events SELECT * FROM events WHERE _sequence_id = 1")
    report = recover(dedup.session.broker, "events", repair=True)
    assert not report.ok and report.matches_full_replay is True
    assert report.duplicate_ids == [{"producer": "p", "sequence_id": 1, "rows": 2}]
    assert "more than once" in report.problems() and report.new_snapshot_id is None


# --- ingest says what was written, from one file or several ----------------------------------------------------------


def test_ingest_says_exactly_what_was_written_before_a_bad_batch_and_one_commit_writes_nothing(dedup, tmp_path):
    import json

    from seqdedup.clients.ingest import ingest

    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"producer": "p", "seq": s, "payload": f"m{s}"}) + "\n"
                                              for s in (0, 1, 1)))
    (tmp_path / "b.jsonl").write_text(json.dumps({"producer": "q", "seq": -1, "payload": "bad"}) + "\n")
    dedup.topic()
    options = {"producer": "producer", "sequence_id": "seq"}
    with pytest.raises(InvalidEntryError, match="negative") as refused:
        ingest(dedup.session, "events", [str(tmp_path / "b.jsonl"), str(tmp_path / "a.jsonl")], one_commit=True,
               **options)
    assert "Nothing was written" in str(refused.value) and dedup.entries() == []
    with pytest.raises(InvalidEntryError) as stopped:
        ingest(dedup.session, "events", str(tmp_path / "*.jsonl"), batch_rows=3, **options)
    said = str(stopped.value)
    assert "Nothing was written" not in said and "stopped at statement 2 of 2, input rows 4 to 4" in said
    assert "(input rows 1 to 3) are committed: 2 entries written, 1 dropped as duplicates" in said
    assert dedup.ids("p") == [0, 1]


# --- topic drop ------------------------------------------------------------------------------------------------------


def test_topic_drop_removes_the_table_registry_and_catalog_rows(dedup):
    dedup.topic(snapshot_interval_entries=1)
    dedup.topic("kept")
    dedup.send([("p", 1), ("p", 2)])
    dedup.send([("p", 1)], topic="kept")
    dropped = dedup.session.drop_topic("events")
    assert dropped["entries"] == 2 and dropped["catalog_rows"]["producer_sequences"] > 0
    assert dedup.session.topics() == [dedup.key("kept")]
    counts = dedup.session.sql(
        f"SELECT (SELECT count(*) FROM producer_sequences WHERE topic = '{dedup.key()}'), "
        f"(SELECT count(*) FROM seqdedup_policies WHERE target = '{dedup.key()}'), "
        f"(SELECT count(*) FROM seqdedup_statements WHERE topic = '{dedup.key()}')").rows
    assert counts == [(0, 0, 0)]
    with pytest.raises(TopicError, match="unknown topic"):
        dedup.session.drop_topic("events")
    dedup.topic()                                                # the name is free again: a new, empty topic
    assert dedup.send([("p", 1)]).written == 1 and dedup.entries() == [("p", 1, 1)]
    assert dedup.ids("p", topic="kept") == [1] and dedup.last("p", topic="kept") == 1
