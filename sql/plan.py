"""The plan of an ``INSERT ... WHERE is_not_dup(...)``: every step as a pure tree builder, no engine calls.

A statement arrives split by ``sql.rewrite.expand_is_not_dup`` into ``keys`` (each entry's producer, lowest and
highest id, and its ORDER BY values) and ``values`` (the same rows with the values to write). The producers' marks
come from memory (``seqdedup.topic_state``), as a small relation ``marks(producer, sequence_id)``. Three plans decide
the same thing (R1, R2) at different costs:

**The window plan** (one pass; Spark's): ``values`` joined to the marks, distributed by producer, sorted in arrival
order, decided by running windows, numbered, written. Running aggregates in the same sort give the per-producer
counts at each producer's last row, so the statement reads its source once and runs one job::

    values ⋈ marks ─► distribute by producer ─► window: decide, count ─► position ─► write accepted
                                                                         └─► per-producer counts (last rows)

A batch entry that straddles the mark is left undecided by one pass (``ACCEPTED`` NULL); the statement then runs
the exceptions plan, where only the producers that straddle pay for more rounds.

**The row plan** (DuckDB's: its tables number their rows): ``values`` read once into a table beside each row's mark;
the repeats (no ORDER BY, no batch entries: a hash aggregate) or the candidates the windowed decision rejects are
removed from it; every candidate left is written, at ``base`` plus its row's place in the table; the outcome is one
aggregate of what is left::

    values ⋈ marks ─► rows (read once) ─► repeats / rejected removed ─► write candidates ─► outcome

**The exceptions plan** (narrow decision, then one filtered write; Spark's for a straddle): the statement's rows are read once
into a table (``values``: a source read again may give other rows, such as a sample, ``rand()`` or a file replaced
meanwhile, and the plan reads its rows several times). The decision runs on the keys alone, and what it finds is
almost always small: the entries the simple rule "above the mark" gets wrong (repeats inside the statement,
entries that arrived after a higher id). The write is then a filtered copy of ``values``::

    SELECT ─► values (read once)
    keys ⋈ marks ─► producers (per producer: counts, id range, positions reserved)
    keys ─► exceptions: repeated keys (no ORDER BY, no batch entries: a hash aggregate)
                        or the keys the windowed decision rejects or must write once (otherwise)
    values ─► candidates not in exceptions ∪ one row per repeated key ─► positions ─► write

Positions (R7 position: unique, increasing in commit order, not dense). The window plan numbers rows in parallel:
row ``r`` of partition ``i`` of ``n`` gets ``base + r * n + i + 1``, with no global sort. The exceptions plan gives
each producer a range after ``base`` as wide as its ids (``s - smallest + 1``), or as its entries when its ids are
too sparse for that, so an entry's position follows from its own id.
"""
from __future__ import annotations

import functools

import sqlglot
from sqlglot import exp

from seqdedup.catalog.names import HIGHEST, PRODUCER, SEQUENCE_ID, SYSTEM

# Columns the steps add. Their prefix (catalog.names.RESERVED) is refused in user columns (seqdedup/statement.py),
# so they cannot collide.
MARK = "__sd_mark"              # the producer's persisted mark before the statement (NULL: none)
ACCEPTED = "__sd_accepted"      # the decision: TRUE written, FALSE duplicate, NULL undecided (a straddle)
POSITION = "__sd_position"      # the entry's position
INVALID = "__sd_invalid"        # the entry breaks R4 (NULL producer or id, negative id, highest below lowest)
LAST = "__sd_last"              # the producer's last entry in arrival order: its running counts are its totals
UNSEEN = "__sd_unseen"          # entries of a producer that is not among the marks' (carried producers' marks)
SEEN = "__sd_seen"              # the entry's producer is among the marks' (when they are the carried producers')
IDS = "__sd_ids"                # the producer's distinct lowest ids above its mark, in the whole statement
SENT, WRITTEN = "__sd_sent", "__sd_written"
FIRST_POSITION, LAST_POSITION, TOP = "__sd_first_position", "__sd_last_position", "__sd_top"
#: The per-producer outcome of a statement, in the order the run log and results take it. ``out_of_order`` counts
#: the duplicates that were no repeat: the distinct lowest ids, above the mark the statement began with, that no
#: entry was written with (they arrived after a higher id, or in a batch entry that overlapped a written one).
OUTCOME = ["producer", "sent", "written", "duplicates", "first_position", "last_position", "highest", "out_of_order"]
#: The message of the engine error that ``window_decisions``' ``refuse`` raises: the runner knows it by this, and
#: names the invalid entries itself (seqdedup/statement.py).
REFUSED = "seqdedup: an entry is invalid (R4)"

#: A producer's ids are "dense" when they span at most this many positions per entry (plus SLACK); its positions
#: then follow from its ids. A sparser producer (ids 0 and 2^62, say) is numbered by rank instead.
SPREAD, SLACK = 4, 64


@functools.lru_cache(maxsize=None)
def _template(sql: str) -> exp.Expression:
    return sqlglot.parse_one(sql, read="spark")


def _parse(sql: str, **tables: exp.Expression) -> exp.Select:
    """Spark SQL text of a fixed-shape step, with ``:name`` placeholders for tables and values (given as trees);
    parsed once per process."""
    return exp.replace_placeholders(_template(sql), **tables)


def _source(query: exp.Expression, alias: str) -> exp.Expression:
    return query.subquery(alias) if isinstance(query, exp.Query) else query.as_(alias)


def _order(order: list[exp.Ordered], table: str | None = None) -> list[exp.Ordered]:
    out = []
    for o in order:
        o = o.copy()
        if table:
            o.set("this", exp.column(o.this.name, table=table))
        out.append(o)
    return out


#: The highest sequence id (R4: ids are signed 64-bit); an engine with wider integers could carry a larger one.
MAX_ID = 2**63 - 1


def invalid(p: exp.Expression, s: exp.Expression, h: exp.Expression) -> exp.Expression:
    """R4 for one entry: a NULL producer or id, a negative id, an id past signed 64-bit, or a highest id below the
    lowest.

    Example:
        >>> invalid(exp.column("p"), exp.column("s"), exp.column("h")).sql()
        'p IS NULL OR s IS NULL OR s < 0 OR s > 9223372036854775807 OR h > 9223372036854775807 OR h < s'
    """
    return exp.or_(p.is_(exp.null()), s.is_(exp.null()), s < 0, s.copy() > MAX_ID, h.copy() > MAX_ID, h < s.copy())


# --- the window plan ------------------------------------------------------------------------------------------------

def refusal(function: str) -> exp.Expression:
    """An expression that fails the query with ``REFUSED``, in the engine's function that raises an error.

    Example:
        >>> refusal("raise_error").sql("spark")
        "RAISE_ERROR('seqdedup: an entry is invalid (R4)')"
    """
    return exp.Anonymous(this=function, expressions=[exp.Literal.string(REFUSED)])


def marks_lookup(marks: exp.Expression, producer: exp.Expression) -> tuple[exp.Expression, exp.Expression]:
    """A producer's mark in a map of marks (producer -> mark as a string, ``-1``: none), and whether the map holds
    the producer, in Spark's functions (a missing key is NULL, not an error, in ANSI mode too).

    Example:
        >>> mark, known = marks_lookup(exp.Placeholder(this="m"), exp.column("p"))
        >>> mark.sql("spark"), known.sql("spark")
        ('CAST(TRY_ELEMENT_AT(:m, p) AS BIGINT)', 'MAP_CONTAINS_KEY(:m, p)')
    """
    return (exp.cast(exp.func("try_element_at", marks.copy(), producer.copy()), "bigint"),
            exp.func("map_contains_key", marks.copy(), producer.copy()))


def window_decisions(values: exp.Select, marks: exp.Expression | None, order: list[exp.Ordered], *, base: int,
                     partitions: int | None, number: exp.Expression, checked: bool = True,
                     late: bool = False, seen: bool = False, gather: bool = False,
                     refuse: exp.Expression | None = None) -> exp.Select:
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

    ``late`` (an ordered statement) also counts ``out_of_order`` in the same pass: the producer's distinct lowest
    ids above the mark, less the entries written (each written entry has its own lowest id). The distinct ids are
    a set per producer over the whole partition (Spark has no DISTINCT window function), which the sort by
    producer already serves: no second sort, no second read of the source. (The set holds one statement's ids of
    one producer.)

    Example (C02 and a producer with a mark, on DuckDB):
        >>> import duckdb
        >>> from seqdedup.sql.rewrite import expand_is_not_dup
        >>> con = duckdb.connect()
        >>> _ = con.execute("CREATE TABLE s AS SELECT * FROM (VALUES ('p', 1, 5, 0), ('p', 4, 8, 1), ('p', 6, 6, 2), "
        ...                 "('q', 3, 3, 3), ('q', 9, 9, 4)) AS v(p, lo, hi, a)")
        >>> _ = con.execute("CREATE TABLE m AS SELECT 'q' AS producer, 5 AS sequence_id")
        >>> d = expand_is_not_dup(sqlglot.parse_one(
        ...     "INSERT INTO t SELECT a FROM s WHERE is_not_dup(p, lo, hi) ORDER BY a", read="spark"))
        >>> plan = window_decisions(d.values, exp.table_("m"), d.order, base=10, partitions=None,
        ...                         number=exp.Window(this=exp.RowNumber()))
        >>> con.sql(f"SELECT __sd_producer, __sd_sequence_id, __sd_accepted, __sd_last, __sd_written "
        ...         f"FROM ({plan.sql('duckdb')}) ORDER BY __sd_o0").fetchall()
        [('p', 1, True, False, 1), ('p', 4, None, False, 1), ('p', 6, None, True, 1), ('q', 3, False, False, 0), ('q', 9, True, True, 1)]

    (p's (4..8) straddles: one pass leaves it and what follows it undecided; the exceptions plan settles them.)
    """
    p, s, h, mark, accepted = (exp.column(c) for c in (PRODUCER, SEQUENCE_ID, HIGHEST, MARK, ACCEPTED))
    if isinstance(marks, exp.Table):
        joined = exp.select("v.*", exp.alias_(exp.column("sequence_id", table="m"), MARK)).from_(
            _source(values, "v")).join(marks.as_("m"), join_type="left",
                                       on=exp.column("producer", table="m").eq(exp.column(PRODUCER, table="v")))
        known = exp.not_(exp.column("producer", table="m").is_(exp.null()))
    elif marks is not None:
        mark_of, known = marks_lookup(marks, exp.column(PRODUCER, table="v"))
        joined = exp.select("v.*", exp.alias_(mark_of, MARK)).from_(_source(values, "v"))
    else:
        joined = exp.select("v.*", exp.alias_(exp.cast(exp.null(), "bigint"), MARK)).from_(_source(values, "v"))
    if seen:
        joined = joined.select(exp.alias_(known, SEEN))
    bad = invalid(p.copy(), s.copy(), h.copy())
    # computed as the row is read (below the distribution and the sort), so that ``refuse`` fails the query there
    joined = joined.select(exp.alias_(bad if refuse is None else exp.Case(
        ifs=[exp.If(this=bad, true=refuse.copy())], default=exp.false()), INVALID))
    bad = exp.column(INVALID)
    if gather:
        joined.set("hint", exp.Hint(expressions=[exp.Anonymous(this="COALESCE", expressions=[exp.convert(1)])]))
    elif partitions is not None:
        joined.set("hint", exp.Hint(expressions=[exp.Anonymous(this="REPARTITION", expressions=[
            exp.convert(partitions), exp.column(PRODUCER)])]))

    def over(function: exp.Expression, frame: str) -> exp.Window:
        start, end = {"earlier": ("UNBOUNDED", "1"), "running": ("UNBOUNDED", "CURRENT ROW")}[frame]
        return exp.Window(this=function, partition_by=[exp.column(PRODUCER)], order=exp.Order(
            expressions=_order(order)), spec=exp.WindowSpec(
            kind="ROWS", start=start, start_side="PRECEDING", end=end,
            end_side="PRECEDING" if end == "1" else None))

    floor = exp.func("coalesce", mark.copy(), exp.convert(-1))
    if checked:
        new = s.copy() > exp.Greatest(this=floor, expressions=[exp.func(
            "coalesce", over(exp.Max(this=h.copy()), "earlier"), exp.convert(-1))], ignore_nulls=True)
        old = s.copy() <= exp.Greatest(this=floor.copy(), expressions=[exp.func(
            "coalesce", over(exp.Max(this=s.copy()), "earlier"), exp.convert(-1))], ignore_nulls=True)
        decide = exp.Case(ifs=[exp.If(this=bad.copy(), true=exp.false()), exp.If(this=new, true=exp.true()),
                               exp.If(this=old, true=exp.false())])
    else:
        decide = exp.not_(bad.copy())
    last = exp.Window(this=exp.func("lead", exp.convert(1)), partition_by=[exp.column(PRODUCER)],
                      order=exp.Order(expressions=_order(order))).is_(exp.null())
    first = exp.select("*", exp.alias_(decide, ACCEPTED), exp.alias_(last, LAST),
                       exp.alias_(over(exp.Count(this=exp.Star()), "running"), SENT)).from_(joined.subquery("c"))
    if late:
        above = exp.Case(ifs=[exp.If(this=s.copy() > floor.copy(), true=s.copy())])
        first = first.select(exp.alias_(exp.func("size", exp.Window(this=exp.func("collect_set", above),
                                                                    partition_by=[p.copy()])), IDS))
    numbered = exp.select("*", exp.alias_(exp.cast(exp.Add(this=exp.convert(base), expression=number), "bigint"),
                                          POSITION)).from_(
        first.subquery("d"))
    def when_new(value: exp.Expression) -> exp.Case:
        return exp.Case(ifs=[exp.If(this=accepted.copy(), true=value)])

    running = exp.select(
        "*",
        exp.alias_(over(exp.func("count_if", accepted.copy()), "running"), WRITTEN),
        exp.alias_(over(exp.Min(this=when_new(exp.column(POSITION))), "running"), FIRST_POSITION),
        exp.alias_(over(exp.Max(this=when_new(exp.column(POSITION))), "running"), LAST_POSITION),
        exp.alias_(over(exp.Max(this=when_new(h.copy())), "running"), TOP),
    ).from_(numbered.subquery("n"))
    return running


def window_outcome(late: bool = False) -> list[exp.Expression]:
    """The per-producer outcome (``OUTCOME``) read off a producer's ``LAST`` row of ``window_decisions`` (with
    ``late``, of one that counted ``out_of_order``; an unordered statement has none: arrival is id order)."""
    return [exp.alias_(exp.column(PRODUCER), "producer"), exp.alias_(exp.column(SENT), "sent"),
            exp.alias_(exp.column(WRITTEN), "written"),
            exp.alias_(exp.Sub(this=exp.column(SENT), expression=exp.column(WRITTEN)), "duplicates"),
            exp.alias_(exp.column(FIRST_POSITION), "first_position"),
            exp.alias_(exp.column(LAST_POSITION), "last_position"), exp.alias_(exp.column(TOP), "highest"),
            exp.alias_(exp.Sub(this=exp.column(IDS), expression=exp.column(WRITTEN)) if late else exp.convert(0),
                       "out_of_order")]


def carried_producers(keys: exp.Query) -> exp.Select:
    """The producers a statement carries (for a semi-join of the state's marks: ``window_decisions``' ``seen``)."""
    return exp.select(PRODUCER).from_(keys.subquery("k")).distinct()


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


# --- the exceptions plan ------------------------------------------------------------------------------------------

def producers(keys: exp.Query, marks: exp.Table | None, *, seen: bool = False) -> exp.Select:
    """Per producer of the statement: its mark, what it sent, its candidates (entries above the mark), their id
    range, and the positions reserved for them after the statement's base (``offset`` and ``room``). With ``seen``
    (the marks are those of the producers a first read carried, each with a row), also ``__sd_unseen``: the entries
    of a producer that read did not carry.

    A producer whose ids span at most ``SPREAD`` positions per candidate (plus ``SLACK``) gets one position per id
    in its range (``sparse`` false: an entry's position is ``offset + s - smallest + 1``); a sparser one gets one
    per candidate, numbered by rank. The counts of invalid entries (R4) come along, for the runner to refuse.

    Example (ids 1, 2, 4 of p are candidates above its mark 0, over 4 positions; q's 0 and 10^12 are sparse):
        >>> import duckdb
        >>> con = duckdb.connect()
        >>> _ = con.execute("CREATE TABLE k AS SELECT * FROM (VALUES ('p', 0), ('p', 1), ('p', 2), ('p', 4), "
        ...                 "('q', 0), ('q', 1000000000000)) AS v(__sd_producer, __sd_sequence_id)")
        >>> _ = con.execute("CREATE TABLE m AS SELECT 'p' AS producer, 0 AS sequence_id")
        >>> keys = sqlglot.parse_one("SELECT *, __sd_sequence_id AS __sd_highest FROM k")
        >>> con.sql(f"SELECT __sd_producer, __sd_mark, __sd_sent, __sd_candidates, __sd_sparse, __sd_room, __sd_offset "
        ...         f"FROM ({producers(keys, exp.table_('m')).sql('duckdb')}) ORDER BY 1").fetchall()
        [('p', 0, 4, 3, False, 4, 0), ('q', None, 2, 2, True, 2, 4)]
    """
    marks_table = marks.copy() if marks is not None else _parse(
        "SELECT CAST(NULL AS STRING) AS producer, CAST(NULL AS BIGINT) AS sequence_id WHERE FALSE").subquery()
    query = _parse(
        """
        SELECT *, COALESCE(SUM(__sd_room) OVER (ORDER BY __sd_producer ROWS BETWEEN UNBOUNDED PRECEDING
                                                AND 1 PRECEDING), 0) AS __sd_offset
        FROM (
          SELECT *, __sd_largest - __sd_smallest > :spread * __sd_candidates + :slack AS __sd_sparse,
                 CASE WHEN __sd_candidates = 0 THEN 0
                      WHEN __sd_largest - __sd_smallest > :spread * __sd_candidates + :slack THEN __sd_candidates
                      ELSE __sd_largest - __sd_smallest + 1 END AS __sd_room
          FROM (
            SELECT k.__sd_producer, MAX(m.sequence_id) AS __sd_mark, COUNT(*) AS __sd_sent,
                   COUNT_IF(k.__sd_sequence_id > COALESCE(m.sequence_id, -1)) AS __sd_candidates,
                   MIN(CASE WHEN k.__sd_sequence_id > COALESCE(m.sequence_id, -1) THEN k.__sd_sequence_id END)
                     AS __sd_smallest,
                   MAX(CASE WHEN k.__sd_sequence_id > COALESCE(m.sequence_id, -1) THEN k.__sd_sequence_id END)
                     AS __sd_largest,
                   COUNT_IF(k.__sd_sequence_id > COALESCE(m.sequence_id, -1) AND k.__sd_highest > k.__sd_sequence_id)
                     AS __sd_batches,
                   COUNT_IF(:invalid) AS __sd_invalid
            FROM :keys AS k LEFT JOIN :marks AS m ON m.producer = k.__sd_producer
            GROUP BY k.__sd_producer
          ) AS a
        ) AS r
        """,
        keys=keys.copy() if isinstance(keys, exp.Table) else keys.subquery(), marks=marks_table,
        spread=exp.convert(SPREAD), slack=exp.convert(SLACK),
        invalid=invalid(*(exp.column(c, table="k") for c in (PRODUCER, SEQUENCE_ID, HIGHEST))))
    if seen:
        unseen = exp.and_(exp.not_(exp.column(PRODUCER, table="k").is_(exp.null())),
                          exp.column("producer", table="m").is_(exp.null()))
        query.find(exp.Group).parent_select.select(exp.alias_(exp.func("count_if", unseen), UNSEEN), copy=False)
    return query


def candidates(keys: exp.Query, producers_table: exp.Table) -> exp.Select:
    """The entries above their producer's mark, with the mark: the only ones the statement can write."""
    return _parse("""
        SELECT k.*, p.__sd_mark FROM :keys AS k JOIN :producers AS p ON p.__sd_producer = k.__sd_producer
        WHERE k.__sd_sequence_id > COALESCE(p.__sd_mark, -1)""",
                  keys=keys.copy() if isinstance(keys, exp.Table) else keys.subquery(),
                  producers=producers_table.copy())


def repeats(keys: exp.Query, producers_table: exp.Table) -> exp.Select:
    """The exceptions without ORDER BY and without batch entries: arrival is id order, so every candidate id is
    written once, and an id sent several times is the only exception (``ACCEPTED`` rows: one of them is written).

    Example:
        >>> repeats(exp.table_("keys"), exp.table_("producers")).sql("duckdb")[:60]
        'SELECT c.__sd_producer, c.__sd_sequence_id, c.__sd_highest, '
    """
    keys_ = [exp.column(k, table="c") for k in (PRODUCER, SEQUENCE_ID, HIGHEST)]
    return (exp.select(*keys_, exp.alias_(exp.Count(this=exp.Star()), "__sd_rows"),
                       exp.alias_(exp.convert(1), "__sd_kept"))
            .from_(candidates(keys, producers_table).subquery("c")).group_by(*[k.copy() for k in keys_])
            .having(exp.Count(this=exp.Star()) > 1))


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
            expressions=_order(order)), spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING",
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
        _source(previous, "previous"))


def undecided_producers(decisions: exp.Table) -> exp.Select:
    """The producers with an undecided entry: the only ones the next round needs."""
    return exp.select(PRODUCER).from_(decisions.copy()).where(exp.column(ACCEPTED).is_(exp.null())).distinct()


def rows_of(decisions: exp.Table, producers_: exp.Table, *, inside: bool) -> exp.Select:
    """The rows of ``decisions`` whose producer is (``inside``) or is not among ``producers_`` (a semi or anti
    join: Spark fails to run a NOT IN subquery over checkpointed tables of one lineage)."""
    return exp.select("d.*").from_(decisions.as_("d")).join(
        producers_.as_("x"), on=exp.column(PRODUCER, table="x").eq(exp.column(PRODUCER, table="d")),
        join_type="semi" if inside else "anti")


def decided_exceptions(decisions: exp.Table, key_columns: list[str]) -> exp.Select:
    """The keys the windowed decision makes exceptions of: written by none of their rows (all duplicates), or
    sent more than once with one row written (``__sd_kept`` 1: the write keeps one)."""
    keys_ = [exp.column(k) for k in key_columns]
    kept = exp.func("count_if", exp.column(ACCEPTED))
    return (exp.select(*keys_, exp.alias_(exp.Count(this=exp.Star()), "__sd_rows"), exp.alias_(kept, "__sd_kept"))
            .from_(decisions.copy()).group_by(*[k.copy() for k in keys_])
            .having(exp.or_(kept.copy().eq(0), exp.Count(this=exp.Star()) > 1)))


def decided_counts(decisions: exp.Table) -> exp.Select:
    """Per producer, from the windowed decision: entries written, their lowest and highest ids, and the highest id
    written."""
    accepted = exp.column(ACCEPTED)

    def when(value):
        return exp.Case(ifs=[exp.If(this=accepted.copy(), true=value)])

    return (exp.select(PRODUCER, exp.alias_(exp.func("count_if", accepted.copy()), "__sd_written"),
                       exp.alias_(exp.Count(this=exp.Distinct(expressions=[exp.column(SEQUENCE_ID)])), "__sd_ids"),
                       exp.alias_(exp.Min(this=when(exp.column(SEQUENCE_ID))), "__sd_first"),
                       exp.alias_(exp.Max(this=when(exp.column(SEQUENCE_ID))), "__sd_last"),
                       exp.alias_(exp.Max(this=when(exp.column(HIGHEST))), "__sd_top"))
            .from_(decisions.copy()).group_by(PRODUCER))


def repeat_counts(keys: exp.Query, producers_table: exp.Table, exceptions: exp.Table) -> exp.Select:
    """Per producer, without ORDER BY and batch entries: every candidate id is written once, so what it writes
    follows from the candidates and the repeats (``repeats``)."""
    return _parse("""
        SELECT c.__sd_producer, COUNT(*) - COALESCE(MAX(x.extra), 0) AS __sd_written,
               COUNT(*) - COALESCE(MAX(x.extra), 0) AS __sd_ids,
               MIN(c.__sd_sequence_id) AS __sd_first, MAX(c.__sd_sequence_id) AS __sd_last,
               MAX(c.__sd_highest) AS __sd_top
        FROM :candidates AS c
        LEFT JOIN (SELECT __sd_producer, SUM(__sd_rows - 1) AS extra FROM :exceptions GROUP BY __sd_producer) AS x
          ON x.__sd_producer = c.__sd_producer
        GROUP BY c.__sd_producer""", candidates=candidates(keys, producers_table).subquery(),
                  exceptions=exceptions.copy())


def outcome(producers_table: exp.Table, counts: exp.Table, base: int) -> exp.Select:
    """The per-producer outcome (``OUTCOME``).

    Example:
        >>> [s.alias for s in outcome(exp.table_("p"), exp.table_("c"), 0).selects]
        ['producer', 'sent', 'written', 'duplicates', 'first_position', 'last_position', 'highest', 'out_of_order']
    """
    return _parse("""
        SELECT p.__sd_producer AS producer, p.__sd_sent AS sent, COALESCE(c.__sd_written, 0) AS written,
               p.__sd_sent - COALESCE(c.__sd_written, 0) AS duplicates,
               CASE WHEN c.__sd_written > 0 THEN :base + p.__sd_offset
                    + CASE WHEN p.__sd_sparse THEN 1 ELSE c.__sd_first - p.__sd_smallest + 1 END END AS first_position,
               CASE WHEN c.__sd_written > 0 THEN :base + p.__sd_offset
                    + CASE WHEN p.__sd_sparse THEN c.__sd_written ELSE c.__sd_last - p.__sd_smallest + 1 END
                    END AS last_position,
               c.__sd_top AS highest, COALESCE(c.__sd_ids, 0) - COALESCE(c.__sd_written, 0) AS out_of_order
        FROM :producers AS p LEFT JOIN :counts AS c ON c.__sd_producer = p.__sd_producer""",
                  producers=producers_table.copy(), counts=counts.copy(), base=exp.convert(base))


def write_rows(values: exp.Select, producers_table: exp.Table, exceptions: exp.Table, key_columns: list[str],
               value_columns: list[str], *, base: int, windowed: bool) -> exp.Select:
    """The rows the exceptions plan writes: the value columns, the keys and the position.

    Every candidate whose key is not an exception, at ``base + offset + s - smallest + 1``; with ``windowed``
    (there are keys written once out of several rows, or sparse producers), those rows go through a window that
    keeps one row per key and numbers a sparse producer's entries by rank.
    """
    v, p, x = "v", "p", "x"
    nullable = set(key_columns) - {PRODUCER, SEQUENCE_ID, HIGHEST}      # ORDER BY values may be NULL
    same_key = exp.and_(*[(exp.NullSafeEQ if k in nullable else exp.EQ)(
        this=exp.column(k, table=x), expression=exp.column(k, table=v)) for k in key_columns])

    def exception(condition: exp.Expression | None) -> exp.Exists:
        query = exp.select(exp.convert(1)).from_(exceptions.as_(x)).where(same_key.copy())
        if condition is not None:
            query = query.where(condition)
        return exp.Exists(this=query)

    s = exp.column(SEQUENCE_ID, table=v)
    candidate = s > exp.func("coalesce", exp.column(MARK, table=p), exp.convert(-1))
    sparse = exp.column("__sd_sparse", table=p)
    # Only a dense producer's ids give positions (its span is bounded by its entries). Spark computes a projected
    # expression for every row, filtered or not, with ANSI overflow checks: a sparse producer's s - smallest may be
    # near 2^63, so the expression is NULL for it rather than computed and dropped. The parentheses are explicit:
    # generated without them, base + offset + s - smallest adds s (up to 2^63 - 1) first and overflows.
    by_id = exp.Case(ifs=[exp.If(this=exp.not_(sparse.copy()), true=exp.Add(
        this=exp.Add(this=exp.convert(base), expression=exp.column("__sd_offset", table=p)),
        expression=exp.Paren(this=exp.Add(this=exp.Sub(this=s.copy(), expression=exp.column("__sd_smallest", table=p)),
                                          expression=exp.convert(1)))))])
    columns = [exp.column(c, table=v) for c in value_columns + key_columns]
    joined = exp.select(*columns).from_(_source(values, v)).join(
        producers_table.as_(p), on=exp.column(PRODUCER, table=p).eq(exp.column(PRODUCER, table=v)))
    conditions = [candidate, exp.not_(exception(None))] + ([exp.not_(sparse.copy())] if windowed else [])
    plain = joined.copy().select(exp.alias_(by_id, POSITION)).where(exp.and_(*conditions))
    if not windowed:
        return plain
    kept = exp.column("__sd_kept", table=x)
    special = (joined.copy().select(exp.alias_(by_id.copy(), "__sd_by_id"), exp.alias_(sparse.copy(), "__sd_sparse"),
                                    exp.alias_(exp.column("__sd_offset", table=p), "__sd_offset"))
               .where(exp.and_(candidate.copy(), exp.not_(exception(kept.copy().eq(0))),
                               exp.or_(sparse.copy(), exception(kept.copy().eq(1)))))
               # one row per key, whichever (Spark wants an ORDER BY in any row_number(): the key, a tie throughout)
               .qualify(exp.Window(this=exp.RowNumber(),
                                   partition_by=[exp.column(k, table=v) for k in key_columns],
                                   order=exp.Order(expressions=[exp.Ordered(this=exp.column(k, table=v))
                                                                for k in key_columns])).eq(1)))
    rank = exp.Window(this=exp.RowNumber(), partition_by=[exp.column(PRODUCER)], order=exp.Order(
        expressions=[exp.Ordered(this=exp.column(SEQUENCE_ID))]))
    ranked = exp.select(*[exp.column(c) for c in value_columns + key_columns], exp.alias_(exp.Case(
        ifs=[exp.If(this=exp.column("__sd_sparse"), true=exp.Add(this=exp.Add(
            this=exp.convert(base), expression=exp.column("__sd_offset")), expression=rank))],
        default=exp.column("__sd_by_id")), POSITION)).from_(special.subquery("w"))
    return exp.union(plain, ranked, distinct=False)


# --- the row plan ----------------------------------------------------------------------------------------------------

#: The row number of an entry in the table of the statement's rows (``rows_once``): the engine's own (DuckDB's rowid).
ROW_ID = "rowid"
#: The number of an entry's row, carried where the decision is made (``row_candidates``).
ROW = "__sd_row"
FIRST_ROW = exp.Placeholder(this="__sd_first_row")


def _candidate(table: str | None = None) -> exp.Expression:
    """An entry above its producer's mark: the only kind a statement can write."""
    return exp.column(SEQUENCE_ID, table=table) > exp.func("coalesce", exp.column(MARK, table=table), exp.convert(-1))


def rows_once(values: exp.Select, marks: exp.Expression | None) -> exp.Select:
    """The statement's rows as read once, each with its producer's mark (NULL: none): the row plan's table, which
    the engine numbers (``ROW_ID``); every later step reads it."""
    if marks is None:
        return exp.select("v.*", exp.alias_(exp.cast(exp.null(), "bigint"), MARK)).from_(_source(values, "v"))
    return exp.select("v.*", exp.alias_(exp.column("sequence_id", table="m"), MARK)).from_(_source(values, "v")).join(
        marks.as_("m"), join_type="left", on=exp.column("producer", table="m").eq(exp.column(PRODUCER, table="v")))


def rows_summary(rows: exp.Table) -> exp.Select:
    """The first and last row numbers, and the counts the runner checks before it decides: invalid entries (R4),
    batch entries among the candidates (they need the windowed decision)."""
    p, s, h = (exp.column(c) for c in (PRODUCER, SEQUENCE_ID, HIGHEST))
    return exp.select(exp.Min(this=exp.column(ROW_ID)), exp.Max(this=exp.column(ROW_ID)),
                      exp.func("count_if", invalid(p, s, h)),
                      exp.func("count_if", exp.and_(_candidate(), h.copy() > s.copy()))).from_(rows.copy())


def row_repeats(rows: exp.Table) -> exp.Select:
    """Without ORDER BY and batch entries: the candidate keys sent more than once, with the row that is written
    (the first) and how many were sent: every other row of the key is a repeat.

    Example:
        >>> row_repeats(exp.table_("r")).sql("duckdb")
        'SELECT __sd_producer, __sd_sequence_id, MIN(rowid) AS __sd_keep, COUNT(*) AS __sd_rows FROM r WHERE __sd_sequence_id > COALESCE(__sd_mark, -1) GROUP BY __sd_producer, __sd_sequence_id HAVING COUNT(*) > 1'
    """
    return (exp.select(PRODUCER, SEQUENCE_ID, exp.alias_(exp.Min(this=exp.column(ROW_ID)), "__sd_keep"),
                       exp.alias_(exp.Count(this=exp.Star()), "__sd_rows"))
            .from_(rows.copy()).where(_candidate()).group_by(PRODUCER, SEQUENCE_ID)
            .having(exp.Count(this=exp.Star()) > 1))


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


def rows_written(rows: exp.Table, value_columns: list[str], key_columns: list[str], base: exp.Expression
                 ) -> exp.Select:
    """What the row plan writes: every candidate left, at ``base`` plus its row's place in the table."""
    position = exp.Add(this=exp.Sub(this=exp.Add(this=base.copy(), expression=exp.column(ROW_ID)),
                                    expression=FIRST_ROW.copy()), expression=exp.convert(1))
    return exp.select(*value_columns, *key_columns, exp.alias_(position, POSITION)).from_(rows.copy()).where(
        _candidate())


def row_outcome(rows: exp.Table, dropped: exp.Query, base: exp.Expression, *, late: bool) -> exp.Select:
    """The per-producer outcome (``OUTCOME``) of the row plan: what is left in the rows is written (candidates) or
    a duplicate at or below the mark; ``dropped`` gives, per producer, the rows removed (``__sd_dropped``) and,
    with ``late``, its distinct candidate ids (``__sd_ids``: those not written came late)."""
    def place(function):
        return exp.Add(this=exp.Sub(this=exp.Add(this=base.copy(), expression=function(this=exp.Case(ifs=[exp.If(
            this=_candidate(), true=exp.column(ROW_ID))]))), expression=FIRST_ROW.copy()), expression=exp.convert(1))

    kept = exp.select(PRODUCER, exp.alias_(exp.Count(this=exp.Star()), "__sd_left"),
                      exp.alias_(exp.func("count_if", _candidate()), WRITTEN),
                      exp.alias_(place(exp.Min), FIRST_POSITION), exp.alias_(place(exp.Max), LAST_POSITION),
                      exp.alias_(exp.Max(this=exp.Case(ifs=[exp.If(this=_candidate(), true=exp.column(HIGHEST))])),
                                 TOP)).from_(rows.copy()).group_by(PRODUCER)
    r, d = "r", "d"
    sent = exp.Add(this=exp.column("__sd_left", table=r),
                   expression=exp.func("coalesce", exp.column("__sd_dropped", table=d), exp.convert(0)))
    written = exp.column(WRITTEN, table=r)
    late_ones = exp.Sub(this=exp.func("coalesce", exp.column(IDS, table=d), written.copy()), expression=written.copy())
    return (exp.select(exp.alias_(exp.column(PRODUCER, table=r), "producer"), exp.alias_(sent, "sent"),
                       exp.alias_(written, "written"), exp.alias_(exp.Sub(this=sent.copy(), expression=written.copy()),
                                                                  "duplicates"),
                       exp.alias_(exp.column(FIRST_POSITION, table=r), "first_position"),
                       exp.alias_(exp.column(LAST_POSITION, table=r), "last_position"),
                       exp.alias_(exp.column(TOP, table=r), "highest"),
                       exp.alias_(late_ones if late else exp.convert(0), "out_of_order"))
            .from_(kept.subquery(r)).join(_source(dropped, d), join_type="left",
                                          on=exp.column(PRODUCER, table=d).eq(exp.column(PRODUCER, table=r))))


def dropped_repeats(repeats: exp.Table) -> exp.Select:
    """Per producer, the repeats ``drop_repeats`` removes."""
    return exp.select(PRODUCER, exp.alias_(exp.Sum(this=exp.Sub(this=exp.column("__sd_rows"), expression=exp.convert(
        1))), "__sd_dropped")).from_(repeats.copy()).group_by(PRODUCER)


def dropped_rejected(decisions: exp.Table) -> exp.Select:
    """Per producer, the candidates ``drop_rejected`` removes, and its distinct candidate ids."""
    return exp.select(PRODUCER, exp.alias_(exp.func("count_if", exp.not_(exp.column(ACCEPTED))), "__sd_dropped"),
                      exp.alias_(exp.Count(this=exp.Distinct(expressions=[exp.column(SEQUENCE_ID)])), IDS)).from_(
        decisions.copy()).group_by(PRODUCER)


def insert_rows(topic: exp.Table, user_columns: list[str], value_columns: list[str], rows: exp.Query,
                publish_time: exp.Expression, commit: int) -> exp.Insert:
    """``INSERT INTO topic (user columns, system columns) SELECT ...`` of rows with keys and positions."""
    body = exp.select(*value_columns, PRODUCER, SEQUENCE_ID, HIGHEST, POSITION, publish_time.copy(),
                      exp.convert(commit)).from_(_source(rows, "w"))
    return exp.insert(body, topic.copy(), columns=[exp.to_identifier(c, quoted=True) for c in [*user_columns, *SYSTEM]])


def describe(statement, *, kind: str, base: int, commit: int, publish_time: exp.Expression,
             partitions: int | None, number: exp.Expression, topic: exp.Table, targets: list[str],
             values: list[str], small_base: exp.Expression | None = None,
             refuse: exp.Expression | None = None) -> dict[str, exp.Expression]:
    """The steps of a plan for a statement, named, each reading the tables the steps before it make (named after
    them): what the runner executes, for people to read (tests/golden holds them per engine).

    ``kind`` is "window", "rows" or "exceptions". For the row and exceptions plans both ways to the exceptions are given: the hash
    aggregate (no ORDER BY, no batch entries) and the windowed decision (the others). ``small_base``: the base a
    small statement's window plan is given (``EngineAdapter.constant``), if not ``base``; ``refuse``, what fails
    the window plan's query at an invalid entry (``window_decisions``).

    Example:
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
