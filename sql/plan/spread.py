"""Ranges of one producer's entries (issue 41): the window plan distributes a statement's rows by producer, so a
producer that holds most of a statement (a backfill, a CDC stream from one source) is sorted and decided in one task.
Where a first look finds such a producer, its entries are split into ranges of their lowest ids, each range a
partition of the windows (``window_decisions``' ``ranges``) that any task may take; each range decides its entries
with the running maxima of the ranges before it carried in (``carried``: one small aggregate per range and a window
over those, a parallel prefix in the same query). Every other producer is one range, as before.

Only an unordered statement is spread: its arrival order is the ids' order, so a range of ids is a range of arrival,
and ``out_of_order`` (counted for ordered statements only) stays one set per producer.

The decision is exact whatever the ranges are, as long as a producer's ranges follow its arrival order (the range of
an entry is a function of its producer and lowest id, increasing with the id): the first look only balances the
work. A producer's counts come one row per range (its ``LAST`` rows), summed by the runner (``OUTCOME_SUMS``).
"""
from __future__ import annotations

from sqlglot import exp

from seqdedup.catalog.names import HIGHEST, PRODUCER, SEQUENCE_ID

from .common import source

RANGE = "__sd_range"                        # the entry's range: its producer's, or one of a large producer's
CARRIED_HIGHEST = "__sd_carried_highest"    # the highest id of the producer's entries in earlier ranges
CARRIED_LOWEST = "__sd_carried_lowest"      # the highest lowest id of the producer's entries in earlier ranges
#: How many of a statement's first entries the first look reads (``first_look``), and how many producers the pass
#: over the keys reports (``largest_producers``).
FIRST_LOOK, LARGEST = 10_000, 16
#: How the runner combines a spread producer's rows of the outcome (one per range) into one (``sql.plan.OUTCOME``).
OUTCOME_SUMS = {"sent": "sum", "written": "sum", "duplicates": "sum", "first_position": "min",
                "last_position": "max", "highest": "max", "out_of_order": "sum"}


def first_look(keys: exp.Query, rows: int) -> exp.Select:
    """The first ``rows`` entries' producers: how many, and how many entries the largest of them has. Cheap (the
    engine reads the first rows only), and only a hint: whether a producer may hold most of the statement.

    Example:
        >>> first_look(exp.select("__sd_producer").from_("k"), 1000).sql("spark")
        'SELECT COUNT(*) AS entries, MAX(entries) AS largest FROM (SELECT __sd_producer, COUNT(*) AS entries FROM (SELECT __sd_producer FROM (SELECT __sd_producer FROM k) AS k LIMIT 1000) AS f GROUP BY __sd_producer) AS g'
    """
    first = exp.select(PRODUCER).from_(source(keys, "k")).limit(rows)
    per = exp.select(PRODUCER, exp.alias_(exp.Count(this=exp.Star()), "entries")).from_(
        first.subquery("f")).group_by(PRODUCER)
    return exp.select(exp.alias_(exp.Count(this=exp.Star()), "entries"),
                      exp.alias_(exp.Max(this=exp.column("entries")), "largest")).from_(per.subquery("g"))


def largest_producers(keys: exp.Query, limit: int) -> exp.Select:
    """The ``limit`` producers with the most entries: each one's entries, lowest and highest lowest id, and the
    statement's entries in all (a pass over the keys, one row per producer kept)."""
    entries = exp.Count(this=exp.Star())
    return exp.select(
        PRODUCER, exp.alias_(entries, "entries"), exp.alias_(exp.Min(this=exp.column(SEQUENCE_ID)), "lowest"),
        exp.alias_(exp.Max(this=exp.column(SEQUENCE_ID)), "highest"),
        exp.alias_(exp.Window(this=exp.Sum(this=entries.copy())), "total"),
    ).from_(source(keys, "k")).group_by(PRODUCER).order_by(exp.Ordered(this=exp.column("entries"), desc=True)).limit(
        limit)


def hash_tasks(function: str, partitions: int, labels: int) -> exp.Select:
    """The task each of the labels ``0 .. labels - 1`` goes to when the engine distributes rows by a label over
    ``partitions`` (the engine's hash of it, modulo), so that a producer's ranges can be labelled to go to every
    task in turn.

    Example:
        >>> hash_tasks("hash", 2, 64).sql("spark")
        'SELECT id AS label, PMOD(HASH(CAST(id AS INT)), 2) AS task FROM RANGE(64)'
    """
    task = exp.func("pmod", exp.Anonymous(this=function, expressions=[exp.cast(exp.column("id"), "int")]),
                    exp.convert(partitions))
    return exp.select(exp.alias_(exp.column("id"), "label"), exp.alias_(task, "task")).from_(
        exp.Table(this=exp.Anonymous(this="RANGE", expressions=[exp.convert(labels)])))


def labels_in_turn(tasks: list[int], partitions: int, ranges: int) -> list[int]:
    """Increasing labels for ``ranges`` ranges, the j-th going to task ``j % partitions`` (``tasks[label]`` is the
    task of a label: ``hash_tasks``); None where there are too few labels.

    Example:
        >>> labels_in_turn([1, 1, 0, 1, 0, 0, 1], 2, 4)
        [2, 3, 4, 6]
    """
    labels, label = [], -1
    for j in range(ranges):
        label = next((i for i in range(label + 1, len(tasks)) if tasks[i] == j % partitions), None)
        if label is None:
            return None
        labels.append(label)
    return labels


def range_bounds(lowest: int, highest: int, ranges: int) -> list[int]:
    """Where a producer's ranges begin, after its first: ``ranges`` ranges of equal width over its ids (fewer
    when it has fewer ids).

    Example:
        >>> range_bounds(0, 9_999_999, 4)
        [2500000, 5000000, 7500000]
        >>> range_bounds(5, 6, 4)
        [6]
    """
    width = highest - lowest + 1
    return sorted({lowest + width * j // ranges for j in range(1, ranges)} - {lowest})


def ranges_of(spread: dict[str, tuple[list[int], list[int]]], producer_hash: str) -> exp.Expression:
    """Each entry's range: for a producer in ``spread`` (name -> the ids where its ranges begin after the first, and
    a label per range, increasing), the label of the range its lowest id falls in; for any other producer, its
    hash (one range: the producer's entries stay together, distributed as by producer).

    Example:
        >>> ranges_of({"p": ([10, 20], [0, 3, 5])}, "hash").sql("spark")
        "CASE WHEN __sd_producer = 'p' THEN CASE WHEN __sd_sequence_id < 10 THEN 0 WHEN __sd_sequence_id < 20 THEN 3 ELSE 5 END ELSE HASH(__sd_producer) END"
    """
    s = exp.column(SEQUENCE_ID)
    whens = []
    for producer, (bounds, labels) in spread.items():
        within = exp.Case(ifs=[exp.If(this=s.copy() < exp.convert(bound), true=exp.convert(label))
                               for bound, label in zip(bounds, labels)], default=exp.convert(labels[len(bounds)]))
        whens.append(exp.If(this=exp.column(PRODUCER).eq(exp.Literal.string(producer)), true=within))
    return exp.Case(ifs=whens, default=exp.Anonymous(this=producer_hash, expressions=[exp.column(PRODUCER)]))


def carried(rows: exp.Expression) -> exp.Select:
    """Per producer and range of ``rows``: the highest id and the highest lowest id of the producer's entries in
    its earlier ranges (NULL for its first): what each range's decision starts from, besides the mark.

    Example:
        >>> [e.alias_or_name for e in carried(exp.table_("x")).expressions]
        ['__sd_producer', '__sd_range', '__sd_carried_highest', '__sd_carried_lowest']
        >>> carried(exp.table_("x")).expressions[2].sql("spark")
        'MAX(__sd_top_of_range) OVER (PARTITION BY __sd_producer ORDER BY __sd_range ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS __sd_carried_highest'
    """
    per_range = exp.select(PRODUCER, RANGE, exp.alias_(exp.Max(this=exp.column(HIGHEST)), "__sd_top_of_range"),
                           exp.alias_(exp.Max(this=exp.column(SEQUENCE_ID)), "__sd_lowest_of_range")).from_(
        rows.copy()).group_by(PRODUCER, RANGE)

    def before(column: str) -> exp.Window:
        return exp.Window(this=exp.Max(this=exp.column(column)), partition_by=[exp.column(PRODUCER)],
                          order=exp.Order(expressions=[exp.Ordered(this=exp.column(RANGE), nulls_first=True)]),
                          spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="1",
                                              end_side="PRECEDING"))

    return exp.select(PRODUCER, RANGE, exp.alias_(before("__sd_top_of_range"), CARRIED_HIGHEST),
                      exp.alias_(before("__sd_lowest_of_range"), CARRIED_LOWEST)).from_(per_range.subquery("a"))


def with_carried(rows_name: str) -> exp.Select:
    """The rows of the CTE ``rows_name`` (distributed by range) with what their range carries in (``carried``,
    broadcast: one row per producer and range)."""
    rows, c = exp.table_(rows_name), "__sd_c"
    on = exp.and_(*[exp.column(k, table=rows_name).eq(exp.column(k, table=c)) for k in (PRODUCER, RANGE)])
    joined = exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier(rows_name)),
                        exp.column(CARRIED_HIGHEST, table=c), exp.column(CARRIED_LOWEST, table=c)).from_(
        rows).join(carried(rows).subquery(c), join_type="left", on=on)
    joined.set("hint", exp.Hint(expressions=[exp.Anonymous(this="BROADCAST", expressions=[exp.column(c)])]))
    return joined
