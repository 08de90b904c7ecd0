"""Ranges of one producer's entries (issue 41): the window plan distributes a statement's rows by producer, so a
producer that holds most of a statement (a backfill, a CDC stream from one source) is sorted and decided in one task.
Where a first look finds such a producer, its entries are split into ranges of their lowest ids, each range a
partition of the windows (``window_decisions``' ``ranges``) that any task may take; each range decides its entries
with what the ranges before it carry in. In an unordered statement a range's entries have higher lowest ids than
every earlier range's, so only a batch entry that reaches past its range's end can change a later range's decision:
it is copied into each range it reaches (``spread_rows``), where it weighs in the windows as it would in one window
over the producer's entries, and is neither written nor counted. One read of the rows, one distribution: a source
that gives other rows when read again cannot make two ranges disagree. Every other producer is one range, as
before.

Only an unordered statement is spread: its arrival order is the ids' order, so a range of ids is a range of arrival,
and ``out_of_order`` (counted for ordered statements only) stays one set per producer.

Composite ids (R19: a CDC slot's (lsn, event index), one producer for the whole stream) are spread too: their ranges
are bounds of the ids' text, whose order is the tuples' (``composite_bounds``), and an entry reaches no range but its
own (a composite id has no highest id past itself: no batch entries).

The decision is exact whatever the ranges are, as long as a producer's ranges follow its arrival order (the range of
an entry is a function of its producer and lowest id, increasing with the id): the first look only balances the
work. A producer's counts come one row per range (its ``LAST`` rows), summed by the runner (``OUTCOME_SUMS``).
"""
from __future__ import annotations

from sqlglot import exp

from seqdedup.catalog import ids
from seqdedup.catalog.names import HIGHEST, PRODUCER, SEQUENCE_ID

from .common import invalid, source

RANGE = "__sd_range"        # the row's range: its producer's, or one of a large producer's
REACH = "__sd_reach"        # 0: the entry itself, in its own range; n > 0: its copy in the n-th range after it
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


def largest_producers(keys: exp.Query, limit: int, id_parts: int | None = None) -> exp.Select:
    """The ``limit`` producers with the most entries: each one's entries, lowest and highest lowest id, the
    statement's entries in all, and how many of them are invalid (R4: the runner refuses the statement then, as the
    window plan's query would after a read of its rows; this pass read them already). A pass over the keys, one row
    per producer kept. (Composite ids, ``id_parts``: the lowest and highest as the statement works on them, text on
    the engines that spread.)"""
    entries = exp.Count(this=exp.Star())
    bad = exp.func("count_if", invalid(*(exp.column(c) for c in (PRODUCER, SEQUENCE_ID, HIGHEST)), id_parts))
    return exp.select(
        PRODUCER, exp.alias_(entries, "entries"), exp.alias_(exp.Min(this=exp.column(SEQUENCE_ID)), "lowest"),
        exp.alias_(exp.Max(this=exp.column(SEQUENCE_ID)), "highest"),
        exp.alias_(exp.Window(this=exp.Sum(this=entries.copy())), "total"),
        exp.alias_(exp.Window(this=exp.Sum(this=bad)), "invalid"),
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


def composite_bounds(lowest: str, highest: str, ranges: int) -> list[str]:
    """``range_bounds`` for composite ids (R19), given and returned as their text: ``ranges`` ranges of equal width
    over the tuples read as one number, the first part the most significant (the text orders as the tuple does, so
    the statement compares an id's text with a bound's).

    Example:
        >>> composite_bounds(ids.encoded((100, 0)), ids.encoded((500, 7)), 4)
        ['c200a2', 'c300a4', 'c400a6']
        >>> composite_bounds("a5a0", "a5a0", 4)
        []
    """
    low, high = ids.decoded(lowest), ids.decoded(highest)
    tupled = (lambda n: tuple(n // ids.PART_LIMIT ** (len(low) - 1 - i) % ids.PART_LIMIT for i in range(len(low))))
    return [ids.encoded(tupled(bound)) for bound in range_bounds(ids.packed(low), ids.packed(high), ranges)]


def ranges_of(spread: dict[str, tuple[list, list[int]]], producer_hash: str, batches: bool = True) -> exp.Expression:
    """The ranges each entry reaches, its own first: for a producer in ``spread`` (name -> the ids where its ranges
    begin after the first, and a label per range, increasing), the labels of the ranges from the one its lowest id
    falls in to the one its highest id falls in (a batch entry may reach past its range's end; without ``batches``,
    composite ids, only its own); for any other producer, its hash (one range: the producer's entries stay together,
    distributed as by producer).

    Example:
        >>> ranges_of({"p": ([10, 20], [0, 3, 5])}, "hash").sql("spark")
        "CASE WHEN __sd_producer = 'p' THEN SLICE(ARRAY(0, 3, 5), CASE WHEN __sd_sequence_id < 10 THEN 1 WHEN __sd_sequence_id < 20 THEN 2 ELSE 3 END, GREATEST(CASE WHEN __sd_highest < 10 THEN 1 WHEN __sd_highest < 20 THEN 2 ELSE 3 END - CASE WHEN __sd_sequence_id < 10 THEN 1 WHEN __sd_sequence_id < 20 THEN 2 ELSE 3 END, 0) + 1) ELSE ARRAY(HASH(__sd_producer)) END"
    """
    def index(column: str, bounds: list[int]) -> exp.Expression:     # (1-based: SLICE's)
        return exp.Case(ifs=[exp.If(this=exp.column(column) < exp.convert(bound), true=exp.convert(i + 1))
                             for i, bound in enumerate(bounds)], default=exp.convert(len(bounds) + 1))

    whens = []
    for producer, (bounds, labels) in spread.items():
        first, last = index(SEQUENCE_ID, bounds), index(HIGHEST, bounds)
        reach = exp.Add(this=exp.Greatest(this=exp.Sub(this=last, expression=first.copy()),
                                          expressions=[exp.convert(0)]), expression=exp.convert(1)) if batches \
            else exp.convert(1)
        whens.append(exp.If(this=exp.column(PRODUCER).eq(exp.Literal.string(producer)), true=exp.ArraySlice(
            this=exp.Array(expressions=[exp.convert(label) for label in labels]), start=first, end=reach)))
    return exp.Case(ifs=whens, default=exp.Array(expressions=[
        exp.Anonymous(this=producer_hash, expressions=[exp.column(PRODUCER)])]))


def spread_rows(rows: exp.Select, ranges: exp.Expression) -> exp.Select:
    """``rows`` with a row per range each entry reaches (``ranges_of``): its own (``REACH`` 0), then a copy in each
    later range its highest id reaches, a batch entry that spans the range's start. A copy is never written nor
    counted; it only carries the entry's ids into that range's windows, as the entry itself does in one window over
    all its producer's entries: what the range starts from, with no second read of the statement's rows.

    Example:
        >>> spread_rows(exp.select("v.*").from_("v"), exp.Array(expressions=[exp.convert(7)])).sql("spark")
        'SELECT v.*, POSEXPLODE(ARRAY(7)) AS (__sd_reach, __sd_range) FROM v'
    """
    return rows.select(exp.Aliases(this=exp.Posexplode(this=ranges.copy()),
                                   expressions=[exp.to_identifier(REACH), exp.to_identifier(RANGE)]))
