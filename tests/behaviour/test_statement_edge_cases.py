"""A statement's edge cases, as an attacker or a new user meets them: non-deterministic arguments, collations,
seqdedup's own column names in a source, writes around ``is_not_dup``, re-creating a topic, NULL ordering, the
producer cap, out-of-order entries, a typo in a column and the result read as a list. Each test is named after what
it checks and runs on every engine. (One writer lock per database is tests/concurrency/test_lock_identity.py; what
else a user meets is in test_user_facing_edge_cases.py.)"""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from seqdedup import EngineError, RewriteError, TopicError


#: How each engine spells a case-insensitive text column: data, not a branch in the test.
CASE_INSENSITIVE = {"duckdb": "producer COLLATE NOCASE", "spark": "producer COLLATE UTF8_LCASE"}


def topic_keys(dedup, topic: str = "events") -> list[tuple]:
    return [tuple(r) for r in dedup.session.sql(
        f"SELECT _producer, _sequence_id, _position FROM {topic} ORDER BY _position").rows]


# --- Non-deterministic arguments -------------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["rand-producer", "sampled-subquery", "rand-producers-semi-join"])
def test_non_deterministic_arguments_never_write_an_id_twice_nor_report_an_absent_entry(dedup, how):
    """A SELECT that gives other rows when read again either runs from one reading (one pass) or is refused: no id
    at two positions, no entry reported written that the topic lacks."""
    dedup.topic()
    dedup.stage([("p", s) for s in range(200)])
    statement = {
        "rand-producer": "INSERT INTO events SELECT payload FROM staging "
                         "WHERE is_not_dup(IF(rand() < 0.5, 'w1', 'w2'), seq)",
        "sampled-subquery": "INSERT INTO events SELECT payload FROM (SELECT * FROM staging WHERE rand() < 0.5) "
                            "WHERE is_not_dup(producer, seq)",
        # the state joined by the producers a first read carried (as for a large state): the second read's differ
        "rand-producers-semi-join": "INSERT INTO events SELECT payload FROM staging "
                                    "WHERE is_not_dup('w' || CAST(floor(rand() * 1000) AS STRING), seq)",
    }[how]
    if how.endswith("semi-join"):
        dedup.session.adapter.SEMI_JOIN_ABOVE = 0
    for _ in range(3):             # a retry of the same statement, too
        before = topic_keys(dedup)
        try:
            result = dedup.session.sql(statement)
        except EngineError as error:
            assert "gave other entries when read a second time" in str(error)
            assert topic_keys(dedup) == before           # refused: nothing written
            continue
        rows = topic_keys(dedup)
        assert len(rows) == len(before) + result.written
        assert len({(p, s) for p, s, _ in rows}) == len(rows), "an id was written twice"
        assert dedup.position_problem() is None
        written = {(p, s) for p, s, _ in rows} - {(p, s) for p, s, _ in before}
        assert {c.producer: c.written for c in result.producers if c.written} == {
            p: sum(1 for q, _ in written if q == p) for p in {q for q, _ in written}}


# --- Collations ------------------------------------------------------------------------------------------------------

def test_collations_producer_names_compare_byte_for_byte(dedup, engine):
    """A staging column declared case-insensitive must not make CaseP and casep one producer."""
    dedup.topic()
    dedup.stage([("CaseP", 1), ("casep", 1), ("CASEP", 2)])
    dedup.session.adapter.execute(f"CREATE OR REPLACE TEMPORARY VIEW folded AS SELECT {CASE_INSENSITIVE[engine.family]} "
                                  "AS producer, seq, payload FROM staging")
    result = dedup.session.sql("INSERT INTO events SELECT payload FROM folded WHERE is_not_dup(producer, seq)")
    assert (result.written, result.duplicates) == (3, 0)
    assert sorted((p, s) for p, s, _ in topic_keys(dedup)) == [("CASEP", 2), ("CaseP", 1), ("casep", 1)]
    assert [dedup.last(p) for p in ("CaseP", "casep", "CASEP")] == [1, 1, 2]


# --- Source columns named like seqdedup's own ------------------------------------------------------------------------

def test_internal_names_a_source_column_named_like_seqdedups_own_is_refused(dedup, tmp_path):
    dedup.topic()
    dedup.stage([("p", 1)])
    dedup.session.sql("CREATE OR REPLACE TEMPORARY VIEW odd AS SELECT payload, producer AS __sd_producer, seq "
                      "FROM staging")
    with pytest.raises(RewriteError, match="'__sd_producer'.*names starting with __sd_ are seqdedup's own"):
        dedup.session.sql("INSERT INTO events SELECT * FROM (SELECT payload, __sd_producer FROM odd) "
                          "WHERE is_not_dup(__sd_producer, 1)")
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"producer": "p", "seq": s, "payload": "x", "__sd_row": 7}) + "\n"
                            for s in range(3)))
    from seqdedup.clients.ingest import ingest

    with pytest.raises(TopicError, match="named like seqdedup's own.*__sd_row"):
        ingest(dedup.session, "events", [str(path)], producer="producer", sequence_id="seq")
    assert topic_keys(dedup) == []


# --- Topics written around is_not_dup --------------------------------------------------------------------------------

@pytest.mark.parametrize("statement", [
    "INSERT INTO `Events` SELECT 'x', 'p', 1, 1, 1, current_timestamp(), 1",
    "INSERT INTO events (payload) VALUES ('x')",
    "UPDATE events SET payload = 'y'",
    "DELETE FROM events WHERE _sequence_id = 1",
    "DROP TABLE events",
    "TRUNCATE TABLE events",
    "UPDATE producer_sequences SET sequence_id = 100",
    "DELETE FROM seqdedup_statements",
], ids=["insert-other-case", "insert-columns", "update", "delete", "drop", "truncate", "update-marks",
        "delete-run-log"])
def test_topics_written_around_is_not_dup_are_refused(dedup, statement):
    dedup.topic()
    dedup.send([("p", 1)])
    before = (topic_keys(dedup), dedup.snapshot_rows(), dedup.session.producer_state("events").rows)
    with pytest.raises(RewriteError, match="is refused|must filter with WHERE is_not_dup"):
        dedup.session.sql(statement)
    dedup.restart()
    assert (topic_keys(dedup), dedup.snapshot_rows(), dedup.session.producer_state("events").rows) == before


# --- Re-creating a topic ---------------------------------------------------------------------------------------------

def test_recreating_a_topic_says_it_exists_and_if_not_exists_changes_nothing(dedup, monkeypatch):
    s = dedup.session
    dedup.topic(snapshot_interval_entries=5)
    for again in (lambda: s.create_topic("events", {"payload": "STRING"}, deduplication_enabled=False),
                  lambda: s.sql("CREATE TABLE events (payload STRING) "
                                "TBLPROPERTIES ('seqdedup.deduplication_enabled' = 'false')")):
        with pytest.raises(TopicError, match="already exists"):
            again()
    s.sql("CREATE TABLE IF NOT EXISTS events (payload STRING) "
          "TBLPROPERTIES ('seqdedup.deduplication_enabled' = 'false')")
    s.create_topic("events", {"other": "BIGINT"}, if_not_exists=True, snapshot_interval_entries=9)
    topic = s.topic("events")
    assert topic.applied.deduplication_enabled is True and topic.applied.snapshot_interval_entries == 5
    assert [c for c, _ in topic.user_columns] == ["payload"]
    assert s.sql("SELECT count(*) FROM seqdedup_topics").rows == [(1,)]
    dedup.send([("p", 1)])
    assert dedup.send([("p", 1)]).written == 0          # still deduplicating
    # another driver created it, and wrote to it, after this create read the registry: the topic, not a table clash
    read, stale = s.catalog.creation, iter([True])
    monkeypatch.setattr(s.catalog, "creation",
                        lambda ref: replace(read(ref), registered=False) if next(stale, False) else read(ref))
    assert s.create_topic("events", {"payload": "STRING"}, if_not_exists=True).applied.snapshot_interval_entries == 5
    assert s.sql("SELECT count(*) FROM seqdedup_topics").rows == [(1,)]


def test_a_topic_table_another_driver_left_unregistered_is_taken_over_after_the_wait(dedup, monkeypatch):
    """create_topic's CREATE TABLE meets another driver's (it exists already), and that driver's registry row never
    comes (it died between the two): after the wait, the next try takes the table over, as a create after an
    interrupted one does (it raised 'unknown topic' before)."""
    from seqdedup import failpoints

    monkeypatch.setattr(dedup.session, "TOPIC_WAIT_SECONDS", 0.2)
    failpoints.inject("after_topic_table", EngineError("AlreadyExistsException(message:Table events already exists)"))
    assert dedup.session.create_topic("events", {"payload": "STRING"}).ref.key == dedup.key()
    assert dedup.send([("p", 1), ("p", 1)]).written == 1
    assert dedup.session.sql("SELECT count(*) FROM seqdedup_topics").rows == [(1,)]


# --- NULL ordering ---------------------------------------------------------------------------------------------------

def test_null_ordering_is_the_same_on_every_engine(dedup, tmp_path):
    """ingest --order-by a column with NULLs, and the same ORDER BY in SQL: NULLs first (as Spark SQL orders
    ascending), so one statement means one thing on every engine."""
    from seqdedup.clients.ingest import ingest

    dedup.topic()
    rows = [{"producer": "p", "seq": 1, "sent": None, "payload": "a"},
            {"producer": "p", "seq": 3, "sent": 1, "payload": "b"},
            {"producer": "p", "seq": 2, "sent": 2, "payload": "c"}]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.warns(UserWarning, match="came after a higher sequence id"):
        done = ingest(dedup.session, "events", [str(path)], producer="producer", sequence_id="seq", order_by="sent")
    assert dedup.ids("p") == [1, 3] and (done["written"], done["out_of_order"]) == (2, 1)
    dedup.topic("again")
    dedup.session.sql("CREATE OR REPLACE TEMPORARY VIEW sent AS SELECT * FROM VALUES ('p', 1, NULL), ('p', 3, 1), "
                      "('p', 2, 2) AS t(producer, seq, sent)")
    dedup.session.sql("INSERT INTO again SELECT 'x' FROM sent WHERE is_not_dup(producer, seq) ORDER BY sent")
    assert dedup.ids("p", "again") == [1, 3]


# --- The producer cap ------------------------------------------------------------------------------------------------

def test_the_producer_cap_keeps_a_left_out_producer_until_a_restart(dedup):
    """max_producers_in_snapshot leaves p out of the snapshot (q wrote last); p's retry is still a duplicate until
    the process restarts, as in Pulsar, where the map in memory keeps every producer (R12)."""
    dedup.topic(snapshot_interval_entries=1, max_producers_in_snapshot=1)
    dedup.send([("p", 0)])
    dedup.clock.advance(seconds=1)
    dedup.send([("q", 0)])                                # the snapshot after it holds q alone
    assert [p for _, _, p, _, _ in dedup.snapshot_rows() if p is not None][-1:] == ["q"]
    assert dedup.send([("p", 0)]).duplicates == 1         # kept in memory: not written twice
    assert dedup.last("p") == 0
    dedup.restart()                                       # p was left out and its entry is before the snapshot:
    assert dedup.last("p") == -1                          # recovery forgets it (documented, R12)


# --- Out-of-order entries are not repeats ----------------------------------------------------------------------------

def test_out_of_order_entries_are_not_counted_as_repeats(dedup):
    dedup.topic()
    result = dedup.send([("p", 1), ("p", 0), ("p", 2), ("p", 2), ("q", 5)])     # arrival order: 0 came late
    counts = {c.producer: (c.written, c.duplicates, c.out_of_order, c.repeats) for c in result.producers}
    assert counts == {"p": (2, 2, 1, 1), "q": (1, 0, 0, 0)}
    assert result.out_of_order == 1
    assert dedup.send([("p", 0), ("p", 3)]).out_of_order == 0      # 0 is below the mark now: a repeat of nothing new
    log = dedup.session.sql("SELECT producer, sum(duplicates), sum(out_of_order) FROM seqdedup_statements "
                            f"WHERE topic = '{dedup.key()}' GROUP BY producer ORDER BY producer").rows
    assert log == [("p", 3, 1), ("q", 0, 0)]
    stats = dedup.session.stats("events")
    assert (stats["out_of_order"], stats["producers"]["p"]["out_of_order"]) == (1, 1)


# --- A typo in a column ----------------------------------------------------------------------------------------------

def test_a_typo_in_a_column_names_the_column_and_shows_the_users_sql(dedup):
    dedup.topic()
    dedup.stage([("p", 1)])
    with pytest.raises(EngineError) as error:
        dedup.session.sql("INSERT INTO events SELECT paylod FROM staging WHERE is_not_dup(producer, seq)")
    message = str(error.value)
    assert "paylod" in message and "at line 1, column" in message
    assert "in the statement: INSERT INTO events SELECT paylod FROM staging" in message
    assert "__sd_" not in message and "DESCRIBE" not in message


# --- The result ------------------------------------------------------------------------------------------------------

def test_a_result_reads_as_the_list_of_its_producers_counts(dedup):
    """A statement's per-producer counts are made from its outcome only when read (a statement of a million
    producers makes none unless asked): they compare, index, count and serialise as a list does, and the totals,
    summed apart from them, agree with them."""
    dedup.topic()
    dedup.stage([("b", 1), ("a", 1), ("a", 1), ("b", 2)])
    result = dedup.session.sql("INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq)")
    assert (result.written, result.duplicates, result.out_of_order, result.payload_conflicts) == (3, 1, 0, 0)
    assert len(result.producers) == 2 and [c.producer for c in result.producers] == ["a", "b"]
    assert result.producers[0].written + result.producers[-1].written == result.written
    listed = list(result.producers)
    assert result.producers == listed and listed == result.producers and replace(result, producers=listed) == result
    assert [p["producer"] for p in result.to_dict()["producers"]] == ["a", "b"]
    assert json.loads(json.dumps(result.to_dict(), default=str))["written"] == 3
    assert result.to_arrow().column("written").to_pylist() == [1, 2]


def test_the_same_statement_written_across_other_lines_is_placed_where_it_was_written(dedup):
    """A statement is split once per text (``seqdedup.core.statement.rewritten``); the same statement on other lines
    is another key, so an error cites the place in the text the user ran, not in the one run before it."""
    dedup.topic()
    dedup.stage([("p", 1)])
    one_line = "INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, CAST(payload AS BIGINT))"
    for text, line in ((one_line, 1), (one_line.replace(" WHERE", "\nWHERE"), 2), (one_line, 1)):
        with pytest.raises(EngineError, match=f"among is_not_dup's arguments at line {line}, column"):
            dedup.session.sql(text)
    assert topic_keys(dedup) == []
