"""Payload conflicts (R18): a dropped entry whose (producer, lowest id) the topic holds with another payload. What
the statement dropped comes as one relation, whichever plan decided (``DROPPED_COLUMNS``): the row plan sets it
apart before removing it, Spark's window plan stages it apart in its write, and the others work it out as the
statement's rows less those written. The payload the topic *holds* for an id is that of the entry last written
with it, within the conflict window: the statement's own written entry if it wrote one (its position is the
highest), else the topic's latest. Payloads are compared by a 64-bit fingerprint of the user's columns as the
topic stores them (``EngineAdapter.fingerprint``), computed where compared: only for the dropped entries and the
entries written with their ids, so a topic carries no column for it and a statement that drops nothing pays
nothing."""
from __future__ import annotations

from typing import Callable

from sqlglot import exp

from .common import above, source

#: A 64-bit hash of a producer and an id (the engine's: ``EngineAdapter.fingerprint`` of the two).
KeyHash = Callable[[exp.Expression, exp.Expression], exp.Expression]
#: The column of the dropped entries' keys hashed (``dropped_keys``).
HASHED = "k"

#: The columns of the relation of a statement's dropped entries: producer, lowest and highest id, the producer's
#: mark when the statement began (NULL: none; or a stand-in that its reason reads alike, ``ledger.dropped_staged``),
#: the entry's fingerprint (NULL where conflicts are ignored) and its own columns as JSON (NULL unless the ledger
#: keeps them).
DROPPED_COLUMNS = ("producer", "sequence_id", "highest_sequence_id", "mark", "fingerprint", "entry")
KEYS = ("producer", "sequence_id")
#: The column ``judged`` adds to the dropped entries: the fingerprint of the payload the topic holds for the id.
HELD = "held"
#: A column the dropped entries may carry beside ``DROPPED_COLUMNS`` (Spark's window plan, where it can:
#: ``sql.plan.ledger.dropped_staged``): for an entry above its mark, the fingerprint of the entry the statement wrote
#: with its id.
WRITTEN = "written_fingerprint"


def _same_key(left: str, right: str) -> exp.Expression:
    return exp.and_(*[exp.column(k, table=left).eq(exp.column(k, table=right)) for k in KEYS])


def _broadcast(query: exp.Select, aliases: str, hinted: bool) -> exp.Select:
    """``query`` with a hint that its relations ``aliases`` (names apart by spaces) are small (the dropped entries'
    keys, joined to every written or topic row; what is held for them): broadcast to each task rather than both
    sides distributed. (An engine that takes no hints, DuckDB, plans the join from its own sizes.)"""
    if hinted:
        query.set("hint", exp.Hint(expressions=[exp.Anonymous(this="BROADCAST", expressions=[
            exp.to_identifier(alias) for alias in aliases.split()])]))
    return query


def keyed(t: str, hashed: KeyHash | None = None) -> exp.Expression:
    """A semi-join condition of a topic row (aliased ``t``) to the dropped entries' keys (aliased ``d``), or to their
    ``hashed`` keys (``dropped_keys``)."""
    if hashed is not None:
        return exp.column(HASHED, table="d").eq(hashed(exp.column("_producer", table=t),
                                                       exp.column("_sequence_id", table=t)))
    return exp.and_(exp.column("producer", table="d").eq(exp.column("_producer", table=t)),
                    exp.column("sequence_id", table="d").eq(exp.column("_sequence_id", table=t)))


def dropped_keys(dropped: exp.Expression, which: exp.Expression | None,
                 hashed: KeyHash | None = None) -> exp.Subquery:
    """The keys of the ``dropped`` entries (aliased ``d``) that ``which`` selects (None: all); where ``hashed`` is
    given, each key's hash alone (``HASHED``)."""
    columns = KEYS if hashed is None else [exp.alias_(hashed(*map(exp.column, KEYS)), HASHED)]
    keys = exp.select(*columns).from_(source(dropped, "d"))
    return (keys if which is None else keys.where(which)).subquery("d")


def above_mark() -> exp.Expression:
    """Whether a dropped entry (aliased ``d``) is above the mark its producer began the statement with (if any)."""
    d = lambda name: exp.column(name, table="d")        # noqa: E731
    return above(d("sequence_id"), d("mark"))


def _written(rows: exp.Expression, fingerprint: exp.Expression, keys: exp.Subquery, hinted: bool) -> exp.Select:
    """(producer, sequence_id, fingerprint) of the entry the statement wrote (``rows``, its topic rows: one per id)
    for each of the ``keys``."""
    return _broadcast(exp.select(exp.alias_(exp.column("_producer", table="t"), "producer"),
                       exp.alias_(exp.column("_sequence_id", table="t"), "sequence_id"),
                       exp.alias_(fingerprint, "fingerprint"))
            .from_(source(rows, "t")).join(keys, join_type="semi", on=keyed("t")), "d", hinted)


def _latest(rows: exp.Expression, fingerprint: exp.Expression, keys: exp.Subquery,
            since: exp.Expression | None, hinted: bool, whole: bool, hashed: KeyHash | None = None) -> exp.Select:
    """(producer, sequence_id, fingerprint) of the last entry by position among ``rows`` (a topic's columns) for
    each of the ``keys``, published at ``since`` or later where given. In one pass where ``whole`` (every row's
    columns read); else in two, so that the entries' own columns are read only where needed: the keys' last
    positions and commits from the narrow system columns, then those rows, joined on their commit too (Spark then
    reads only those commits' partitions; DuckDB skips the row groups outside the positions' range). On a small
    topic the second pass costs more than the columns it spares: on Spark ``local[2]``, the look-up of a 5M-row
    statement's 500,000 retries on a topic of 1M rows in 6 MB took 0.7 s in one pass, 1.05 to 1.15 s in two."""
    t = lambda name: exp.column(name, table="t")        # noqa: E731
    i = lambda name: exp.column(name, table="i")        # noqa: E731
    # (whole: each id's last fingerprint at once; else its last position and commit, which find that row again)
    latest = ([exp.alias_(exp.ArgMax(this=fingerprint, expression=t("_position")), "fingerprint")] if whole else
              [exp.alias_(exp.Max(this=t("_position")), "position"), exp.alias_(exp.Max(this=t("_commit")), "commit")])
    last = (exp.select(exp.alias_(t("_producer"), "producer"), exp.alias_(t("_sequence_id"), "sequence_id"), *latest)
            .from_(source(rows, "t"))
            .join(keys, join_type="semi", on=keyed("t", hashed))
            .group_by(t("_producer"), t("_sequence_id")))
    if since is not None:
        last = last.where(t("_publish_time") >= since)
    last = _broadcast(last, "d", hinted)
    if whole:
        return last
    return _broadcast(exp.select(exp.alias_(i("producer"), "producer"), exp.alias_(i("sequence_id"), "sequence_id"),
                       exp.alias_(fingerprint, "fingerprint"))
            .from_(source(rows, "t"))
            .join(last.subquery("i"), on=exp.and_(
                i("commit").eq(t("_commit")), i("producer").eq(t("_producer")),
                i("sequence_id").eq(t("_sequence_id")), i("position").eq(t("_position")))), "i", hinted)


def held_by_topic(dropped: exp.Expression, topic: exp.Expression, fingerprint: exp.Expression,
                  since: exp.Expression | None, late: bool, hinted: bool = False, whole: bool = False,
                  hashed: KeyHash | None = None) -> exp.Select:
    """(producer, sequence_id, fingerprint) of the ``topic``'s last entry published at ``since`` or later for each
    id of the ``dropped`` entries it can hold: those at or below their marks, or every one where an entry above its
    mark may have come ``late`` (see ``judged``). ``whole``: the topic is read in one pass (``_latest``).

    ``hashed``: the topic's rows are matched to those ids by a hash of (producer, id), a join on one BIGINT (on
    Spark ``local[2]``, 500,000 retries' keys broadcast to a 1M-row topic: 0.49 to 0.63 s against 0.75 to 0.78 s on
    the two columns). The answer may then also hold an id no dropped entry has, one whose key shares a hash with a
    dropped entry's (about once in 2^64 / (ids x topic rows)): for a caller that joins it to the entries on their
    exact keys, which leaves such an id out.

    Example (p's 1 written twice, its marks purged between: the second is held; both ways alike):
        >>> import duckdb
        >>> con = duckdb.connect()
        >>> _ = con.execute("CREATE TABLE topic AS SELECT * FROM (VALUES ('p', 1, 1, 'a', 1), ('p', 1, 2, 'b', 2), "
        ...                 "('q', 1, 3, 'c', 2)) t(_producer, _sequence_id, _position, payload, _commit)")
        >>> _ = con.execute("CREATE TABLE d AS SELECT 'p' AS producer, 1 AS sequence_id, 1 AS mark")
        >>> [con.sql(held_by_topic(exp.table_("d"), exp.table_("topic"), exp.column("payload", table="t"), None,
        ...                        late=False, whole=whole).sql("duckdb")).fetchall() for whole in (False, True)]
        [[('p', 1, 'b')], [('p', 1, 'b')]]
        >>> con.sql(held_by_topic(exp.table_("d"), exp.table_("topic"), exp.column("payload", table="t"), None,
        ...                       late=False, hashed=lambda p, s: exp.func("hash", p, s)).sql("duckdb")).fetchall()
        [('p', 1, 'b')]
    """
    return _latest(topic, fingerprint, dropped_keys(dropped, None if late else exp.not_(above_mark()), hashed), since,
                   hinted, whole, hashed)


def held_at_marks(dropped: exp.Expression, topic: exp.Expression, fingerprint: exp.Expression,
                  since: exp.Expression | None, hinted: bool = False,
                  positions: tuple[int, int] | None = None) -> exp.Select:
    """``held_by_topic`` for a statement of keys (R20), found by position. A key's mark is the position its entry was
    last written at (its highest id: ``common.insert_rows``), so what the topic holds for a key dropped at its mark
    is the row at that position: the topic's rows are matched on ``_position``, which the engine can skip by (a
    join of 15M rows on their keys' 36-character names took most of DuckDB's judgement of a statement of 5M keys).
    A keyed entry above its mark (a key without one) is dropped only as a repeat of the statement's own entry, which
    ``judged`` takes from what the statement wrote. ``positions``: the least and greatest of the marks, where the
    caller knows them; the topic's rows outside are not read (Spark skips a file by its Parquet statistics: a
    statement of 5M keys judged in 5.6 to 6.0 s where it took 7.7, its marks among the first 1M of 15M positions).

    Example (k written at 7, then again at 9 once it had left the window; dropped at its mark, 9):
        >>> import duckdb
        >>> con = duckdb.connect()
        >>> _ = con.execute("CREATE TABLE topic AS SELECT * FROM (VALUES ('k', 0, 7, 'a'), ('k', 0, 9, 'b')) "
        ...                 "t(_producer, _sequence_id, _position, payload)")
        >>> _ = con.execute("CREATE TABLE d AS SELECT * FROM (VALUES ('k', 0, 9), ('k', 0, 9)) "
        ...                 "t(producer, sequence_id, mark)")
        >>> con.sql(held_at_marks(exp.table_("d"), exp.table_("topic"), exp.column("payload", table="t"),
        ...                       None).sql("duckdb")).fetchall()
        [('k', 0, 'b')]
        >>> [con.sql(held_at_marks(exp.table_("d"), exp.table_("topic"), exp.column("payload", table="t"), None,
        ...                        positions=positions).sql("duckdb")).fetchall() for positions in [(9, 9), (1, 8)]]
        [[('k', 0, 'b')], []]
    """
    t = lambda name: exp.column(name, table="t")        # noqa: E731
    # (each mark once, for the join's side that is held in memory: a statement's retries are many copies of fewer
    # keys, 720,000 dropped entries at 10,000 marks in the key window's benchmark; a key without a mark, NULL, is at
    # no position)
    marks = exp.select("producer", "sequence_id", "mark").distinct().from_(source(dropped, "d")).where(
        exp.column("mark", table="d").is_(exp.not_(exp.null())))
    held = (exp.select(exp.alias_(t("_producer"), "producer"), exp.alias_(t("_sequence_id"), "sequence_id"),
                       exp.alias_(fingerprint, "fingerprint"))
            .from_(source(topic, "t"))
            .join(marks.subquery("d"), join_type="semi",
                  on=exp.and_(exp.column("mark", table="d").eq(t("_position")), keyed("t"))))
    if since is not None:
        held = held.where(t("_publish_time") >= since)
    if positions is not None:
        held = held.where(t("_position").between(*map(exp.convert, positions)))
    return _broadcast(held, "d", hinted)


def judged(dropped: exp.Expression, written: exp.Expression | None, topic: exp.Expression,
           fingerprint: exp.Expression, since: exp.Expression | None, late: bool, hinted: bool = False,
           whole: bool = False, keys: bool = False, positions: tuple[int, int] | None = None) -> exp.Select:
    """The ``dropped`` entries (``DROPPED_COLUMNS``), each with ``held``: the fingerprint of the payload the topic
    holds for its id (NULL: none within the window). That is the entry the statement ``written`` with it (None: the
    dropped entries carry its fingerprint, ``WRITTEN``), else the ``topic``'s last published at ``since`` or later
    (None: no bound). ``fingerprint`` is over the columns of a topic row aliased ``t``; ``hinted``: the engine takes
    join hints (``_broadcast``); ``whole``: the topic is read in one pass (``_latest``); ``keys``: the dropped
    entries are a statement of keys' (R20), whose topic entries are found by position (``held_at_marks``, with its
    ``positions``).

    Each side is asked only for the ids it can hold. The statement writes only ids above its producer's mark, and
    the topic holds none above it; an entry above its mark is dropped, without ORDER BY or batch entries, only for
    an earlier entry of its id, which the statement wrote (whose payload is the one held). Where an entry above its
    mark may have come ``late`` instead (never written: its producer's marks were purged, R11), the topic is asked
    for every id.

    Example (p's mark 1, its 1 written before with "a"; the statement wrote 2 with "b" and dropped 1 and 2 again):
        >>> import duckdb
        >>> con = duckdb.connect()
        >>> _ = con.execute("CREATE TABLE topic AS SELECT * FROM (VALUES ('p', 1, 1, 'a', TIMESTAMP '2026-01-01', 1), "
        ...                 "('p', 2, 2, 'b', TIMESTAMP '2026-01-02', 2)) "
        ...                 "t(_producer, _sequence_id, _position, payload, _publish_time, _commit)")
        >>> _ = con.execute("CREATE TABLE d AS SELECT * FROM (VALUES ('p', 1, 1, 1, 'a'), ('p', 2, 2, 1, 'c')) "
        ...                 "t(producer, sequence_id, highest_sequence_id, mark, fingerprint)")
        >>> written = exp.select("*").from_("topic").where("_sequence_id = 2").subquery()
        >>> query = judged(exp.table_("d"), written, exp.table_("topic"), exp.column("payload", table="t"), None,
        ...                late=False)
        >>> sorted(con.sql(query.sql("duckdb")).fetchall())
        [('p', 1, 1, 1, 'a', 'a'), ('p', 2, 2, 1, 'c', 'b')]
    """
    there = held_at_marks(dropped, topic, fingerprint, since, hinted, positions) if keys else \
        held_by_topic(dropped, topic, fingerprint, since, late, hinted, whole)
    query = exp.select("d.*").from_(source(dropped, "d"))
    if written is None:
        here = exp.column(WRITTEN, table="d")
    else:
        query = query.join(_written(written, fingerprint, dropped_keys(dropped, above_mark()), hinted).subquery("w"),
                           join_type="left", on=_same_key("w", "d"))
        here = exp.column("fingerprint", table="w")
    held = exp.func("coalesce", here, exp.column("fingerprint", table="o"))
    return _broadcast(query.select(exp.alias_(held, HELD)).join(
        there.subquery("o"), join_type="left", on=_same_key("o", "d")), "w o" if written is not None else "o", hinted)


def conflicting() -> exp.Expression:
    """Whether an entry of the judged dropped entries (aliased ``d``) conflicts with the payload held for its id
    (none held within the window: no conflict)."""
    held = exp.column(HELD, table="d")
    return exp.and_(held.is_(exp.not_(exp.null())), held.neq(exp.column("fingerprint", table="d")))


def counts(judged_: exp.Expression) -> exp.Select:
    """(producer, conflicts): per producer, its dropped entries whose payload conflicts with the one held."""
    return (exp.select(exp.column("producer", table="d"), exp.alias_(exp.Count(this=exp.Star()), "conflicts"))
            .from_(source(judged_, "d")).where(conflicting()).group_by(exp.column("producer", table="d")))


def first(judged_: exp.Expression) -> exp.Select:
    """(producer, sequence_id, fingerprint, held) of the first conflict, by producer then id (then fingerprint,
    among copies of one id): the one a refusal names."""
    d = lambda name: exp.column(name, table="d")        # noqa: E731
    return (exp.select(d("producer"), d("sequence_id"), d("fingerprint"), d(HELD)).from_(source(judged_, "d"))
            .where(conflicting()).order_by(d("producer"), d("sequence_id"), d("fingerprint")).limit(1))
