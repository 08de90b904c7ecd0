"""Golden SQL: what the rewrite actually runs on each engine, for reviewers to see (STYLE 11).

Set SEQDEDUP_UPDATE_GOLDEN=1 to rewrite the files after an intended change, and read the diff.
"""
from __future__ import annotations

import os
import pathlib

import pytest
import sqlglot
from sqlglot import exp

from seqdedup.sql import rewrite

GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"
STATEMENTS = {
    "single_unordered": "INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq)",
    "batch_ordered": "INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq, highest) "
                     "AND payload IS NOT NULL ORDER BY arrival",
}
DIALECTS = ["duckdb", "spark"]


def plan_sql(statement: str, dialect: str) -> str:
    plan = rewrite.expand_is_not_dup(sqlglot.parse_one(statement, read="spark"))
    keys, state, decisions, accepted = (exp.table_(n) for n in ("keys", "state", "decisions", "accepted"))
    steps = {
        "keys": plan.keys,
        "decisions (fast path)" if not plan.ordered else "decisions (round 1)":
            rewrite.aggregate_decisions(keys, state) if not plan.ordered else rewrite.decision_round(
                rewrite.first_decisions(keys, state, plan.key_columns), plan.key_columns, plan.order,
                batches=True, first=True),
        "accepted": rewrite.numbered(rewrite.accepted_entries(decisions, plan.key_columns), plan.key_columns, 41),
        "insert": rewrite.insert_accepted(exp.table_("events", db="main"), ["payload"], ["__sd_v0"], plan.values,
                                          plan.key_columns, accepted, exp.Literal.string("2026-01-01"), 7, ties=True),
    }
    return "\n\n".join(f"-- {name}\n{tree.sql(dialect, pretty=True)};" for name, tree in steps.items()) + "\n"


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(STATEMENTS))
def test_golden_sql(name, dialect):
    path = GOLDEN / f"{name}.{dialect}.sql"
    text = plan_sql(STATEMENTS[name], dialect)
    if os.environ.get("SEQDEDUP_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"no golden file {path.name}: run with SEQDEDUP_UPDATE_GOLDEN=1"
    assert text == path.read_text()
