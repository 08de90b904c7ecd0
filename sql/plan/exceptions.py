"""The exceptions plan: the decision on the keys alone finds the few entries the rule "above the mark" gets wrong
(repeats, late entries); the write is a filtered copy of the rows read once (see the package's overview)."""
from __future__ import annotations

from sqlglot import exp

from seqdedup.catalog.names import HIGHEST, PRODUCER, SEQUENCE_ID

from .common import ACCEPTED, MARK, OUTCOME, POSITION, SLACK, SPREAD, UNSEEN, insert_rows, invalid, parse_step, source
from .rounds import round_steps
from .steps import CARRIED, VALUES, Step, plan_of


def producers(keys: exp.Query, marks: exp.Table | None, *, seen: bool = False) -> exp.Select:
    """Per producer of the statement: its mark, what it sent, its candidates (entries above the mark), their id
    range, and the positions reserved for them after the statement's base (``offset`` and ``room``). With ``seen``
    (the marks are those of the producers a first read carried, each with a row), also ``__sd_unseen``: the entries
    of a producer that read did not carry.

    A producer whose ids span at most ``SPREAD`` positions per candidate (plus ``SLACK``) gets one position per id
    in its range (``sparse`` false: an entry's position is ``offset + s - smallest + 1``); a sparser one gets one
    per candidate, numbered by rank. The counts of invalid entries (R4) come along, for the runner to refuse.

    Example (ids 1, 2, 4 of p are candidates above its mark 0, over 4 positions; q's 0 and 10^12 are sparse):
        >>> import sqlglot
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
    marks_table = marks.copy() if marks is not None else parse_step(
        "SELECT CAST(NULL AS STRING) AS producer, CAST(NULL AS BIGINT) AS sequence_id WHERE FALSE").subquery()
    query = parse_step(
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
    return parse_step("""
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
    return parse_step("""
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
    return parse_step("""
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
    joined = exp.select(*columns).from_(source(values, v)).join(
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


def producer_sums(producers_table: exp.Table, seen: bool) -> exp.Select:
    """Over every producer: invalid entries, batch entries that straddle, positions reserved (``room``), (with
    ``seen``) entries of producers the first read did not carry, and how many producers are sparse."""
    sums = ("__sd_invalid", "__sd_batches", "__sd_room") + ((UNSEEN,) if seen else ())
    return exp.select(*[exp.func("coalesce", exp.Sum(this=exp.column(c)), exp.convert(0)) for c in sums],
                      exp.func("count_if", exp.column("__sd_sparse"))).from_(producers_table.copy())


def kept_once(exceptions: exp.Table) -> exp.Select:
    """How many keys are written once out of several rows (then the write numbers rows by window)."""
    return exp.select(exp.func("count_if", exp.column("__sd_kept").eq(1))).from_(exceptions.copy())


#: The exceptions plan's steps (see ``steps``): it always reads the statement's rows once.
STEPS = plan_of(
    VALUES,
    CARRIED,
    Step("producers", "producers", lambda i: producers(i.read.keys, i.marks, seen=i.seen)),
    Step("sums", "invalid entries, batch entries, positions reserved",
         lambda i: producer_sums(i.table("producers"), i.seen)),
    Step("repeats", "exceptions, without ORDER BY or batch entries: repeated keys",
         lambda i: repeats(i.read.keys, i.table("producers"))),
    Step("repeat counts", "counts from the repeats",
         lambda i: repeat_counts(i.read.keys, i.table("producers"), i.table("exceptions"))),
    Step("candidates", "candidates, with ORDER BY or batch entries",
         lambda i: candidates(i.read.keys, i.table("producers"))),
    *round_steps(lambda i: i.statement.key_columns),
    Step("decided exceptions", "exceptions from the decisions",
         lambda i: decided_exceptions(i.table("decisions"), i.statement.key_columns)),
    Step("decided counts", "counts from the decisions", lambda i: decided_counts(i.table("decisions"))),
    Step("outcome", "outcome per producer", lambda i: outcome(i.table("producers"), i.table("counts"), i.base)),
    Step("kept once", "keys written once out of several rows", lambda i: kept_once(i.table("exceptions"))),
    Step("write", "write", lambda i: insert_rows(i.topic, i.targets, i.values, write_rows(
        i.read.values, i.table("producers"), i.table("exceptions"), i.statement.key_columns, i.values, base=i.base,
        windowed=i.windowed), i.publish_time, i.commit, keyed=i.statement.keyed, id_parts=i.statement.id_parts)),
    Step("outcome rows", "the outcome, read by the driver",
         lambda i: exp.select(*OUTCOME).from_(i.table("outcome")).order_by("producer")),
)
