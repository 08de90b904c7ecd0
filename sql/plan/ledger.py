"""The ledger of dropped entries (R16): where a topic's ``dropped_entries`` policy is ``keys`` or ``rows``, the row
plan also writes a row per entry it does not write into ``seqdedup_dropped``, with its reason, in the statement's
commit. The rows are read from the table of the statement's rows before the dropped ones are removed from it, so the
ledger and the topic are decided from one reading.

Why an entry was dropped (``udfs.REASONS``), from its producer's mark when the statement began (``MARK``):

- at or below it: ``retry``, or ``straddles_mark`` for a batch entry some of whose ids were above it (R2: dropped
  whole);
- above it (a candidate the statement did not write): ``repeat`` when an entry of the statement was written with its
  id, else ``late`` (it arrived after a higher id, or in a batch entry that overlapped one written before it).
"""
from __future__ import annotations

from sqlglot import exp

from seqdedup.catalog.names import HIGHEST, PRODUCER, SEQUENCE_ID
from seqdedup.catalog.schema import ATTEMPT, DROPPED, catalog_table

from .common import ACCEPTED, MARK, source

#: The values of a ledger row that are the statement's, not the entry's: bound per statement (the trees are kept per
#: statement shape, which two topics can share).
TOPIC = exp.Placeholder(this="__sd_topic")
STATEMENT_ID = exp.Placeholder(this="__sd_statement_id")
#: The row number of the table of the statement's rows (``rows.ROW_ID``), and a decision's copy of it (``rows.ROW``).
ROW_ID, ROW = "rowid", "__sd_row"


def _col(name: str, table: str = "r") -> exp.Column:
    return exp.column(name, table=table)


def _candidate(table: str = "r") -> exp.Expression:
    """Above the mark the statement began with (the row plan's candidate)."""
    return _col(SEQUENCE_ID, table) > exp.func("coalesce", _col(MARK, table), exp.convert(-1))


def _at_or_below_mark() -> exp.Expression:
    """The reason of an entry at or below its producer's mark."""
    return exp.Case(ifs=[exp.If(this=_col(HIGHEST) > _col(MARK), true=exp.Literal.string("straddles_mark"))],
                    default=exp.Literal.string("retry"))


def entry_json(targets: list[str], values: list[str]) -> exp.Expression:
    """An entry's own columns as a JSON object, keyed by the topic's column names (the ledger's ``entry``).

    Example:
        >>> entry_json(["payload"], ["v"]).sql("duckdb")
        "TO_JSON({'payload': r.v})"
    """
    return exp.func("to_json", exp.Struct(expressions=[
        exp.PropertyEQ(this=exp.to_identifier(t, quoted=True), expression=_col(v)) for t, v in zip(targets, values)]))


def _insert(rows: exp.Table, reason: exp.Expression, joins: list[tuple[exp.Expression, exp.Expression]],
            where: exp.Expression, entry: exp.Expression | None, now: exp.Expression,
            commit: exp.Expression) -> exp.Insert:
    values = {"topic": TOPIC.copy(), "commit_id": commit.copy(), "statement_id": STATEMENT_ID.copy(),
              "producer": _col(PRODUCER), "sequence_id": _col(SEQUENCE_ID), "highest_sequence_id": _col(HIGHEST),
              "reason": reason, "dropped_at": now.copy(),
              "entry": entry if entry is not None else exp.cast(exp.null(), "text"), "attempt": ATTEMPT.copy()}
    select = exp.select(*[exp.alias_(values[c], c) for c in DROPPED]).from_(rows.as_("r"))
    for table, on in joins:
        select = select.join(table, join_type="left", on=on)
    return exp.insert(select.where(where), catalog_table("seqdedup_dropped"),
                      columns=[exp.to_identifier(c) for c in DROPPED])


def _same_key(table: str) -> exp.Expression:
    return exp.and_(*[_col(c, table).eq(_col(c)) for c in (PRODUCER, SEQUENCE_ID)])


def dropped_repeats(rows: exp.Table, repeats: exp.Table, entry: exp.Expression | None, now: exp.Expression,
                    commit: exp.Expression) -> exp.Insert:
    """Without ORDER BY or batch entries: the rows at or below their mark, and every row of a repeated key but the one
    written (``rows.row_repeats``' ``__sd_keep``), into the ledger."""
    reason = exp.Case(ifs=[exp.If(this=exp.not_(_candidate()), true=_at_or_below_mark())],
                      default=exp.Literal.string("repeat"))
    return _insert(rows, reason, [(repeats.as_("x"), _same_key("x"))],
                   exp.or_(exp.not_(_candidate()), _col(ROW_ID).neq(_col("__sd_keep", "x"))), entry, now, commit)


def dropped_rejected(rows: exp.Table, decisions: exp.Expression, entry: exp.Expression | None,
                     now: exp.Expression, commit: exp.Expression) -> exp.Insert:
    """With ORDER BY or batch entries: the rows at or below their mark, and the candidates the windowed decision
    rejects, into the ledger. A rejected candidate is a repeat when a candidate with its id was not rejected (it was
    written), else late: told apart by counting, per id of a rejected candidate, the candidates and the rejected
    ones (the rejected are few: every table built here is theirs, the statement's rows are only probed)."""
    d = lambda name: _col(name, "d")        # noqa: E731
    rejected = exp.select(ROW, PRODUCER, SEQUENCE_ID).from_(source(decisions, "d")).where(exp.not_(d(ACCEPTED)))
    per_id = (exp.select(PRODUCER, SEQUENCE_ID, exp.alias_(exp.Count(this=exp.Star()), "__sd_rejected"))
              .from_(rejected.subquery("j")).group_by(PRODUCER, SEQUENCE_ID))
    candidates = (exp.select(_col(PRODUCER, "w"), _col(SEQUENCE_ID, "w"),
                             exp.alias_(exp.Count(this=exp.Star()), "__sd_candidates"))
                  .from_(rows.as_("w")).join(per_id.subquery("i"), join_type="semi", on=exp.and_(
                      *[_col(c, "i").eq(_col(c, "w")) for c in (PRODUCER, SEQUENCE_ID)]))
                  .where(_candidate("w")).group_by(_col(PRODUCER, "w"), _col(SEQUENCE_ID, "w")))
    repeated = (exp.select(_col(PRODUCER, "i"), _col(SEQUENCE_ID, "i")).from_(per_id.subquery("i"))
                .join(candidates.subquery("c"), on=exp.and_(*[_col(c, "c").eq(_col(c, "i"))
                                                              for c in (PRODUCER, SEQUENCE_ID)]))
                .where(_col("__sd_candidates", "c") > _col("__sd_rejected", "i")))
    reason = exp.Case(ifs=[exp.If(this=exp.not_(_candidate()), true=_at_or_below_mark()),
                           exp.If(this=_col(PRODUCER, "k").is_(exp.not_(exp.null())),
                                  true=exp.Literal.string("repeat"))],
                      default=exp.Literal.string("late"))
    return _insert(rows, reason, [(exp.select(ROW).from_(rejected.subquery("j")).subquery("x"),
                                   _col(ROW, "x").eq(_col(ROW_ID))),
                                  (repeated.subquery("k"), _same_key("k"))],
                   exp.or_(exp.not_(_candidate()), _col(ROW, "x").is_(exp.not_(exp.null()))), entry, now, commit)


def dropped_apart(dropped: exp.Expression, written: exp.Expression, late: bool, columns: list[str] | None,
                  now: exp.Expression, commit: exp.Expression) -> exp.Insert:
    """A plan that staged the entries it dropped apart from those it wrote, in the same job (Spark's window plan:
    ``window.split_write``): ``dropped`` holds them in the topic's columns, each with its producer's mark when the
    statement began in ``_position``; ``written``, the rows its commit wrote. Their reasons as ``dropped_repeats``
    gives them. Without ORDER BY or batch entries, an entry above its mark is dropped only for an earlier entry of
    its id, which was written: a repeat. With them (``late``), it is a repeat where an entry with its id was
    written, else late: told by the written rows' keys, semi-joined to those of the dropped (few) first.
    ``columns``: the topic's user columns, for a ledger that keeps the entries (``rows``).

    Example (p's mark 0; sent 1, 1, 0, 3, 2 in that order; written 1 and 3):
        >>> import duckdb
        >>> con = duckdb.connect()
        >>> _ = con.execute("CREATE TABLE d AS SELECT * FROM (VALUES ('p', 1, 1, 0), ('p', 0, 0, 0), ('p', 2, 2, 0)) "
        ...                 "t(_producer, _sequence_id, _highest_sequence_id, _position)")
        >>> _ = con.execute("CREATE TABLE w AS SELECT * FROM (VALUES ('p', 1, 1), ('p', 3, 3)) "
        ...                 "t(_producer, _sequence_id, _highest_sequence_id)")
        >>> insert = dropped_apart(exp.table_("d"), exp.table_("w"), True, None, exp.null(), exp.convert(7))
        >>> rows = con.execute(insert.expression.sql("duckdb"),
        ...                    {"__sd_topic": "t", "__sd_statement_id": "s", "__sd_attempt": None}).fetchall()
        >>> sorted((r[4], r[6]) for r in rows)
        [(0, 'retry'), (1, 'repeat'), (2, 'late')]
    """
    d = lambda name: exp.column(name, table="d")       # noqa: E731
    mark = d("_position")
    below = d("_sequence_id") <= mark
    reasons = [exp.If(this=below, true=exp.Case(
        ifs=[exp.If(this=d("_highest_sequence_id") > mark.copy(), true=exp.Literal.string("straddles_mark"))],
        default=exp.Literal.string("retry")))]
    keys = ("_producer", "_sequence_id")
    if late:
        above = exp.select(*keys).from_(source(dropped, "a")).where(exp.or_(
            exp.column("_position").is_(exp.null()), exp.column("_sequence_id") > exp.column("_position")))
        ids = (exp.select(*[exp.column(k, table="w") for k in keys]).from_(source(written, "w"))
               .join(above.subquery("a"), join_type="semi", on=exp.and_(
                   *[exp.column(k, table="a").eq(exp.column(k, table="w")) for k in keys])).distinct())
        reasons.append(exp.If(this=exp.column("_producer", table="k").is_(exp.null()),
                              true=exp.Literal.string("late")))
    row = {"topic": TOPIC.copy(), "commit_id": commit.copy(), "statement_id": STATEMENT_ID.copy(),
           "producer": d("_producer"), "sequence_id": d("_sequence_id"), "highest_sequence_id": d("_highest_sequence_id"),
           "reason": exp.Case(ifs=reasons, default=exp.Literal.string("repeat")), "dropped_at": now.copy(),
           "entry": _struct_json([(name, d(name)) for name in columns]) if columns else exp.cast(exp.null(), "string"),
           "attempt": ATTEMPT.copy()}
    select = exp.select(*[exp.alias_(row[c], c) for c in DROPPED]).from_(source(dropped, "d"))
    if late:
        select = select.join(ids.subquery("k"), join_type="left", on=exp.and_(
            *[exp.column(k, table="k").eq(d(k)) for k in keys]))
    return exp.insert(select, catalog_table("seqdedup_dropped"), columns=[exp.to_identifier(c) for c in DROPPED])


def _struct_json(fields: list[tuple[str, exp.Expression]]) -> exp.Expression:
    return exp.func("to_json", exp.Struct(expressions=[
        exp.PropertyEQ(this=exp.to_identifier(name, quoted=True), expression=value) for name, value in fields]))


def dropped_by_difference(values: exp.Expression, written: exp.Expression, marks: exp.Expression | None,
                          columns: list[tuple[str, str, exp.DataType]] | None, now: exp.Expression,
                          commit: exp.Expression) -> exp.Insert:
    """An engine whose plan decides without numbered rows (Spark's window and exceptions plans): the dropped entries
    are the statement's rows, as read once (``values``), less the rows its commit wrote (``written``, the topic's
    columns), counted as multisets on the keys, and with ``columns`` ((topic column, value column, the topic
    column's type), the ledger's ``rows``) on the entry's values too, cast as the write cast them. The reasons as
    ``dropped_repeats`` gives them, from the producers' ``marks`` (producer, sequence_id) when the statement began
    and the ids written.

    The difference is counted, not taken (EXCEPT ALL): the statement's rows are counted per key, each key joined to
    the entry written with its id (at most one: a producer's id is written once), and a key's copies less the one
    written are its dropped rows. One aggregation and one join, where EXCEPT ALL reads the written rows again for the
    reasons and aggregates both sides (4.6 to 5.4 s against the statement's 3.5 s, 1M rows on Spark ``local[2]``).

    Example (p's mark 0; sent 1, 1, 0, 3, 2; written 1 and 3):
        >>> import duckdb
        >>> con = duckdb.connect()
        >>> _ = con.execute("CREATE TABLE v AS SELECT * FROM (VALUES ('p', 1, 1), ('p', 1, 1), ('p', 0, 0), "
        ...                 "('p', 3, 3), ('p', 2, 2)) t(__sd_producer, __sd_sequence_id, __sd_highest)")
        >>> _ = con.execute("CREATE TABLE w AS SELECT * FROM (VALUES ('p', 1, 1), ('p', 3, 3)) "
        ...                 "t(_producer, _sequence_id, _highest_sequence_id)")
        >>> _ = con.execute("CREATE TABLE m AS SELECT 'p' AS producer, 0 AS sequence_id")
        >>> insert = dropped_by_difference(exp.table_("v"), exp.table_("w"), exp.table_("m"), None, exp.null(),
        ...                                exp.convert(7))
        >>> rows = con.execute(insert.expression.sql("duckdb"),
        ...                    {"__sd_topic": "t", "__sd_statement_id": "s", "__sd_attempt": None}).fetchall()
        >>> sorted((r[4], r[6]) for r in rows)
        [(0, 'retry'), (1, 'repeat'), (2, 'late')]
    """
    sent = [(PRODUCER, "p"), (SEQUENCE_ID, "s"), (HIGHEST, "h")]
    kept = [("_producer", "p"), ("_sequence_id", "s"), ("_highest_sequence_id", "h")]
    sent_select = exp.select(*[exp.alias_(exp.column(c), a) for c, a in sent])
    kept_select = exp.select(*[exp.alias_(exp.column(c), a) for c, a in kept])
    keys = ["p", "s", "h"]
    if columns:
        sent_select = sent_select.select(exp.alias_(_struct_json(
            [(name, exp.cast(exp.column(value), kind)) for name, value, kind in columns]), "e"))
        kept_select = kept_select.select(exp.alias_(_struct_json(
            [(name, exp.column(name)) for name, _, _ in columns]), "e"))
        keys.append("e")
    g = lambda name: exp.column(name, table="g")       # noqa: E731
    k = lambda name: exp.column(name, table="k")       # noqa: E731
    counted = (exp.select(*keys, exp.alias_(exp.Count(this=exp.Star()), "n"))
               .from_(sent_select.from_(source(values, "v")).subquery("c")).group_by(*keys))
    # the written entry of the key's id, if any: the key's copy it wrote is one of them (same key, same values)
    wrote_this = exp.and_(*[exp.NullSafeEQ(this=k(c), expression=g(c)) for c in keys[2:]])
    copies = exp.Sub(this=g("n"), expression=exp.Case(ifs=[exp.If(this=wrote_this, true=exp.convert(1))],
                                                       default=exp.convert(0)))
    groups = (exp.select(*[g(c) for c in keys], exp.alias_(copies, "copies"),
                         exp.alias_(k("p").is_(exp.not_(exp.null())), "id_written"))
              .from_(counted.subquery("g"))
              .join(kept_select.from_(source(written, "w")).subquery("k"), join_type="left",
                    on=exp.and_(k("p").eq(g("p")), k("s").eq(g("s")))))
    dropped = (exp.select(*keys, "id_written", exp.alias_(exp.Explode(this=exp.GenerateSeries(
        start=exp.convert(1), end=exp.column("copies"))), "copy")).from_(groups.subquery("x"))
               .where(exp.column("copies") > 0))
    mark = exp.column("sequence_id", table="m") if marks is not None else exp.cast(exp.null(), "bigint")
    d = lambda name: exp.column(name, table="d")       # noqa: E731
    reason = exp.Case(ifs=[exp.If(this=d("s") <= mark, true=exp.Case(
        ifs=[exp.If(this=d("h") > mark.copy(), true=exp.Literal.string("straddles_mark"))],
        default=exp.Literal.string("retry"))),
        exp.If(this=d("id_written"), true=exp.Literal.string("repeat"))],
        default=exp.Literal.string("late"))
    row = {"topic": TOPIC.copy(), "commit_id": commit.copy(), "statement_id": STATEMENT_ID.copy(), "producer": d("p"),
           "sequence_id": d("s"), "highest_sequence_id": d("h"), "reason": reason, "dropped_at": now.copy(),
           "entry": d("e") if columns else exp.cast(exp.null(), "string"), "attempt": ATTEMPT.copy()}
    select = exp.select(*[exp.alias_(row[c], c) for c in DROPPED]).from_(dropped.subquery("d"))
    if marks is not None:
        select = select.join(source(marks, "m"), join_type="left", on=exp.column("producer", table="m").eq(d("p")))
    return exp.insert(select, catalog_table("seqdedup_dropped"), columns=[exp.to_identifier(c) for c in DROPPED])
