"""The row plan (DuckDB's: its tables number their rows): the rows read once into a table beside their marks, the
repeats or rejected entries removed from it, the candidates left written at the base plus their row's place (see
the package's overview)."""
from __future__ import annotations

import dataclasses

from sqlglot import exp

from seqdedup.catalog import ids
from seqdedup.catalog.names import HIGHEST, PRODUCER, SEQUENCE_ID

from .common import (ACCEPTED, MARK, POSITION, TOP, WRITTEN, above, insert_rows, invalid, no_mark, refusal, source,
                     unwritten_ids, working_marks)
from . import ledger
from .rounds import first_round, round_steps
from .steps import CARRIED, VALUES, Step, plan_of

#: The row number of an entry in the table of the statement's rows (``rows_once``): the engine's own (DuckDB's rowid).
ROW_ID = "rowid"
#: The number of an entry's row, carried where the decision is made (``row_candidates``).
ROW = "__sd_row"
#: What fails the rows' query at an invalid entry: DuckDB's ``error`` with the message the runner knows (``REFUSED``).
REFUSE = refusal("error")
#: The first row's number, given to the write (the outcome reads it: ``FIRST``).
FIRST_ROW = exp.Placeholder(this="__sd_first_row")
FIRST = "__sd_first_row"
#: Per producer, the distinct candidate ids that no entry was written with (``late_ids``).
LATE = "__sd_late"
#: Whether a fetched row is a candidate (``rows_fetched``).
CANDIDATE = "__sd_candidate"


def _candidate(table: str | None = None) -> exp.Expression:
    """An entry above its producer's mark: the only kind a statement can write."""
    return above(exp.column(SEQUENCE_ID, table=table), exp.column(MARK, table=table))


def rows_once(values: exp.Select, marks: exp.Expression | None, id_parts: int | None = None) -> exp.Select:
    """The statement's rows as read once, each with its producer's mark (NULL: none): the row plan's table, which
    the engine numbers (``ROW_ID``); every later step reads it. An invalid entry (R4) fails this query as its row is
    read (``REFUSE``): the runner names it once the commit is rolled back, and nothing else was computed.

    ``marks``: a table ``(producer, sequence_id)``, joined, its composite ids (``id_parts``) as stored, each put in
    the working form once (``catalog.ids``); or a parameter holding a MAP from producer to mark, looked up per entry
    (a few marks: ``EngineAdapter.MARKS_AS_MAP``), which holds composite ids in the working form.

        >>> rows_once(exp.select("*").from_("v"), exp.Placeholder(this="m")).selects[1].sql("duckdb")
        'CAST(MAP_EXTRACT_VALUE($m, v.__sd_producer) AS BIGINT) AS __sd_mark'
    """
    bad = invalid(*(exp.column(c, table="v") for c in (PRODUCER, SEQUENCE_ID, HIGHEST)), id_parts)
    check = exp.Case(ifs=[exp.If(this=bad, true=REFUSE.copy())], default=exp.true())
    if marks is None or isinstance(marks, exp.Placeholder):
        mark = no_mark(id_parts) if marks is None else exp.func(
            "map_extract_value", marks.copy(), exp.column(PRODUCER, table="v"))
        if marks is not None and id_parts is None:
            mark = exp.cast(mark, ids.id_type(id_parts))
        return exp.select("v.*", exp.alias_(mark, MARK)).from_(source(values, "v")).where(check)
    return exp.select("v.*", exp.alias_(exp.column("sequence_id", table="m"), MARK)).from_(source(values, "v")).join(
        source(working_marks(marks, id_parts), "m"), join_type="left",
        on=exp.column("producer", table="m").eq(exp.column(PRODUCER, table="v"))).where(check)


def _position(row: exp.Expression, base: exp.Expression, first: exp.Expression) -> exp.Expression:
    """An entry's position: the base plus its row's place in the table of the statement's rows, counted from its
    ``first`` row. Unique and above the base; not dense once repeats are removed, which positions need not be."""
    return exp.Add(this=exp.Sub(this=exp.Add(this=base.copy(), expression=row), expression=first),
                   expression=exp.convert(1))


def rows_summary(rows: exp.Table) -> exp.Select:
    """For a statement that can have batch entries (is_not_dup's third argument): how many candidates are batch
    entries (they need the windowed decision). Without a third argument there are none."""
    s, h = exp.column(SEQUENCE_ID), exp.column(HIGHEST)
    return exp.select(exp.func("count_if", exp.and_(_candidate(), h > s))).from_(rows.copy())


def row_repeats(rows: exp.Table) -> exp.Select:
    """Without ORDER BY and batch entries: the candidate keys sent more than once, with the row that is written
    (the first) and how many were sent: every other row of the key is a repeat.

    Example:
        >>> row_repeats(exp.table_("r")).sql("duckdb")
        'SELECT __sd_producer, __sd_sequence_id, MIN(rowid) AS __sd_keep, COUNT(*) AS __sd_rows FROM r WHERE (__sd_mark IS NULL OR __sd_sequence_id > __sd_mark) GROUP BY __sd_producer, __sd_sequence_id HAVING COUNT(*) > 1'
    """
    return (exp.select(PRODUCER, SEQUENCE_ID, exp.alias_(exp.Min(this=exp.column(ROW_ID)), "__sd_keep"),
                       exp.alias_(exp.Count(this=exp.Star()), "__sd_rows"))
            .from_(rows.copy()).where(_candidate()).group_by(PRODUCER, SEQUENCE_ID)
            .having(exp.Count(this=exp.Star()) > 1))


def rows_fetched(rows: exp.Table) -> exp.Select:
    """A few rows' keys, each with its row's number and whether it is a candidate (above its mark): what a small
    statement that wrote first and left a row unwritten works out what each producer sent from, in NumPy
    (``seqdedup.core.plans.written_first``), where reading ten rows back costs less than the query of the repeats
    and that of the outcome (each a grouped aggregate).

    Example:
        >>> rows_fetched(exp.table_("r")).sql("duckdb")
        'SELECT rowid AS __sd_row, __sd_producer, __sd_sequence_id, __sd_highest, (__sd_mark IS NULL OR __sd_sequence_id > __sd_mark) AS __sd_candidate FROM r'
    """
    return exp.select(exp.alias_(exp.column(ROW_ID), ROW), PRODUCER, SEQUENCE_ID, HIGHEST,
                      exp.alias_(_candidate(), CANDIDATE)).from_(rows.copy())


def drop_repeats(rows: exp.Table, repeats: exp.Table) -> exp.Delete:
    """Remove the repeats from the rows (every row of a repeated key but the one written)."""
    same = exp.and_(*[exp.column(c, table=rows.name).eq(exp.column(c, table="x")) for c in (PRODUCER, SEQUENCE_ID)])
    return exp.Delete(this=rows.copy(), using=[repeats.as_("x")], where=exp.Where(this=exp.and_(
        same, exp.column(ROW_ID, table=rows.name).neq(exp.column("__sd_keep", table="x")))))


def row_candidates(rows: exp.Table, key_columns: list[str]) -> exp.Select:
    """The candidates, numbered by their row, for the windowed decision (``first_round``)."""
    return exp.select(exp.alias_(exp.column(ROW_ID), ROW), *key_columns, MARK).from_(rows.copy()).where(_candidate())


def drop_rejected(rows: exp.Table, decisions: exp.Table) -> exp.Delete:
    """Remove the candidates the windowed decision rejects from the rows."""
    return exp.Delete(this=rows.copy(), where=exp.Where(this=exp.column(ROW_ID).isin(
        query=exp.select(ROW).from_(decisions.copy()).where(exp.not_(exp.column(ACCEPTED))))))


def rows_written(rows: exp.Table, value_columns: list[str], key_columns: list[str], base: exp.Expression,
                 numbered: bool = False) -> exp.Select:
    """What the row plan writes: every candidate left, at ``base`` plus its row's place in the table (counted from
    ``FIRST_ROW``, which the outcome read before the write gives). ``numbered``: at ``base`` plus its place among the
    rows written, in the table's order, for a write whose outcome is worked out from the positions it returns
    (``written_keys``): a table made in a transaction numbers its rows from a number of the engine's own.

    Example:
        >>> rows_written(exp.table_("r"), [], [], exp.Placeholder(this="b"), numbered=True).selects[0].sql("duckdb")
        '$b + ROW_NUMBER() OVER () AS __sd_position'
    """
    position = exp.Add(this=base.copy(), expression=exp.Window(this=exp.RowNumber())) if numbered else \
        _position(exp.column(ROW_ID), base, FIRST_ROW.copy())
    return exp.select(*value_columns, *key_columns, exp.alias_(position, POSITION)).from_(rows.copy()).where(
        _candidate())


def written_keys(insert: exp.Insert) -> exp.Insert:
    """The write (``rows_written``'s INSERT) that also returns the keys and position of each row it wrote: a small
    statement that writes first learns from them what it wrote (``seqdedup.core.plans.written_first``).

    Example:
        >>> written_keys(exp.insert(exp.select("*").from_("r"), "t")).sql("duckdb")
        'INSERT INTO t SELECT * FROM r RETURNING _producer AS __sd_producer, _sequence_id AS __sd_sequence_id, _highest_sequence_id AS __sd_highest, _position AS __sd_position'
    """
    returned = [exp.alias_(exp.column(c), a) for c, a in (("_producer", PRODUCER), ("_sequence_id", SEQUENCE_ID),
                                                          ("_highest_sequence_id", HIGHEST), ("_position", POSITION))]
    insert = insert.copy()
    insert.set("returning", exp.Returning(expressions=returned))
    return insert


def unwritten(topic: exp.Table, commit: exp.Expression) -> exp.Delete:
    """Remove the rows the open commit wrote to the topic (a small statement that wrote first and found an id
    repeated among them: the engine's way then runs, and writes again)."""
    return exp.delete(topic.copy(), where=exp.column("_commit").eq(commit.copy()))


def row_outcome(rows: exp.Table, dropped: exp.Query | None, base: exp.Expression, late: exp.Query | None = None,
                together: bool = False, id_parts: int | None = None) -> exp.Select:
    """The per-producer outcome (``OUTCOME``) of the row plan, read before the write, and the first row's number
    (``FIRST``, which the write is given): what is left in the rows is written (candidates) or a duplicate at or
    below the mark; ``dropped`` gives, per producer, the rows removed (``__sd_dropped``; None: none were);
    ``late`` (an ordered statement or batch entries) its candidate ids that no entry was written with (``LATE``:
    they came late). The first row is the least of the producers' first rows (a window over the groups: one query
    plan, where a subquery per use cost a small statement about a millisecond). ``together``: one row for every
    producer at once, whose producer is NULL (a statement of keys, R20: a row per key would be a row per entry).
    ``id_parts``: the highest id of composite ids (R19) as the topic stores it.

    Example:
        >>> row_outcome(exp.table_("r"), None, exp.Placeholder(this="b")).sql("duckdb")  # doctest: +ELLIPSIS
        'SELECT r.__sd_producer AS producer, r.__sd_left AS sent, ..., $b + r.__sd_first_written - r.__sd_first + 1 AS first_position, ... FROM (SELECT __sd_producer, ..., MIN(MIN(rowid)) OVER () AS __sd_first FROM r GROUP BY __sd_producer) AS r'
    """
    def candidate(value: exp.Expression) -> exp.Expression:
        return exp.Case(ifs=[exp.If(this=_candidate(), true=value)])

    first_row = exp.Min(this=exp.column(ROW_ID))
    kept = exp.select(exp.alias_(exp.cast(exp.null(), "text"), PRODUCER) if together else PRODUCER,
                      exp.alias_(exp.Count(this=exp.Star()), "__sd_left"),
                      exp.alias_(exp.func("count_if", _candidate()), WRITTEN),
                      exp.alias_(exp.Min(this=candidate(exp.column(ROW_ID))), "__sd_first_written"),
                      exp.alias_(exp.Max(this=candidate(exp.column(ROW_ID))), "__sd_last_written"),
                      exp.alias_(exp.Max(this=candidate(exp.column(HIGHEST))), TOP),
                      exp.alias_(first_row if together else exp.Window(this=exp.Min(this=first_row)), "__sd_first")
                      ).from_(rows.copy())
    if together:    # (no row where there are none, as a GROUP BY gives)
        kept = kept.having(exp.Count(this=exp.Star()) > 0)
        dropped, late = (_summed(q, c) for q, c in ((dropped, "__sd_dropped"), (late, LATE)))
    else:
        kept = kept.group_by(PRODUCER)
    r, d, x = "r", "d", "x"
    sent = exp.column("__sd_left", table=r)
    if dropped is not None:
        sent = exp.Add(this=sent, expression=exp.func("coalesce", exp.column("__sd_dropped", table=d),
                                                      exp.convert(0)))
    written = exp.column(WRITTEN, table=r)
    late_ones = exp.func("coalesce", exp.column(LATE, table=x), exp.convert(0)) if late is not None else exp.convert(0)
    first = exp.column("__sd_first", table=r)
    query = (exp.select(exp.alias_(exp.column(PRODUCER, table=r), "producer"), exp.alias_(sent, "sent"),
                        exp.alias_(written, "written"), exp.alias_(exp.Sub(this=sent.copy(), expression=written.copy()),
                                                                   "duplicates"),
                        exp.alias_(_position(exp.column("__sd_first_written", table=r), base, first), "first_position"),
                        exp.alias_(_position(exp.column("__sd_last_written", table=r), base, first), "last_position"),
                        exp.alias_(ids.stored(exp.column(TOP, table=r), id_parts), "highest"),
                        exp.alias_(late_ones, "out_of_order"),
                        exp.alias_(first.copy(), FIRST))
             .from_(kept.subquery(r)))
    for counts, alias in ((dropped, d), (late, x)):
        if counts is not None:
            query = query.join(source(counts, alias), join_type="left", on=exp.true() if together else exp.column(
                PRODUCER, table=alias).eq(exp.column(PRODUCER, table=r)))
    return query


def _summed(counts: exp.Query | None, column: str) -> exp.Query | None:
    """Per producer ``counts`` (of ``column``), summed over every producer."""
    return None if counts is None else exp.select(exp.alias_(exp.Sum(this=exp.column(column)), column)).from_(
        source(counts, "c"))


def dropped_repeats(repeats: exp.Table) -> exp.Select:
    """Per producer, the repeats ``drop_repeats`` removes."""
    return exp.select(PRODUCER, exp.alias_(exp.Sum(this=exp.Sub(this=exp.column("__sd_rows"), expression=exp.convert(
        1))), "__sd_dropped")).from_(repeats.copy()).group_by(PRODUCER)


def dropped_rejected(decisions: exp.Table) -> exp.Select:
    """Per producer, the candidates ``drop_rejected`` removes."""
    return exp.select(PRODUCER, exp.alias_(exp.func("count_if", exp.not_(exp.column(ACCEPTED))), "__sd_dropped")).from_(
        decisions.copy()).group_by(PRODUCER)


def late_ids(decisions: exp.Table, rows: exp.Table) -> exp.Select:
    """Per producer, the distinct ids of rejected candidates that no entry left in the rows has: no entry was
    written with them (they came late). The rejected are few, so this costs much less than counting every distinct
    candidate id.

    Example:
        >>> late_ids(exp.table_("d"), exp.table_("r")).sql("duckdb")
        'SELECT x.__sd_producer, COUNT(DISTINCT x.__sd_sequence_id) AS __sd_late FROM d AS x ANTI JOIN r AS w ON w.__sd_producer = x.__sd_producer AND w.__sd_sequence_id = x.__sd_sequence_id WHERE NOT x.__sd_accepted GROUP BY x.__sd_producer'
    """
    return unwritten_ids(decisions, rows, exp.not_(exp.column(ACCEPTED, table="x")), LATE)


def rejected_only(decisions: exp.Query) -> exp.Select:
    """The rejected rows of a decision (without batch entries one round decides every candidate, and only the
    rejected are read again: removed from the rows, counted)."""
    return exp.select("*").from_(source(decisions, "d")).where(exp.not_(exp.column(ACCEPTED)))


#: The row plan's steps (see ``steps``).
STEPS = plan_of(
    dataclasses.replace(VALUES, name="a large state: the statement's rows, read once into a table (for the next)"),
    CARRIED,
    Step("rows", "the statement's rows, read once, with their producers' marks",
         lambda i: rows_once(i.read.values, i.marks, i.statement.id_parts)),
    Step("summary", "with is_not_dup's third argument: batch entries",
         lambda i: rows_summary(i.table("rows"))),
    Step("fetched", "a small statement that wrote first and left a row unwritten: its rows' keys, read back for "
                    "its outcome",
         lambda i: rows_fetched(i.table("rows"))),
    Step("repeats", "without ORDER BY or batch entries: repeated keys", lambda i: row_repeats(i.table("rows"))),
    Step("dropped repeats", "a ledger, or payload conflicts judged: the rows at or below their mark and the repeats, "
                            "set apart", lambda i: ledger.dropped_repeats(
                                i.table("rows"), i.table("repeats"), i.fingerprint, i.entry, i.statement.id_parts)),
    Step("dropped below", "a ledger, or payload conflicts judged, where no row was removed: the rows at or below "
                          "their mark, set apart", lambda i: ledger.dropped_below(i.table("rows"), i.fingerprint,
                                                                                  i.entry, i.statement.id_parts)),
    Step("drop repeats", "the repeats removed", lambda i: drop_repeats(i.table("rows"), i.table("repeats"))),
    Step("candidates", "with ORDER BY or batch entries: candidates (read by round 1, not kept)",
         lambda i: row_candidates(i.table("rows"), i.statement.key_columns)),
    Step("rejected", "without batch entries: round 1, its rejected entries only",
         lambda i: rejected_only(first_round(i.table("candidates"), [ROW] + i.statement.key_columns,
                                             i.statement.order, batches=False))),
    *round_steps(lambda i: [ROW] + i.statement.key_columns),
    Step("dropped rejected", "a ledger, or payload conflicts judged: the rows at or below their mark and the "
                             "rejected, set apart", lambda i: ledger.dropped_rejected(
                                 i.table("rows"), i.table("decisions"), i.fingerprint, i.entry, i.statement.id_parts)),
    Step("drop rejected", "the rejected removed", lambda i: drop_rejected(i.table("rows"), i.table("decisions"))),
    Step("outcome", "outcome per producer (all at once: a statement of keys), where no row was removed",
         lambda i: row_outcome(i.table("rows"), None, i.base, together=i.together,
                               id_parts=i.statement.id_parts).order_by("producer")),
    Step("outcome repeats", "outcome per producer, without ORDER BY or batch entries", lambda i: row_outcome(
        i.table("rows"), dropped_repeats(i.table("repeats")), i.base, together=i.together,
        id_parts=i.statement.id_parts).order_by("producer")),
    Step("outcome rejected", "outcome per producer, with them", lambda i: row_outcome(
        i.table("rows"), dropped_rejected(i.table("decisions")), i.base,
        late_ids(i.table("decisions"), i.table("rows")), together=i.together,
        id_parts=i.statement.id_parts).order_by("producer")),
    Step("returning write", "a small statement without batch entries whose rows are left as they are: the write, "
                           "numbered, which returns the keys it wrote (its outcome is worked out from them)",
         lambda i: written_keys(_write(i, numbered=True))),
    Step("unwrite", "that write undone, where an id repeats among the rows it wrote",
         lambda i: unwritten(i.topic, i.commit)),
    Step("write", "write", lambda i: _write(i)),
)


def _write(i, numbered: bool = False) -> exp.Insert:
    """The row plan's write (``rows_written``) into the topic."""
    return insert_rows(i.topic, i.targets, i.values, rows_written(i.table("rows"), i.values, i.statement.key_columns,
                                                                  i.base, numbered), i.publish_time, i.commit,
                       keyed=i.statement.keyed, id_parts=i.statement.id_parts)
