"""What every plan shares: the columns the steps add, the outcome's columns, R4's check of an entry, the parse of a
fixed-shape step, and the INSERT that writes decided rows into the topic."""
from __future__ import annotations

import functools

import sqlglot
from sqlglot import exp

from seqdedup.catalog import ids
from seqdedup.catalog.names import HIGHEST, PRODUCER, SEQUENCE_ID, SYSTEM


# Columns the steps add. Their prefix (catalog.names.RESERVED) is refused in user columns (seqdedup/core/checks.py),
# so they cannot collide.
MARK = "__sd_mark"              # the producer's persisted mark before the statement (NULL: none)
ACCEPTED = "__sd_accepted"      # the decision: TRUE written, FALSE duplicate, NULL undecided (a straddle)
POSITION = "__sd_position"      # the entry's position
INVALID = "__sd_invalid"        # the entry breaks R4 (NULL producer or id, negative id, highest below lowest)
LAST = "__sd_last"              # the producer's last entry in arrival order: its running counts are its totals
UNSEEN = "__sd_unseen"          # entries of a producer that is not among the marks' (carried producers' marks)
SEEN = "__sd_seen"              # the entry's producer is among the marks' (when they are the carried producers')
IDS = "__sd_ids"                # the producer's distinct lowest ids above its mark, in the whole statement
FIRST_COPY = "__sd_first_copy"  # 1 for the first copy (in arrival order) of an id above its mark, else 0
COPY = "__sd_copy"              # a key's entry's place among the key's entries in arrival order, from 1 (R20)
SENT, WRITTEN = "__sd_sent", "__sd_written"
#: The window plan's split write (``sql.plan.window.fates``): TRUE for an entry it dropped, staged apart from the
#: written ones in the same job for the ledger (R16) to read, where the engine's storage can (``stages_apart``).
DROPPED_ENTRY = "__sd_dropped"
#: The window plan where payload conflicts are judged (R18) in a statement without ORDER BY or batch entries: the
#: fingerprint of the entry the statement wrote with this entry's id, carried to a dropped entry above its mark
#: (``window_decisions``' ``held``); and whether the next entry has this one's id (only such a written entry is
#: fingerprinted).
WRITTEN_FINGERPRINT, COPIED = "__sd_written_fingerprint", "__sd_copied"
FIRST_POSITION, LAST_POSITION, TOP = "__sd_first_position", "__sd_last_position", "__sd_top"
#: The per-producer outcome of a statement, in the order the run log and results take it. ``out_of_order`` counts
#: the duplicates that were no repeat: the distinct lowest ids, above the mark the statement began with, that no
#: entry was written with (they arrived after a higher id, or in a batch entry that overlapped a written one).
OUTCOME = ["producer", "sent", "written", "duplicates", "first_position", "last_position", "highest", "out_of_order"]
#: The message of the engine error that ``window_decisions``' ``refuse`` raises: the runner knows it by this, and
#: names the invalid entries itself (seqdedup/core/checks.py).
REFUSED = "seqdedup: an entry is invalid (R4)"

#: A producer's ids are "dense" when they span at most this many positions per entry (plus SLACK); its positions
#: then follow from its ids. A sparser producer (ids 0 and 2^62, say) is numbered by rank instead.
SPREAD, SLACK = 4, 64


def refusal(function: str) -> exp.Expression:
    """An expression that fails the query with ``REFUSED``, in the engine's function that raises an error.

    Example:
        >>> refusal("raise_error").sql("spark")
        "RAISE_ERROR('seqdedup: an entry is invalid (R4)')"
    """
    return exp.Anonymous(this=function, expressions=[exp.Literal.string(REFUSED)])


@functools.lru_cache(maxsize=None)
def _template(sql: str) -> exp.Expression:
    return sqlglot.parse_one(sql, read="spark")


def parse_step(sql: str, **tables: exp.Expression) -> exp.Select:
    """Spark SQL text of a fixed-shape step, with ``:name`` placeholders for tables and values (given as trees);
    parsed once per process."""
    return exp.replace_placeholders(_template(sql), **tables)


def source(query: exp.Expression, alias: str) -> exp.Expression:
    return query.subquery(alias) if isinstance(query, exp.Query) else query.as_(alias)


def unwritten_ids(rows: exp.Expression, written: exp.Expression, where: exp.Expression, alias: str,
                  producer: str = PRODUCER, sequence_id: str = SEQUENCE_ID) -> exp.Select:
    """Per producer, the distinct ids of ``rows`` (alias ``x``) where ``where`` holds that no row of ``written``
    (alias ``w``) has: ids no entry was written with (an ordered statement's ``out_of_order``). ``rows`` are the
    few dropped or rejected entries, so this costs less than counting every entry's distinct ids.

    Example:
        >>> unwritten_ids(exp.table_("d"), exp.table_("r"), exp.true(), "n").sql("duckdb")
        'SELECT x.__sd_producer, COUNT(DISTINCT x.__sd_sequence_id) AS n FROM d AS x ANTI JOIN r AS w ON w.__sd_producer = x.__sd_producer AND w.__sd_sequence_id = x.__sd_sequence_id WHERE TRUE GROUP BY x.__sd_producer'
    """
    x, w = (lambda c: exp.column(c, table="x")), (lambda c: exp.column(c, table="w"))
    same = exp.and_(*[w(c).eq(x(c)) for c in (producer, sequence_id)])
    return (exp.select(x(producer), exp.alias_(exp.Count(this=exp.Distinct(expressions=[x(sequence_id)])), alias))
            .from_(source(rows, "x")).join(source(written, "w"), join_type="anti", on=same)
            .where(where).group_by(x(producer)))


def ordered(order: list[exp.Ordered], table: str | None = None) -> list[exp.Ordered]:
    out = []
    for o in order:
        o = o.copy()
        if table:
            o.set("this", exp.column(o.this.name, table=table))
        out.append(o)
    return out


#: The highest sequence id (R4: ids are signed 64-bit); an engine with wider integers could carry a larger one.
MAX_ID = 2**63 - 1


def invalid(p: exp.Expression, s: exp.Expression, h: exp.Expression, id_parts: int | None = None) -> exp.Expression:
    """R4 for one entry: a NULL producer or id, a negative id, an id past signed 64-bit, or a highest id below the
    lowest. A composite id (``id_parts``, R19) is NULL where a part is out of range (``catalog.ids.encode``).

    Example:
        >>> invalid(exp.column("p"), exp.column("s"), exp.column("h")).sql()
        'p IS NULL OR s IS NULL OR s < 0 OR s > 9223372036854775807 OR h > 9223372036854775807 OR h < s'
    """
    if id_parts is not None:
        return exp.or_(p.is_(exp.null()), s.is_(exp.null()))
    return exp.or_(p.is_(exp.null()), s.is_(exp.null()), s < 0, s.copy() > MAX_ID, h.copy() > MAX_ID, h < s.copy())


def above(s: exp.Expression, mark: exp.Expression) -> exp.Expression:
    """Whether id ``s`` is above ``mark`` (NULL: none, and every id is above it), for ids of any type (R19: a
    composite id's text has no -1 below every id).

    Example:
        >>> above(exp.column("s"), exp.column("m")).sql()
        '(m IS NULL OR s > m)'
    """
    return exp.paren(exp.or_(mark.is_(exp.null()), s.copy() > mark.copy()))


# Two ids' greater is never taken with GREATEST: DuckDB 2.0 computes it for a UHUGEINT (a composite id inside a
# statement, ``catalog.ids``) by its general path, which made the ordered statement's window step twice as slow
# as the same step with comparisons (docs/performance.md, "Composite ids": 2.6 against 5.3 CPU s for 4.5M rows).
def above_all(s: exp.Expression, *marks: exp.Expression) -> exp.Expression:
    """Whether id ``s`` is above each of ``marks`` (those NULL skipped): ``above(s, GREATEST(marks))``.

    Example:
        >>> above_all(exp.column("s"), exp.column("m"), exp.column("e")).sql()
        '(m IS NULL OR s > m) AND (e IS NULL OR s > e)'
    """
    return exp.and_(*(above(s, mark) for mark in marks))


def at_or_below_any(s: exp.Expression, *marks: exp.Expression) -> exp.Expression:
    """Whether id ``s`` is at or below one of ``marks``: ``s <= GREATEST(marks)`` as a CASE's condition (NULL, not
    taken, where none is known; where some are, NULL or false as the comparison is).

    Example:
        >>> at_or_below_any(exp.column("s"), exp.column("m"), exp.column("e")).sql()
        '(s <= m OR s <= e)'
    """
    return exp.paren(exp.or_(*(s.copy() <= mark.copy() for mark in marks)))


def no_mark(id_parts: int | None) -> exp.Expression:
    """A mark that is none, typed as the topic's ids are inside a statement (``catalog.ids``)."""
    return ids.from_stored(exp.cast(exp.null(), ids.id_type(id_parts)), id_parts)


def working_marks(marks: exp.Expression, id_parts: int | None) -> exp.Expression:
    """A relation of marks ``(producer, sequence_id)`` as a plan joins it: a composite mark (``id_parts``) put in
    the statement's working form once per producer, below the join (``catalog.ids``); integer marks as they are.

    Example:
        >>> working_marks(exp.table_("m"), None).sql()
        'm'
    """
    if id_parts is None:
        return marks
    return exp.select("producer", exp.alias_(ids.from_stored(exp.column("sequence_id"), id_parts),
                                             "sequence_id")).from_(source(marks, "k"))


def insert_rows(topic: exp.Table, user_columns: list[str], value_columns: list[str], rows: exp.Query,
                publish_time: exp.Expression, commit: int, position: exp.Expression | None = None,
                highest: exp.Expression | None = None, keyed: bool = False, id_parts: int | None = None
                ) -> exp.Insert:
    """``INSERT INTO topic (user columns, system columns) SELECT ...`` of rows with keys and positions (the column
    ``POSITION``, or the expression ``position``; the highest ids likewise). ``keyed``: the rows are keys' (R20),
    whose only id is 0; each carries its position as its highest id instead, so that a key's mark is where it was
    written, by which a window in entries judges it (``key_window_entries``), and a replay of the log finds it.
    ``id_parts``: the topic's composite ids, written as it stores them (``catalog.ids.stored``)."""
    position = exp.column(POSITION) if position is None else position
    sequence_id = ids.stored(exp.column(SEQUENCE_ID), id_parts)
    if highest is None:     # (a composite id is its own highest id: made once, where the engine sees it twice)
        highest = position.copy() if keyed else sequence_id.copy() if id_parts else exp.column(HIGHEST)
    body = exp.select(*value_columns, PRODUCER, sequence_id, highest, position,
                      publish_time.copy(), exp.convert(commit)).from_(source(rows, "w"))
    return exp.insert(body, topic.copy(), columns=[exp.to_identifier(c, quoted=True) for c in [*user_columns, *SYSTEM]])


def carried_producers(keys: exp.Query) -> exp.Select:
    """The producers a statement carries (for a semi-join of the state's marks: ``window_decisions``' ``seen``)."""
    return exp.select(PRODUCER).from_(keys.subquery("k")).distinct()
