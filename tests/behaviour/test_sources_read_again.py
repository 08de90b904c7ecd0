"""A source that gives other rows each time it is read never makes a statement write an id twice, nor report an
entry it did not write: a sample, ``rand()`` or ``uuid()`` among the expressions, a random arrival order, a Python
function with a side effect. Each statement's entries are decided and written from one reading of its SELECT.

Every case sends the same id twice per try (``('p', k)`` two times: one of them may be written) and checks, after
each statement, that the topic holds no (producer, id) twice, that positions are unique, and that the result's
per-producer written counts are the rows the commit holds. The outcome of one try is random; the tries are many.
"""
from __future__ import annotations

import itertools
from collections import Counter

import pytest

from ..positions import position_problem

#: Statements over the staged entries whose SELECT gives other rows when read again (``{}``: the topic).
CASES = {
    "rand-in-the-producer": "INSERT INTO {} SELECT payload FROM staging WHERE is_not_dup(IF(rand() < 0.5, 'w1', 'w2'), seq)",
    "rand-in-the-id": "INSERT INTO {} SELECT payload FROM (SELECT *, seq * 2 + IF(rand() < 0.5, 0, 1) AS s FROM staging) t "
                      "WHERE is_not_dup(producer, s)",
    "sample-in-a-subquery": "INSERT INTO {} SELECT payload FROM (SELECT * FROM staging TABLESAMPLE (50 PERCENT)) s "
                            "WHERE is_not_dup(producer, seq)",
    "rand-filter": "INSERT INTO {} SELECT payload FROM staging WHERE is_not_dup(producer, seq) AND rand() < 0.5",
    "uuid-filter": "INSERT INTO {} SELECT payload FROM staging WHERE is_not_dup(producer, seq) AND CAST(uuid() AS STRING) < '8'",
    "rand-arrival-order": "INSERT INTO {} SELECT payload FROM staging WHERE is_not_dup(producer, seq, highest) "
                          "ORDER BY rand()",
    "rand-batch-entry": "INSERT INTO {} SELECT payload FROM staging "
                        "WHERE is_not_dup(producer, seq, seq + IF(rand() < 0.5, 0, 3)) ORDER BY arrival",
    "python-function-with-a-side-effect": "INSERT INTO {} SELECT payload FROM staging "
                                          "WHERE is_not_dup(flip(producer), seq)",
}
#: Tries per case: a try is one statement (Spark runs a statement as a few jobs).
TRIES = {"duckdb": 30, "spark": 3, "connect": 3}


def flipping():
    """A Python function that names another producer on each call (a side effect: a counter)."""
    calls = itertools.count()
    return lambda producer: f"{producer}{next(calls) % 2}"


@pytest.mark.parametrize("statement", list(CASES.values()), ids=list(CASES))
def test_a_source_read_again_never_writes_an_id_twice(dedup, statement):
    dedup.register_python_function("flip", flipping())
    topic = dedup.topic("changing")
    for k in range(TRIES[dedup.engine.name]):
        dedup.stage([("p", k, k, "a"), ("p", k, k, "a"), ("q", k, k, "b")])
        result = dedup.session.sql(statement.format(topic))
        rows = dedup.session.sql(f"SELECT _producer, _sequence_id, _commit, _position FROM {topic}").rows
        assert len(rows) == len({(p, s) for p, s, _, _ in rows}), rows
        assert position_problem([(c, position) for _, _, c, position in rows]) is None
        written = Counter(p for p, _, c, _ in rows if c == result.commit)
        assert {p.producer: p.written for p in result.producers if p.written} == written
