"""Bad input and failure (DESIGN.md): every case gets a clear error naming the problem and the fix, and changes
nothing: the topic, the state and the snapshot rows are as they were."""
from __future__ import annotations

import pytest

from seqdedup import InvalidEntryError, PolicyError, RewriteError, SeqdedupError, TopicError


def _unchanged(dedup):
    return (dedup.entries(), dedup.snapshot_rows(), dedup.session.producer_state("events").rows,
            dedup.session.topic("events").settings)


@pytest.fixture
def ready(dedup):
    dedup.topic()
    dedup.send([("p", 0), ("q", 3)])
    dedup.stage([("p", 1), ("p", 2)])
    return dedup


STATEMENTS = {
    "unknown-topic": ("INSERT INTO nowhere SELECT payload FROM staging WHERE is_not_dup(producer, seq)",
                      TopicError, r"unknown topic \w+\.nowhere"),
    "inside-or": ("INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq) OR seq > 1",
                  RewriteError, "not inside OR"),
    "inside-not": ("INSERT INTO events SELECT payload FROM staging WHERE NOT is_not_dup(producer, seq)",
                   RewriteError, "not inside NOT"),
    "inside-case": ("INSERT INTO events SELECT payload FROM staging WHERE CASE WHEN is_not_dup(producer, seq) "
                    "THEN true END", RewriteError, "not inside CASE"),
    "join-condition": ("INSERT INTO events SELECT s.payload FROM staging s JOIN staging t "
                       "ON is_not_dup(s.producer, s.seq) AND s.seq = t.seq", RewriteError, "in a join condition"),
    "having": ("INSERT INTO events SELECT max(payload) FROM staging GROUP BY producer "
               "HAVING is_not_dup(producer, max(seq))", RewriteError, "HAVING"),
    "select-list": ("INSERT INTO events SELECT is_not_dup(producer, seq) FROM staging", RewriteError,
                    "in a SELECT list"),
    "subquery": ("INSERT INTO events SELECT payload FROM (SELECT * FROM staging WHERE is_not_dup(producer, seq))",
                 RewriteError, "not in a subquery"),
    "cte": ("INSERT INTO events WITH c AS (SELECT * FROM staging WHERE is_not_dup(producer, seq)) "
            "SELECT payload FROM c", RewriteError, "not in a subquery or CTE"),
    "not-an-insert": ("SELECT * FROM staging WHERE is_not_dup(producer, seq)", RewriteError,
                      "works only in INSERT INTO"),
    "twice": ("INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq) "
              "AND is_not_dup(producer, seq)", RewriteError, "once"),
    "arity-one": ("INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer)", RewriteError,
                  "got 1 arguments"),
    "arity-four": ("INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq, seq, seq)",
                   RewriteError, "got 4 arguments"),
    "aggregate-argument": ("INSERT INTO events SELECT max(payload) FROM staging WHERE is_not_dup(producer, max(seq))",
                           RewriteError, "plain row expressions"),
    "group-by": ("INSERT INTO events SELECT max(payload) FROM staging WHERE is_not_dup(producer, seq) "
                 "GROUP BY producer", RewriteError, "GROUP"),
    "string-sequence-id": ("INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, payload)",
                           InvalidEntryError, "CAST it to BIGINT"),
    "double-sequence-id": ("INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq + 0.5)",
                           InvalidEntryError, "must be an integer"),
    "integer-producer": ("INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(seq, seq)",
                         InvalidEntryError, "CAST it to STRING"),
    "too-many-values": ("INSERT INTO events SELECT payload, seq FROM staging WHERE is_not_dup(producer, seq)",
                        TopicError, r"gives 2 values per entry but topic \w+\.events takes 1"),
    "unknown-column": ("INSERT INTO events (nope) SELECT payload FROM staging WHERE is_not_dup(producer, seq)",
                       TopicError, "has no columns"),
    "system-column": ("INSERT INTO events (_position) SELECT seq FROM staging WHERE is_not_dup(producer, seq)",
                      TopicError, "system columns"),
    "plain-insert-into-topic": ("INSERT INTO events (payload) SELECT payload FROM staging", RewriteError,
                                "must filter with WHERE is_not_dup"),
    "syntax": ("INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq", RewriteError,
               "cannot parse the SQL"),
    "overflowing-id": ("INSERT INTO events SELECT payload FROM staging "
                       "WHERE is_not_dup(producer, CAST(seq AS DECIMAL(38, 0)) + 9223372036854775807)",
                       InvalidEntryError, "must be an integer"),
}


@pytest.mark.parametrize("statement, error, message", list(STATEMENTS.values()), ids=list(STATEMENTS))
def test_bad_statement_fails_clearly_and_changes_nothing(ready, statement, error, message):
    before = _unchanged(ready)
    with pytest.raises(error, match=message):
        ready.session.sql(statement)
    assert _unchanged(ready) == before


ENTRIES = {
    "null-sequence-id": ([("p", 5), ("p", None)], "NULL sequence_id"),
    "negative": ([("p", -1)], "negative"),
    "negative-highest": ([("p", 1, -1)], "negative"),
    "highest-below-lowest": ([("p", 5, 2)], "highest_sequence_id below sequence_id"),
    "null-producer": ([(None, 4)], "NULL producer"),
}


@pytest.mark.parametrize("rows, message", list(ENTRIES.values()), ids=list(ENTRIES))
def test_bad_entries_fail_clearly_and_change_nothing(ready, rows, message):
    before = _unchanged(ready)
    with pytest.raises(InvalidEntryError, match=message):
        ready.send(rows)
    assert _unchanged(ready) == before


NAMES = ["it's", 'a"b', "semi;colon", "drop table events; --", "ünïcødé", "with space", "x" * 10_000]


@pytest.mark.parametrize("producer", NAMES, ids=["quote", "double-quote", "semicolon", "sql", "unicode", "space", "10kb"])
def test_producer_names_are_data_never_code(ready, producer):
    result = ready.send([(producer, 1), (producer, 1)])
    assert (result.written, result.duplicates) == (1, 1)
    assert ready.last(producer) == 1
    assert ready.session.sql("SELECT count(*) FROM events").rows == [(3,)]


@pytest.mark.notyet(["spark"], raises=TopicError,
                    reason="Spark's Hive catalog allows only letters, digits and _ in table names: a clear TopicError")
@pytest.mark.parametrize("name", ["it's", "semi;colon", "ünïcødé", "with space"])
def test_topic_names_that_need_quoting_are_data(dedup, name):
    dedup.session.create_topic(f"`{name}`", {"payload": "STRING"})
    dedup.stage([("p", 1), ("p", 1)])
    table = "`" + name + "`"
    assert dedup.session.sql(f"INSERT INTO {table} SELECT payload FROM staging WHERE is_not_dup(producer, seq)").written == 1
    assert dedup.session.last_sequence_id(table, "p") == 1


def test_disabled_topic_checks_nothing(dedup):
    dedup.topic(deduplication_enabled=False)
    assert dedup.send([("p", 1), ("p", 1)]).written == 2
    assert dedup.last("p") == -1


POLICIES = {
    "unknown-policy": ({"colour": "red"}, "unknown policy"),
    "not-a-number": ({"snapshot_interval_entries": "often"}, "bad value"),
    "zero-interval": ({"snapshot_interval_entries": 0}, ">= 1"),
    "not-a-boolean": ({"deduplication_enabled": "maybe"}, "true or false"),
}


@pytest.mark.parametrize("policies, message", list(POLICIES.values()), ids=list(POLICIES))
def test_bad_policies_fail_clearly_and_change_nothing(ready, policies, message):
    before = _unchanged(ready)
    with pytest.raises(PolicyError, match=message):
        ready.session.alter_topic("events", **policies)
    assert _unchanged(ready) == before


@pytest.mark.parametrize("columns, message", [
    ({"_position": "BIGINT"}, "reserved"), ({}, "at least one column"), ({"x": "NOT A TYPE"}, "unknown type"),
], ids=["system-column", "no-columns", "bad-type"])
def test_bad_topics_are_refused(dedup, columns, message):
    with pytest.raises(TopicError, match=message):
        dedup.session.create_topic("t", columns)
    assert dedup.session.topics() == []


def test_existing_topic_is_refused(ready):
    with pytest.raises(TopicError, match="already exists"):
        ready.session.create_topic("events", {"payload": "STRING"})


def test_state_functions_need_a_literal_topic(ready):
    with pytest.raises(RewriteError, match="string literal"):
        ready.session.sql("SELECT last_sequence_id(producer, producer) FROM staging")


def test_every_error_is_a_seqdedup_error():
    for error in (InvalidEntryError, RewriteError, TopicError, PolicyError):
        assert issubclass(error, SeqdedupError)
