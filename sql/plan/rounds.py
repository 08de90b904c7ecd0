"""The windowed decision in rounds, shared by the exceptions and row plans: where ORDER BY or batch entries make the
hash aggregate of repeats wrong, each round decides what running windows can, and only the producers with an
undecided entry (a batch entry straddling the mark) go on to the next."""
from __future__ import annotations

from sqlglot import exp

from seqdedup.catalog.names import HIGHEST, PRODUCER, SEQUENCE_ID

from .common import ACCEPTED, MARK, ordered, source


def first_round(candidates_table: exp.Table, key_columns: list[str], order: list[exp.Ordered], *,
                batches: bool) -> exp.Select:
    """Round 1 of the windowed decision, over the candidates (see ``decision_round``)."""
    start = exp.select(*key_columns, MARK, exp.alias_(exp.cast(exp.null(), "boolean"), ACCEPTED)).from_(
        candidates_table.copy())
    return decision_round(start, key_columns, order, batches=batches)


def decision_round(previous: exp.Expression, key_columns: list[str], order: list[exp.Ordered], *,
                   batches: bool) -> exp.Select:
    """One round of decisions over ``previous`` (rows with ``MARK`` and ``ACCEPTED``, NULL where undecided).

    Keep what is decided; accept an entry whose lowest id is above every mark its producer can have, reject one
    at or below a mark the producer surely has. The bounds are sound, so a decision never changes once made.
    Without batch entries (``batches`` false) the two bounds are equal and this one round decides everything; with
    them, the first undecided entry of each producer is always settled by the next round, so rounds end.
    """
    s, h, mark, accepted = (exp.column(c) for c in (SEQUENCE_ID, HIGHEST, MARK, ACCEPTED))

    def over(function):
        return exp.Window(this=function, partition_by=[exp.column(PRODUCER)], order=exp.Order(
            expressions=ordered(order)), spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING",
                                                            end="1", end_side="PRECEDING"))

    def greatest(*values):
        return exp.Greatest(this=values[0], expressions=list(values[1:]), ignore_nulls=True)

    if batches:
        possible = exp.Max(this=exp.Case(ifs=[exp.If(this=exp.or_(accepted.is_(exp.null()), accepted.copy()),
                                                     true=h.copy())]))
    else:
        possible = exp.Max(this=h.copy())
    above = s > exp.func("coalesce", greatest(mark, over(possible)), exp.convert(-1))
    if batches:
        below = s.copy() <= greatest(mark.copy(), over(exp.Max(this=s.copy())),
                                     over(exp.Max(this=exp.Case(ifs=[exp.If(this=accepted.copy(), true=h.copy())]))))
        decide = exp.Case(ifs=[exp.If(this=above, true=exp.true()), exp.If(this=below, true=exp.false())])
    else:
        decide = exp.Case(ifs=[exp.If(this=above, true=exp.true())], default=exp.false())
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

