"""A statement's plan as named steps, for people to read (tests/golden holds them per engine)."""
from __future__ import annotations

from sqlglot import exp

from .common import ACCEPTED, LAST, insert_rows
from .exceptions import (candidates, decided_counts, decided_exceptions, outcome, producers, repeat_counts, repeats,
                         write_rows)
from .rounds import decision_round, first_round
from .rows import (ROW, drop_rejected, drop_repeats, dropped_rejected, dropped_repeats, row_candidates, row_outcome,
                   row_repeats, rows_once, rows_summary, rows_written)
from .window import window_decisions, window_metrics, window_outcome


def describe(statement, *, kind: str, base: int, commit: int, publish_time: exp.Expression,
             partitions: int | None, number: exp.Expression, topic: exp.Table, targets: list[str],
             values: list[str], small_base: exp.Expression | None = None,
             refuse: exp.Expression | None = None) -> dict[str, exp.Expression]:
    """The steps of a plan for a statement, named, each reading the tables the steps before it make (named after
    them): what the runner executes, for people to read (tests/golden holds them per engine).

    ``kind`` is "window", "rows" or "exceptions". For the row and exceptions plans both ways to the exceptions are
    given: the hash aggregate (no ORDER BY, no batch entries) and the windowed decision (the others). ``small_base``: the base a
    small statement's window plan is given (``EngineAdapter.constant``), if not ``base``; ``refuse``, what fails
    the window plan's query at an invalid entry (``window_decisions``).

    Example:
        >>> import sqlglot
        >>> from seqdedup.sql.rewrite import expand_is_not_dup
        >>> d = expand_is_not_dup(sqlglot.parse_one("INSERT INTO t SELECT x FROM s WHERE is_not_dup(p, q)"))
        >>> list(describe(d, kind="exceptions", base=0, commit=2, publish_time=exp.Literal.string("now"),
        ...               partitions=None, number=exp.Window(this=exp.RowNumber()),
        ...               topic=exp.table_("t"), targets=["x"], values=["__sd_v0"]))[:3]
        ["the statement's rows, read once", 'producers', 'exceptions, without ORDER BY or batch entries: repeated keys']
    """
    table = exp.table_
    keys, marks = statement.keys, table("__sd_marks")
    if kind == "window":
        decided = table("__sd_decided")
        return {
            "decide, number and count, in one pass": window_decisions(
                statement.values, marks, statement.order, base=base, partitions=partitions, number=number,
                late=statement.ordered, refuse=refuse),
            "the same for a small statement: a few marks as a map, the rows in one task (no shuffle)":
                window_decisions(statement.values, exp.Placeholder(this="__sd_marks"), statement.order,
                                 base=base if small_base is None else small_base,
                                 partitions=partitions, number=number, late=statement.ordered, gather=True,
                                 refuse=refuse),
            "metrics, checked before publishing": exp.select(
                *[exp.alias_(e, k) for k, e in window_metrics().items()]).from_(decided.copy()),
            "outcome per producer (its last row)": exp.select(*window_outcome(statement.ordered)).from_(
                decided.copy()).where(exp.column(LAST)),
            "write": insert_rows(topic, targets, values, exp.select("*").from_(decided.copy()).where(
                exp.column(ACCEPTED)), publish_time, commit),
        }
    if kind == "rows":
        rows, repeats_, decisions_ = table("__sd_rows"), table("__sd_repeats"), table("__sd_decisions")
        key_columns = [ROW] + statement.key_columns
        return {
            "the statement's rows, read once, with their producers' marks": rows_once(statement.values, marks),
            "first and last row, invalid entries, batch entries": rows_summary(rows),
            "without ORDER BY or batch entries: repeated keys": row_repeats(rows),
            "the repeats removed": drop_repeats(rows, repeats_),
            "with ORDER BY or batch entries: candidates": row_candidates(rows, statement.key_columns),
            "decisions, round 1": first_round(table("__sd_candidates"), key_columns, statement.order, batches=True),
            "decisions, next rounds (producers with an undecided entry only)": decision_round(
                decisions_, key_columns, statement.order, batches=True),
            "the rejected removed": drop_rejected(rows, decisions_),
            "write": insert_rows(topic, targets, values, rows_written(rows, values, statement.key_columns,
                                                                      exp.convert(base)), publish_time, commit),
            "outcome per producer, without ORDER BY or batch entries": row_outcome(
                rows, dropped_repeats(repeats_), exp.convert(base), late=False),
            "outcome per producer, with them": row_outcome(rows, dropped_rejected(decisions_), exp.convert(base),
                                                           late=True),
        }
    producers_, exceptions_, counts_ = table("__sd_producers"), table("__sd_exceptions"), table("__sd_counts")
    candidates_, decisions_ = table("__sd_candidates"), table("__sd_decisions")
    once = statement.over(table("__sd_values"))
    keys = once.keys
    return {
        "the statement's rows, read once": statement.values,
        "producers": producers(keys, marks),
        "exceptions, without ORDER BY or batch entries: repeated keys": repeats(keys, producers_),
        "counts from the repeats": repeat_counts(keys, producers_, exceptions_),
        "candidates, with ORDER BY or batch entries": candidates(keys, producers_),
        "decisions, round 1": first_round(candidates_, statement.key_columns, statement.order, batches=True),
        "decisions, next rounds (producers with an undecided entry only)": decision_round(
            decisions_, statement.key_columns, statement.order, batches=True),
        "exceptions from the decisions": decided_exceptions(decisions_, statement.key_columns),
        "counts from the decisions": decided_counts(decisions_),
        "outcome per producer": outcome(producers_, counts_, base),
        "write": insert_rows(topic, targets, values, write_rows(once.values, producers_, exceptions_,
                                                                statement.key_columns, values, base=base,
                                                                windowed=True), publish_time, commit),
    }
