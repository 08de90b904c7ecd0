"""The holes a statement leaves (R17): where a topic's ``gap_policy`` is ``record`` or ``refuse``, the entries its
commit wrote are read back, per producer in id order, each against the highest id before it (its producer's mark when
the statement began, for the first); an entry whose id is more than one above that leaves the ids between unsent.

Written entries of a producer have increasing ids and highest ids in any statement (each is above the mark the ones
before it raised), so the highest id before an entry is its predecessor's: one window, no running maximum.
"""
from __future__ import annotations

from sqlglot import exp

from seqdedup.catalog.schema import ATTEMPT, GAPS, catalog_table

from .common import source
from .ledger import STATEMENT_ID, TOPIC


def holes(written: exp.Expression, marks: exp.Expression | None) -> exp.Select:
    """(producer, after_id, before_id) of each hole the rows ``written`` (the topic's columns) leave after the
    ``marks`` (producer, sequence_id) the statement began with (None: no producer had one).

    Example (p's mark 4; written 5, 7..9 and 12; q has no mark):
        >>> import duckdb
        >>> con = duckdb.connect()
        >>> _ = con.execute("CREATE TABLE w AS SELECT * FROM (VALUES ('p', 5, 5), ('p', 7, 9), ('p', 12, 12), "
        ...                 "('q', 3, 3), ('q', 4, 4)) t(_producer, _sequence_id, _highest_sequence_id)")
        >>> _ = con.execute("CREATE TABLE m AS SELECT 'p' AS producer, 4 AS sequence_id")
        >>> con.sql(holes(exp.table_("w"), exp.table_("m")).order_by("producer", "after_id").sql("duckdb")).fetchall()
        [('p', 5, 7), ('p', 9, 12)]
    """
    w = lambda name: exp.column(name, table="w")       # noqa: E731
    previous = exp.Window(this=exp.func("lag", w("_highest_sequence_id")), partition_by=[w("_producer")],
                          order=exp.Order(expressions=[exp.Ordered(this=w("_sequence_id"))]))
    mark = exp.column("sequence_id", table="m") if marks is not None else exp.cast(exp.null(), "bigint")
    ids = exp.select(exp.alias_(w("_producer"), "producer"), exp.alias_(w("_sequence_id"), "before_id"),
                     exp.alias_(exp.func("coalesce", previous, mark), "after_id")).from_(source(written, "w"))
    if marks is not None:
        ids = ids.join(source(marks, "m"), join_type="left", on=exp.column("producer", table="m").eq(w("_producer")))
    return exp.select("producer", "after_id", "before_id").from_(ids.subquery("i")).where(
        exp.column("before_id") > exp.column("after_id") + 1)


def record(found: exp.Select, now: exp.Expression, commit: exp.Expression) -> exp.Insert:
    """The holes ``found`` into ``seqdedup_gaps``, in the statement's commit."""
    row = {"topic": TOPIC.copy(), "commit_id": commit.copy(), "statement_id": STATEMENT_ID.copy(),
           "producer": exp.column("producer"), "after_id": exp.column("after_id"),
           "before_id": exp.column("before_id"), "found_at": now.copy(), "attempt": ATTEMPT.copy()}
    return exp.insert(exp.select(*[exp.alias_(row[c], c) for c in GAPS]).from_(found.subquery("h")),
                      catalog_table("seqdedup_gaps"), columns=[exp.to_identifier(c) for c in GAPS])
