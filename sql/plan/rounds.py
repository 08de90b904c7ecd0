"""The windowed decision in rounds, shared by the exceptions and row plans: where ORDER BY or batch entries make the
hash aggregate of repeats wrong, each round decides what running windows can, and only the producers with an
undecided entry (a batch entry straddling the mark) go on to the next."""
from __future__ import annotations

from typing import Callable

from sqlglot import exp

from seqdedup.catalog.names import HIGHEST, PRODUCER, SEQUENCE_ID

from .common import ACCEPTED, MARK, above_all, at_or_below_any, ordered, source
from .steps import Inputs, Step


def first_round(candidates_table: exp.Table, key_columns: list[str], order: list[exp.Ordered], *,
                batches: bool) -> exp.Select:
    """Round 1 of the windowed decision, over the candidates (see ``decision_round``)."""
    start = exp.select(*key_columns, MARK, exp.alias_(exp.cast(exp.null(), "boolean"), ACCEPTED)).from_(
        candidates_table.copy())
    return decision_round(start, key_columns, order, batches=batches, first=True)


def decision_round(previous: exp.Expression, key_columns: list[str], order: list[exp.Ordered], *,
                   batches: bool, first: bool = False) -> exp.Select:
    """One round of decisions over ``previous`` (rows with ``MARK`` and ``ACCEPTED``, NULL where undecided).

    Keep what is decided; accept an entry whose lowest id is above every mark its producer can have, reject one
    at or below a mark the producer surely has. The bounds are sound, so a decision never changes once made.
    Without batch entries (``batches`` false) the two bounds are equal and this one round decides everything; with
    them, the first undecided entry of each producer is always settled by the next round, so rounds end.

    Every round must see a producer's entries in one order. ``order`` ties only copies of one entry (the same ids
    and ORDER BY values), which the engine may sort differently in each round; round 1 leaves the first copy of
    each undecided or accepted and rejects the others (each is at or below an earlier copy's lowest id). So a
    later round (not ``first``) puts a copy that is not rejected before its rejected copies: a rejected copy sorted
    first would otherwise reject the copy it was a repeat of, and no copy of the id would be written.
    """
    s, h, mark, accepted = (exp.column(c) for c in (SEQUENCE_ID, HIGHEST, MARK, ACCEPTED))
    settled = [] if first else [exp.Ordered(this=exp.func("coalesce", accepted.copy(), exp.true()), desc=True)]

    def over(function):
        return exp.Window(this=function, partition_by=[exp.column(PRODUCER)], order=exp.Order(
            expressions=ordered(order) + [o.copy() for o in settled]), spec=exp.WindowSpec(
            kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="1", end_side="PRECEDING"))

    if batches:
        possible = exp.Max(this=exp.Case(ifs=[exp.If(this=exp.or_(accepted.is_(exp.null()), accepted.copy()),
                                                     true=h.copy())]))
    else:
        possible = exp.Max(this=h.copy())
    new = above_all(s, mark, over(possible))
    if batches:
        below = at_or_below_any(s, mark, over(exp.Max(this=s.copy())),
                                over(exp.Max(this=exp.Case(ifs=[exp.If(this=accepted.copy(), true=h.copy())]))))
        decide = exp.Case(ifs=[exp.If(this=new, true=exp.true()), exp.If(this=below, true=exp.false())])
    else:
        decide = exp.Case(ifs=[exp.If(this=new, true=exp.true())], default=exp.false())
    return exp.select(*key_columns, MARK, exp.alias_(exp.func("coalesce", accepted.copy(), decide), ACCEPTED)).from_(
        source(previous, "previous"))


def undecided_producers(decisions: exp.Table) -> exp.Select:
    """The producers with an undecided entry: the only ones the next round needs."""
    return exp.select(PRODUCER).from_(decisions.copy()).where(exp.column(ACCEPTED).is_(exp.null())).distinct()


def rows_of(decisions: exp.Table, producers_: exp.Table, *, inside: bool) -> exp.Select:
    """The rows of ``decisions`` whose producer is (``inside``) or is not among ``producers_`` (a semi or anti
    join: Spark fails to run a NOT IN subquery over checkpointed tables of one lineage)."""
    return exp.select("d.*").from_(decisions.as_("d")).join(
        producers_.as_("x"), on=exp.column(PRODUCER, table="x").eq(exp.column(PRODUCER, table="d")),
        join_type="semi" if inside else "anti")


def count_rows(table: exp.Table, where: exp.Expression | None = None) -> exp.Select:
    """How many rows ``table`` has (``where`` holds)."""
    return exp.select(exp.Count(this=exp.Star())).from_(table.copy()).where(where)


def round_steps(keys: Callable[[Inputs], list[str]]) -> list[Step]:
    """The decision's steps, over the candidates' ``keys``: round 1 for every producer, then, with batch entries,
    rounds for the producers with an undecided entry only, until none is left; the decisions settled are those of
    round 1 for the others and of the last round for them."""
    return [
        Step("round 1", "decisions, round 1", lambda i: first_round(i.table("candidates"), keys(i), i.statement.order,
                                                                    batches=i.batches)),
        Step("pending", "batch entries: the producers with an undecided entry",
             lambda i: undecided_producers(i.table("decisions"))),
        Step("pending count", "how many producers have one", lambda i: count_rows(i.table("pending"))),
        Step("pending rows", "their rows (a semi-join)",
             lambda i: rows_of(i.table("decisions"), i.table("pending"), inside=True)),
        Step("undecided", "undecided entries left", lambda i: count_rows(
            i.table("rounds"), exp.column(ACCEPTED).is_(exp.null()))),
        Step("next round", "decisions, next rounds (producers with an undecided entry only)",
             lambda i: decision_round(i.table("rounds"), keys(i), i.statement.order, batches=True)),
        Step("settled", "the decisions settled: round 1's of the other producers, the last round's of these",
             lambda i: exp.union(rows_of(i.table("decisions"), i.table("pending"), inside=False),
                                 exp.select("*").from_(i.table("rounds")), distinct=False)),
    ]
