"""Golden SQL: what a statement runs on each engine, for reviewers to see (STYLE 11): each plan's list of steps
(``sql/plan/steps.py``), built by the same builders the runner uses (``plan.describe``). DuckDB runs the row plan;
Spark the window plan, and the exceptions plan when a batch entry straddles the mark.

Set SEQDEDUP_UPDATE_GOLDEN=1 to rewrite the files after an intended change, and read the diff.
"""
from __future__ import annotations

import os
import pathlib

import pytest
import sqlglot
from sqlglot import exp

from seqdedup.extensions.base import EngineAdapter
from seqdedup.sql import plan, rewrite
from seqdedup.sql.dialects import DuckDBExplicit, SparkAnsi
from seqdedup.sql.key_window import expand_is_new
from seqdedup.sql.plan import spread

GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"
STATEMENTS = {
    "single_unordered": "INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq)",
    "batch_ordered": "INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq, highest) "
                     "AND payload IS NOT NULL ORDER BY arrival",
    "keys": "INSERT INTO events SELECT payload FROM staging WHERE is_new(request_id)",
}
#: dialect -> the plans its engine runs, with what the engine gives them (the Spark adapter's numbering needs a
#: session, so it is written out here as the adapter builds it for 2 partitions)
SPARK_NUMBER = sqlglot.parse_one(
    "(MONOTONICALLY_INCREASING_ID() - SHIFTLEFT(CAST(SPARK_PARTITION_ID() AS BIGINT), 33)) * 2 "
    "+ CAST(SPARK_PARTITION_ID() AS BIGINT) + 1", read="spark")
#: (a small statement's window plan on Spark: its base position as a DECIMAL (``SparkAdapter.constant``), a few
#: marks as a map bound to a parameter, the rows in one task)
SMALL = dict(gather=True, marks=exp.Placeholder(this="__sd_marks"),
             base=exp.cast(exp.convert(41), exp.DataType.build("DECIMAL(20, 0)")))
ENGINES = {
    "duckdb": [dict(kind="rows", number=EngineAdapter().row_number())],
    "spark": [dict(kind="window", partitions=2, number=SPARK_NUMBER, refuse=plan.refusal("raise_error")),
              dict(kind="window", partitions=2, number=SPARK_NUMBER, refuse=plan.refusal("raise_error"),
                   only=["decide"], label="a small statement", **SMALL),
              dict(kind="window", partitions=2, number=SPARK_NUMBER, refuse=plan.refusal("raise_error"),
                   only=["decide"], label="a producer spread over ranges of its ids", unordered=True,
                   ranges=spread.ranges_of({"p": ([250, 500, 750], [0, 1, 4, 5])}, "hash")),
              dict(kind="window", partitions=2, number=SPARK_NUMBER, refuse=plan.refusal("raise_error"),
                   only=["decide", "outcome"], label="a statement of keys, its outcome reported together",
                   together=True),
              dict(kind="exceptions", partitions=2, number=SPARK_NUMBER, read_once=True)],
}
DIALECT = {"duckdb": DuckDBExplicit, "spark": SparkAnsi}


def plan_sql(statement: str, engine: str) -> str:
    insert = rewrite.expand_is_not_dup(expand_is_new(sqlglot.parse_one(statement, read="spark")))
    parts = []
    for options in ENGINES[engine]:
        options = dict(options)
        kind, only, label = options.pop("kind"), options.pop("only", None), options.pop("label", None)
        if options.pop("unordered", False) and insert.ordered:     # (an ordered statement is not spread)
            continue
        if options.get("together") and not insert.keyed:      # (only a statement of keys is reported together)
            continue
        inputs = plan.Inputs(insert, **{**dict(commit=exp.convert(7), publish_time=exp.Literal.string("2026-01-01"),
                                               topic=exp.table_("events", db="main"), targets=["payload"],
                                               values=["__sd_v0"], base=exp.convert(41)), **options})
        title = f"{kind} plan" + (f", {label}" if label else "")
        parts += [f"-- {title}: {name}\n{tree.sql(DIALECT[engine], pretty=True)};"
                  for name, tree in plan.describe(kind, inputs, only).items()]
    return "\n\n".join(parts) + "\n"


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("name", list(STATEMENTS))
def test_golden_sql(name, engine):
    path = GOLDEN / f"{name}.{engine}.sql"
    text = plan_sql(STATEMENTS[name], engine)
    if os.environ.get("SEQDEDUP_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"no golden file {path.name}: run with SEQDEDUP_UPDATE_GOLDEN=1"
    assert text == path.read_text()
