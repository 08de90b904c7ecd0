"""The window plan (Spark's): the statement's rows joined to the marks, distributed by producer, decided, numbered
and counted by running windows in one pass and one job (see the package's overview)."""
from __future__ import annotations

import dataclasses

from sqlglot import exp

from seqdedup.catalog import ids
from seqdedup.catalog.names import HIGHEST, PRODUCER, SEQUENCE_ID

from .common import (ACCEPTED, COPIED, COPY, DROPPED_ENTRY, FIRST_COPY, FIRST_POSITION, IDS, INVALID, LAST,
                     LAST_POSITION, MARK, POSITION, SEEN, SENT, TOP, WRITTEN, WRITTEN_FINGERPRINT, above, above_all,
                     at_or_below_any, insert_rows, invalid, no_mark, ordered, source, unwritten_ids, working_marks)
from .spread import FIRST_LOOK, LARGEST, OUTCOME_SUMS, RANGE, REACH, first_look, largest_producers, spread_rows
from .steps import CARRIED, VALUES, Step, plan_of


def marks_lookup(marks: exp.Expression, producer: exp.Expression,
                 id_parts: int | None = None) -> tuple[exp.Expression, exp.Expression]:
    """A producer's mark in a map of marks (producer -> mark as a string, ``-1``, or ``''`` for composite ids:
    none), as the topic's id type, and whether the map holds the producer, in Spark's functions (a missing key is
    NULL, not an error, in ANSI mode too).

    Example:
        >>> mark, known = marks_lookup(exp.Placeholder(this="m"), exp.column("p"))
        >>> mark.sql("spark"), known.sql("spark")
        ('CAST(TRY_ELEMENT_AT(:m, p) AS BIGINT)', 'MAP_CONTAINS_KEY(:m, p)')
    """
    mark = exp.func("try_element_at", marks.copy(), producer.copy())
    # (composite ids: the map holds them as the statement works on them, ``EngineAdapter.marks_map``)
    return (exp.cast(mark, ids.id_type(id_parts)) if id_parts is None else mark,
            exp.func("map_contains_key", marks.copy(), producer.copy()))


def window_decisions(values: exp.Select, marks: exp.Expression | None, order: list[exp.Ordered], *, base: int,
                     partitions: int | None, number: exp.Expression, checked: bool = True,
                     late: bool = False, seen: bool = False, gather: bool = False,
                     refuse: exp.Expression | None = None, ranges: exp.Expression | None = None,
                     id_parts: int | None = None, held: exp.Expression | None = None) -> exp.Select:
    """Every entry with its decision, position and its producer's running counts (the window plan).

    ``values``' rows are joined to ``marks`` and distributed over ``partitions`` by producer (a hint, for engines
    that take one: None for the others), then two windows over each producer's entries in arrival order ``order``:

    - the first decides: an entry is new when its lowest id is above the mark and every earlier entry's highest
      id; a duplicate when it is at or below the mark or an earlier entry's lowest id; else (only a batch entry
      that straddles can be neither) undecided, NULL;
    - ``number`` (see ``EngineAdapter.row_number``) numbers the rows after ``base``; the second window keeps the
      running counts. At a producer's ``LAST`` row they are its totals.

    ``checked`` false (deduplication disabled, R10): every valid entry is new.

    ``seen``: ``marks`` holds a row for every producer the statement carried when it was read first (a semi-join
    of the state: ``carried_producers``), NULL where it has no mark; ``SEEN`` says whether the entry's producer is
    among them (an entry whose producer is not came from a source that changed between the reads).

    ``marks`` is a table ``(producer, sequence_id)``, joined; or an expression of a map from producer to mark (a
    string: map literals take one type), looked up per entry with no join (``marks_lookup``: Spark's functions).
    ``gather``: the statement is small enough for one task; its rows are gathered into one partition (a COALESCE
    hint: no shuffle, so the whole statement runs as one stage) rather than distributed over ``partitions``.

    ``base`` may be an expression of another numeric type than BIGINT (``EngineAdapter.constant``): positions are
    cast to BIGINT.

    ``refuse``: an expression that fails the query (an engine's ``raise_error``), evaluated for an invalid entry
    (R4) as its row is read, before the rows are distributed and sorted. A statement with an invalid entry then
    fails at once, where it would otherwise sort and stage all its rows before the metrics (``INVALID``) showed it:
    ten million entries of one producer, on Spark, 27 s before the error, against about one. Without it, ``INVALID``
    is counted and the runner refuses the statement after the pass.

    ``ranges`` (an unordered statement with a producer that holds most of it: ``sql.plan.spread``): the ranges each
    entry reaches, an expression of its producer and ids; the rows are distributed by range, the windows run over a
    producer's entries of one range, with a copy of each earlier entry that reaches into it (never written, nor
    counted), and a producer's ``LAST`` row is that of each of its ranges (the runner sums them).

    ``late`` (an ordered statement) also counts ``out_of_order`` in the same pass: the producer's distinct lowest
    ids above the mark, less the entries written (each written entry has its own lowest id). The distinct ids are
    a set per producer over the whole partition (Spark has no DISTINCT window function), which the sort by
    producer already serves: no second sort, no second read of the source. (The set holds one statement's ids of
    one producer.) A window's aggregate over a whole partition is copied into each of its rows, so every entry
    carries its producer's set: cheap for BIGINT ids, not for composite ids' text (5M entries of 10,000 producers
    on Spark ``local[2]``: 32 s against 5 s, and 30 s for a STRUCT of the parts). Those count each id's first
    copy above the mark instead (``FIRST_COPY``: a row number over the producer's entries of the id, one more
    sort), summed over the producer's entries; where the plan stages its dropped entries apart, the runner counts
    them after the write from those instead (``counts_late``, ``late_staged``), and ``late`` is not asked for.

    ``held`` (payload conflicts judged, R18, in a statement without ORDER BY or batch entries): an entry's
    fingerprint over the rows' columns. Each entry then carries ``WRITTEN_FINGERPRINT``: that of the last entry
    written up to it that has a copy after it (``COPIED``). For an entry dropped above its mark, that is the entry
    the statement wrote with its id: arrival is id order, the first of an id's copies is the one written, and only
    its copies come between it and the entry. So the judgement of a statement's repeats needs no second read of
    what it wrote, and a statement without repeats fingerprints nothing (every written entry fingerprinted cost
    12% more CPU where nothing was dropped).

    Example (C02 and a producer with a mark, on DuckDB):
        >>> import duckdb
        >>> from seqdedup.sql.rewrite import expand_is_not_dup
        >>> con = duckdb.connect()
        >>> _ = con.execute("CREATE TABLE s AS SELECT * FROM (VALUES ('p', 1, 5, 0), ('p', 4, 8, 1), ('p', 6, 6, 2), "
        ...                 "('q', 3, 3, 3), ('q', 9, 9, 4)) AS v(p, lo, hi, a)")
        >>> _ = con.execute("CREATE TABLE m AS SELECT 'q' AS producer, 5 AS sequence_id")
        >>> import sqlglot
        >>> d = expand_is_not_dup(sqlglot.parse_one(
        ...     "INSERT INTO t SELECT a FROM s WHERE is_not_dup(p, lo, hi) ORDER BY a", read="spark"))
        >>> plan = window_decisions(d.values, exp.table_("m"), d.order, base=10, partitions=None,
        ...                         number=exp.Window(this=exp.RowNumber()))
        >>> con.sql(f"SELECT __sd_producer, __sd_sequence_id, __sd_accepted, __sd_last, __sd_written "
        ...         f"FROM ({plan.sql('duckdb')}) ORDER BY __sd_o0").fetchall()
        [('p', 1, True, False, 1), ('p', 4, None, False, 1), ('p', 6, None, True, 1), ('q', 3, False, False, 0), ('q', 9, True, True, 1)]

    (p's (4..8) straddles: one pass leaves it and what follows it undecided; the exceptions plan settles them.)
    """
    if ranges is not None and late:
        raise ValueError("an ordered statement is not spread over ranges: out_of_order is one set per producer")
    if held is not None and late:
        raise ValueError("an entry's written copy precedes it only in id order (no ORDER BY)")
    p, s, h, mark, accepted = (exp.column(c) for c in (PRODUCER, SEQUENCE_ID, HIGHEST, MARK, ACCEPTED))
    joined = with_marks(source(values, "v"), marks, seen, id_parts)
    # computed as the row is read (below the distribution and the sort), so that ``refuse`` fails the query there
    joined = joined.select(checked_entry(refuse, id_parts))
    bad = exp.column(INVALID)
    if ranges is not None:
        joined = spread_rows(joined, ranges)
    distributed(joined, gather, partitions, PRODUCER if ranges is None else RANGE)
    parts = [PRODUCER] if ranges is None else [PRODUCER, RANGE]

    def over(function: exp.Expression, frame: str) -> exp.Window:
        start, end = {"earlier": ("UNBOUNDED", "1"), "running": ("UNBOUNDED", "CURRENT ROW")}[frame]
        return exp.Window(this=function, partition_by=[exp.column(c) for c in parts], order=exp.Order(
            expressions=ordered(order)), spec=exp.WindowSpec(
            kind="ROWS", start=start, start_side="PRECEDING", end=end,
            end_side="PRECEDING" if end == "1" else None))

    if checked:     # (a bound not known is skipped, as GREATEST skips NULLs: ``above_all``)
        new = above_all(s, mark, over(exp.Max(this=h.copy()), "earlier"))
        old = at_or_below_any(s, mark, over(exp.Max(this=s.copy()), "earlier"))
        decide = exp.Case(ifs=[exp.If(this=bad.copy(), true=exp.false()), exp.If(this=new, true=exp.true()),
                               exp.If(this=old, true=exp.false())])
    else:
        decide = exp.not_(bad.copy())
    sent = exp.Count(this=exp.Star())
    if ranges is not None:      # (a copy of an entry in a later range is never written, nor counted)
        copy = exp.column(REACH) > 0
        decide = exp.Case(ifs=[exp.If(this=copy, true=exp.false())], default=decide)
        sent = exp.func("count_if", exp.not_(copy.copy()))

    def following(value: exp.Expression) -> exp.Window:
        """``value`` of the next entry of the producer (of its range) in arrival order."""
        return exp.Window(this=exp.func("lead", value), partition_by=[exp.column(c) for c in parts],
                          order=exp.Order(expressions=ordered(order)))

    last = following(exp.convert(1)).is_(exp.null())
    first = exp.select("*", exp.alias_(decide, ACCEPTED)).from_(joined.subquery("c"))
    if held is not None:    # (whether the next entry has this one's id: only such a written entry is fingerprinted)
        first = first.select(exp.alias_(exp.func("coalesce", following(s.copy()).eq(s.copy()), exp.false()), COPIED))
    if late and id_parts is None:
        higher = exp.Case(ifs=[exp.If(this=above(s, mark), true=s.copy())])
        first = first.select(exp.alias_(exp.func("size", exp.Window(this=exp.func("collect_set", higher),
                                                                    partition_by=[p.copy()])), IDS))
    elif late:      # (composite ids: each id's first copy above the mark, counted below)
        first_copy = exp.Window(this=exp.RowNumber(), partition_by=[p.copy(), s.copy()],
                                order=exp.Order(expressions=ordered(order)))
        counted = exp.Case(ifs=[exp.If(this=exp.and_(above(s, mark), first_copy.eq(1)), true=exp.convert(1))],
                           default=exp.convert(0))
        first = first.select(exp.alias_(counted, FIRST_COPY))
    numbered = positioned(first.subquery("d"), base, number)

    # (the last row and the running counts in one SELECT, so in one sort: entries equal in their order, copies of one
    # entry without ORDER BY, may come in another order in a second sort, DuckDB's, and the row a first sort called
    # last would then not hold the totals)
    running = exp.select(
        "*",
        exp.alias_(last, LAST), exp.alias_(over(sent, "running"), SENT),
        exp.alias_(over(exp.func("count_if", accepted.copy()), "running"), WRITTEN),
        exp.alias_(over(exp.Min(this=when_accepted(exp.column(POSITION))), "running"), FIRST_POSITION),
        exp.alias_(over(exp.Max(this=when_accepted(exp.column(POSITION))), "running"), LAST_POSITION),
        exp.alias_(over(exp.Max(this=when_accepted(h.copy())), "running"), TOP),
    ).from_(numbered.subquery("n"))
    if late and id_parts is not None:
        running.select(exp.alias_(exp.Window(this=exp.Sum(this=exp.column(FIRST_COPY)), partition_by=[p.copy()]), IDS),
                       copy=False)
    if held is not None:    # (in the running counts' frame: one more aggregate, no frame of its own)
        copied = exp.Case(ifs=[exp.If(this=exp.and_(accepted.copy(), exp.column(COPIED)), true=held.copy())])
        running.select(exp.alias_(over(exp.IgnoreNulls(this=exp.LastValue(this=copied)), "running"),
                                  WRITTEN_FINGERPRINT), copy=False)
    return running


def positioned(rows: exp.Expression, base, number: exp.Expression) -> exp.Select:
    """``rows`` with each entry's position (``POSITION``): ``base`` plus the engine's ``number`` of its row, as a
    BIGINT (``base`` may be of another numeric type: ``EngineAdapter.constant``)."""
    return exp.select("*", exp.alias_(exp.cast(exp.Add(this=exp.convert(base), expression=number), "bigint"),
                                      POSITION)).from_(rows)


def when_accepted(value: exp.Expression) -> exp.Case:
    """``value`` where the entry is written (``ACCEPTED``), else NULL."""
    return exp.Case(ifs=[exp.If(this=exp.column(ACCEPTED), true=value)])


def with_marks(rows: exp.Expression, marks: exp.Expression | None, seen: bool,
               id_parts: int | None) -> exp.Select:
    """``rows`` (alias ``v``) with each entry's mark (``MARK``) and, with ``seen``, whether its producer is among
    the marks' (``SEEN``): ``marks`` joined where it is a table, looked up where it is a map, none where None (see
    ``window_decisions``)."""
    if isinstance(marks, exp.Table):
        joined = exp.select("v.*", exp.alias_(exp.column("sequence_id", table="m"), MARK)).from_(rows).join(
            source(working_marks(marks, id_parts), "m"), join_type="left",
            on=exp.column("producer", table="m").eq(exp.column(PRODUCER, table="v")))
        known = exp.not_(exp.column("producer", table="m").is_(exp.null()))
    elif marks is not None:
        mark_of, known = marks_lookup(marks, exp.column(PRODUCER, table="v"), id_parts)
        joined = exp.select("v.*", exp.alias_(mark_of, MARK)).from_(rows)
    else:
        joined = exp.select("v.*", exp.alias_(no_mark(id_parts), MARK)).from_(rows)
    return joined.select(exp.alias_(known, SEEN)) if seen else joined


def checked_entry(refuse: exp.Expression | None, id_parts: int | None) -> exp.Expression:
    """``INVALID``: whether the row's entry breaks R4; with ``refuse``, an expression that fails the query there."""
    bad = invalid(*(exp.column(c) for c in (PRODUCER, SEQUENCE_ID, HIGHEST)), id_parts)
    return exp.alias_(bad if refuse is None else exp.Case(ifs=[exp.If(this=bad, true=refuse.copy())],
                                                          default=exp.false()), INVALID)


def distributed(rows: exp.Select, gather: bool, partitions: int | None, by: str) -> None:
    """Set the hint that distributes ``rows`` (see ``window_decisions``): gathered into one task, or over
    ``partitions`` by the column ``by`` (by range alone where there are ranges: a producer the engine knows to be
    one constant drops out of the windows' partitions, and a distribution by (producer, range) would then be made
    again, by range)."""
    if gather:
        rows.set("hint", exp.Hint(expressions=[exp.Anonymous(this="COALESCE", expressions=[exp.convert(1)])]))
    elif partitions is not None:
        rows.set("hint", exp.Hint(expressions=[exp.Anonymous(this="REPARTITION", expressions=[
            exp.convert(partitions), exp.column(by)])]))


def key_decisions(values: exp.Select, marks: exp.Expression | None, order: list[exp.Ordered], *, base: int,
                  partitions: int | None, number: exp.Expression, checked: bool = True, seen: bool = False,
                  gather: bool = False, refuse: exp.Expression | None = None,
                  held: exp.Expression | None = None) -> exp.Select:
    """``window_decisions`` for a statement of keys (R20) whose outcome is reported together (``outcome_together``),
    with the same columns.

    A key's entries all have the id 0, so its first copy in arrival order is written where the key has no mark, and
    every other entry is dropped: which copy is first does not depend on the mark. The copies are therefore
    numbered by a window over each key's entries before the join to the marks, and the join takes the rows in the
    window's order: Spark sorts the statement's rows once, where joining first sorts them for the join and again
    for the window, and the running counts' window over the joined rows goes (5M keys against a window of 10M,
    ``local[2]``: the statement 51.3 s and 51.8 s against 63.9 s and 70.1 s, docs/performance.md). The positions are
    numbered below the join too, in the window's stage, over the partitions ``number`` counts on.

    No running count is kept: each row counts itself (``LAST`` true, ``SENT`` 1, ``WRITTEN`` 1 where written), and
    the outcome's sums over the ``LAST`` rows are the statement's totals, all that a statement of keys reports.
    Its ``out_of_order`` is 0: a key has one id.

    ``held`` (payload conflicts judged, R18): an entry's fingerprint over the rows' columns. Each entry then carries
    ``WRITTEN_FINGERPRINT``, that of its key's first copy, in the same window as the copies' numbers (so in the
    same sort): for a copy dropped as a repeat of a new key, the entry the statement wrote, which its judgement then
    does not read again (``split_write``).

    Example (a key written before, and a new key sent twice, on DuckDB):
        >>> import duckdb
        >>> from seqdedup.sql.rewrite import expand_is_not_dup
        >>> con = duckdb.connect()
        >>> _ = con.execute("CREATE TABLE s AS SELECT * FROM (VALUES ('k1', 0), ('k2', 1), ('k1', 2)) AS v(k, a)")
        >>> _ = con.execute("CREATE TABLE m AS SELECT 'k2' AS producer, 0 AS sequence_id")
        >>> import sqlglot
        >>> d = expand_is_not_dup(sqlglot.parse_one("INSERT INTO t SELECT a FROM s WHERE is_not_dup(k, 0)"))
        >>> plan = key_decisions(d.values, exp.table_("m"), d.order, base=10, partitions=None,
        ...                      number=exp.Window(this=exp.RowNumber()))
        >>> con.sql(f"SELECT __sd_producer, __sd_accepted, __sd_written, __sd_first_position IS NOT NULL "
        ...         f"FROM ({plan.sql('duckdb')}) ORDER BY __sd_v0").fetchall()
        [('k1', True, 1, True), ('k2', False, 0, False), ('k1', False, 0, False)]
    """
    read = exp.select("v.*", checked_entry(refuse, None)).from_(source(values, "v"))
    distributed(read, gather, partitions, PRODUCER)
    def over(function: exp.Expression) -> exp.Window:
        return exp.Window(this=function, partition_by=[exp.column(PRODUCER)],
                          order=exp.Order(expressions=ordered(order)))

    copies = exp.select("*", exp.alias_(over(exp.RowNumber()), COPY)).from_(read.subquery("c"))
    if held is not None:
        copies.select(exp.alias_(over(exp.FirstValue(this=held.copy())), WRITTEN_FINGERPRINT), copy=False)
    joined = with_marks(positioned(copies.subquery("n"), base, number).subquery("v"), marks, seen, None)
    bad, mark = exp.column(INVALID), exp.column(MARK)
    new = exp.and_(exp.column(COPY).eq(1), above(exp.column(SEQUENCE_ID), mark)) if checked else exp.true()
    decide = exp.and_(exp.not_(bad), new)
    return exp.select(
        "*", exp.alias_(exp.true(), LAST), exp.alias_(exp.convert(1), SENT),
        exp.alias_(exp.Case(ifs=[exp.If(this=exp.column(ACCEPTED), true=exp.convert(1))], default=exp.convert(0)),
                   WRITTEN),
        exp.alias_(when_accepted(exp.column(POSITION)), FIRST_POSITION),
        exp.alias_(when_accepted(exp.column(POSITION)), LAST_POSITION),
        exp.alias_(when_accepted(exp.column(HIGHEST)), TOP),
    ).from_(exp.select("*", exp.alias_(decide, ACCEPTED)).from_(joined.subquery("d")).subquery("k"))


def window_outcome(late: bool = False, id_parts: int | None = None) -> list[exp.Expression]:
    """The per-producer outcome (``OUTCOME``) read off a producer's ``LAST`` row of ``window_decisions`` (with
    ``late``, of one that counted ``out_of_order``; an unordered statement has none: arrival is id order), its
    highest composite id (``id_parts``) as the topic stores it."""
    return [exp.alias_(exp.column(PRODUCER), "producer"), exp.alias_(exp.column(SENT), "sent"),
            exp.alias_(exp.column(WRITTEN), "written"),
            exp.alias_(exp.Sub(this=exp.column(SENT), expression=exp.column(WRITTEN)), "duplicates"),
            exp.alias_(exp.column(FIRST_POSITION), "first_position"),
            exp.alias_(exp.column(LAST_POSITION), "last_position"),
            exp.alias_(ids.stored(exp.column(TOP), id_parts), "highest"),
            exp.alias_(exp.Sub(this=exp.column(IDS), expression=exp.column(WRITTEN)) if late else exp.convert(0),
                       "out_of_order")]


def outcome_together() -> list[exp.Expression]:
    """Every producer's outcome at once: ``window_outcome`` less the producer, aggregated over the ``LAST`` rows as
    ``OUTCOME_SUMS`` combines them. For a statement of keys (R20), whose counts are reported together: a row per
    producer would be a row per entry, gathered by the driver. (No late ids: a key has one, ``key_decisions``.)

    Example:
        >>> outcome_together()[0].sql("spark")
        'SUM(CASE WHEN __sd_last THEN __sd_sent END) AS sent'
    """
    how = {"sum": exp.Sum, "min": exp.Min, "max": exp.Max}
    return [exp.alias_(how[OUTCOME_SUMS[e.alias]](this=exp.Case(ifs=[exp.If(this=exp.column(LAST), true=e.unalias())])),
                       e.alias) for e in window_outcome()[1:]]


def window_metrics(seen: bool = False) -> dict[str, exp.Expression]:
    """Aggregates over every row of ``window_decisions``: what the runner checks before it publishes (with
    ``seen``, also how many entries have a producer the first read did not carry)."""
    accepted = exp.column(ACCEPTED)
    unseen = {"unseen": exp.func("count_if", exp.not_(exp.column(SEEN)))} if seen else {}
    return {**unseen,
        "invalid": exp.func("count_if", exp.column(INVALID)),
        "undecided": exp.func("count_if", accepted.is_(exp.null())),
        "end": exp.Max(this=exp.Case(ifs=[exp.If(this=accepted.copy(), true=exp.column(POSITION))])),
        "written": exp.func("count_if", accepted.copy()),
    }


def fates(decided: exp.Select, ranges: bool) -> exp.Select:
    """``window_decisions``' rows with their fate, for a write that stages the dropped entries apart from the
    written ones (``DROPPED_ENTRY``): every entry not written, but a range's copy of an earlier entry
    (``ranges``), which is no entry of its own. (An undecided entry is neither: such a statement's rows are
    discarded.)"""
    dropped = exp.not_(exp.column(ACCEPTED))
    if ranges:
        dropped = exp.and_(dropped, exp.column(REACH).eq(0))
    return exp.select("*", exp.alias_(dropped, DROPPED_ENTRY)).from_(decided.subquery("f"))


def split_write(i) -> exp.Insert:
    """The write of the written and the dropped entries at once, each row with its fate (``DROPPED_ENTRY``) last, for an
    engine that stages them apart. A dropped entry is never a topic row, and has no position: its ``_position``
    carries its producer's mark when the statement began instead, the one thing the ledger's reason needs beyond
    the entry (R16); for composite ids (R19), whose mark is no BIGINT, its ``_highest_sequence_id`` does (such an
    entry's highest id is its id). Every expression reads a column of the decided rows: an engine may apply them to
    those rows as they are (Spark Connect's write of an observed frame).

    Where the decision carries ``WRITTEN_FINGERPRINT`` (``Inputs.held``: no batch entries, so a dropped entry's
    highest id is its id), a dropped entry carries its own fingerprint in ``_position`` and, above its mark, that of
    its id's written entry in ``_highest_sequence_id`` (NULL at or below it: then its mark is not needed,
    ``sql.plan.ledger.dropped_staged``), as text where the topic's ids are composite. Its payload is then judged
    from these, with no reading of its columns."""
    parts = i.statement.id_parts
    kept = POSITION if parts is None else HIGHEST
    marked = ids.stored(exp.Case(ifs=[exp.If(this=exp.column(ACCEPTED), true=exp.column(kept))],
                                 default=exp.column(MARK)), parts)
    rows = i.tables["accepted"] if "accepted" in i.tables else exp.select("*").from_(i.table("decided")).where(
        exp.or_(exp.column(ACCEPTED), exp.column(DROPPED_ENTRY)))
    carried = {"highest" if parts is not None else "position": marked}
    if i.statement.keyed:     # (a key's written entry carries its position as its highest id: ``insert_rows``)
        # (where ``held``, a key's copy dropped with no mark, a repeat, carries its written copy's fingerprint in
        # ``_highest_sequence_id``, which a dropped key's does not need: its highest id is its id, 0. Its own
        # fingerprint is not staged: the judgement reads its columns, and the keys at their marks by position)
        copied = [exp.If(this=above(exp.column(SEQUENCE_ID), exp.column(MARK)), true=exp.column(WRITTEN_FINGERPRINT))]
        carried["highest"] = exp.Case(ifs=[exp.If(this=exp.column(ACCEPTED), true=exp.column(POSITION)),
                                           *(copied if i.held is not None else [])], default=exp.column(HIGHEST))
    elif i.held is not None:
        carried["position"] = exp.Case(ifs=[exp.If(this=exp.column(ACCEPTED), true=exp.column(POSITION))],
                                       default=i.held.copy())
        written = exp.column(WRITTEN_FINGERPRINT)
        carried["highest"] = exp.Case(ifs=[
            exp.If(this=exp.column(ACCEPTED), true=ids.stored(exp.column(HIGHEST), parts)),
            exp.If(this=above(exp.column(SEQUENCE_ID), exp.column(MARK)),
                   true=written if parts is None else exp.cast(written, "text"))])
    values = i.values
    if i.bare:      # (a dropped entry's columns, no part of its ledger row nor judged, are not written: R16's keys)
        values = [exp.alias_(exp.Case(ifs=[exp.If(this=exp.column(DROPPED_ENTRY), true=exp.null())],
                                      default=exp.column(v)), v) for v in values]
    insert = insert_rows(i.topic, i.targets, values, rows, i.publish_time, i.commit, id_parts=i.statement.id_parts,
                         **carried)
    insert.expression.select(DROPPED_ENTRY, copy=False)
    insert.this.expressions.append(exp.to_identifier(DROPPED_ENTRY))
    return insert


#: The window plan's steps (see ``steps``). The engine reads the metrics and the outcome off the decided rows as it
#: writes them (Spark observes them in the same job), and writes only when the metrics allow.
STEPS = plan_of(
    dataclasses.replace(VALUES, name="only when the one pass fails to run: the statement's rows, read once into a "
                                     "table, and the steps below over it"),
    CARRIED,
    Step("first look", "a large unordered statement: its first entries' producers (one may hold most of it)",
         lambda i: first_look(i.read.keys, FIRST_LOOK)),
    Step("largest producers", "where one may: the largest producers' ids (such a producer's entries are spread "
                              "over ranges of its ids)",
         lambda i: largest_producers(i.read.keys, LARGEST, i.statement.id_parts)),
    Step("decide", "decide, number and count, in one pass (where the ledger reads them: with each entry's fate; "
                   "a statement of keys: its copies numbered before the marks are joined)",
         lambda i: _fated(i, _decided(i))),
    Step("metrics", "metrics, checked before publishing", lambda i: exp.select(
        *[exp.alias_(e, k) for k, e in window_metrics(i.seen).items()]).from_(i.table("decided"))),
    Step("outcome", "outcome per producer (its last row; all at once: a statement of keys)",
         lambda i: _outcome(i)),
    Step("write", "write", lambda i: insert_rows(i.topic, i.targets, i.values, _accepted(i), i.publish_time, i.commit,
                                                 keyed=i.statement.keyed, id_parts=i.statement.id_parts)),
    Step("split write", "where the ledger reads them: write, the dropped entries staged apart", split_write),
)


def late_after_write(i) -> bool:
    """Whether an ordered statement's ``out_of_order`` is counted after the write, from the entries it staged
    (``late_staged``): where its ids are composite and its dropped entries are staged apart. The pass would sort
    the rows a second time to count them (``FIRST_COPY``)."""
    return i.checked and i.statement.ordered and i.split and i.statement.id_parts is not None


def counts_late(i) -> bool:
    """Whether the decision's pass counts an ordered statement's ``out_of_order`` (not ``late_after_write``)."""
    return i.checked and i.statement.ordered and not late_after_write(i)


def late_staged(dropped: exp.Expression, written: exp.Expression) -> exp.Select:
    """Per producer, ``out_of_order`` of an ordered statement whose split write staged its dropped entries apart
    (``split_write``: each carries its producer's mark as its highest id, composite ids): the distinct ids above
    the mark of its dropped entries that none of the rows it wrote has. The dropped entries are few, so this costs
    less than counting the distinct ids of every entry as the rows are decided (composite ids: ``FIRST_COPY``, a
    second sort).

    Example:
        >>> import duckdb
        >>> con = duckdb.connect()
        >>> _ = con.execute("CREATE TABLE d AS SELECT * FROM (VALUES ('p', 'a5', 'a2'), ('p', 'a5', 'a2'), "
        ...                 "('p', 'a4', 'a2'), ('p', 'a3', 'a2'), ('p', 'a1', 'a2'), ('q', 'a7', NULL)) "
        ...                 "AS v(_producer, _sequence_id, _highest_sequence_id)")
        >>> _ = con.execute("CREATE TABLE w AS SELECT * FROM (VALUES ('p', 'a4'), ('p', 'a6')) AS v(_producer, "
        ...                 "_sequence_id)")
        >>> sorted(con.sql(late_staged(exp.table_("d"), exp.table_("w")).sql("duckdb")).fetchall())
        [('p', 2), ('q', 1)]
    """
    x = (lambda c: exp.column(c, table="x"))
    return unwritten_ids(dropped, written, above(x("_sequence_id"), x("_highest_sequence_id")), "out_of_order",
                         producer="_producer", sequence_id="_sequence_id")


def _decided(i) -> exp.Select:
    if i.together:
        return key_decisions(i.read.values, i.marks, i.statement.order, base=i.base, partitions=i.partitions,
                             number=i.number, checked=i.checked, seen=i.seen, gather=i.gather, refuse=i.refuse,
                             held=i.held)
    return window_decisions(i.read.values, i.marks, i.statement.order, base=i.base, partitions=i.partitions,
                            number=i.number, checked=i.checked, late=counts_late(i), seen=i.seen, gather=i.gather,
                            refuse=i.refuse, ranges=i.ranges, id_parts=i.statement.id_parts, held=i.held)


def _outcome(i) -> exp.Select:
    if i.together:
        return exp.select(*outcome_together()).from_(i.table("decided"))
    return exp.select(*window_outcome(counts_late(i), i.statement.id_parts)).from_(i.table("decided")).where(
        exp.column(LAST))


def _fated(i, decided: exp.Select) -> exp.Select:
    return fates(decided, i.ranges is not None) if i.split else decided


def _accepted(i) -> exp.Expression:
    """The rows the window plan writes: the engine gives them (``accepted``) where it filters them itself."""
    return i.tables["accepted"] if "accepted" in i.tables else exp.select("*").from_(i.table("decided")).where(
        exp.column(ACCEPTED))
