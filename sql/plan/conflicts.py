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

from sqlglot import exp

from .common import source

#: The columns of the relation of a statement's dropped entries: producer, lowest and highest id, the producer's
#: mark when the statement began (NULL: none), the entry's fingerprint (NULL where conflicts are ignored) and its
#: own columns as JSON (NULL unless the ledger keeps them).
DROPPED_COLUMNS = ("producer", "sequence_id", "highest_sequence_id", "mark", "fingerprint", "entry")
KEYS = ("producer", "sequence_id")


def _same_key(left: str, right: str) -> exp.Expression:
    return exp.and_(*[exp.column(k, table=left).eq(exp.column(k, table=right)) for k in KEYS])


def _broadcast(query: exp.Select, alias: str, hinted: bool) -> exp.Select:
    """``query`` with a hint that its relation ``alias`` is small (the dropped entries' keys, joined to every
    written or topic row): broadcast to each task rather than both sides distributed. (An engine that takes no
    hints, DuckDB, plans the join from its own sizes.)"""
    if hinted:
        query.set("hint", exp.Hint(expressions=[exp.Anonymous(this="BROADCAST", expressions=[
            exp.to_identifier(alias)])]))
    return query


def _keyed(t: str) -> exp.Expression:
    """A semi-join condition of a topic row (aliased ``t``) to the dropped entries' keys (aliased ``d``)."""
    return exp.and_(exp.column("producer", table="d").eq(exp.column("_producer", table=t)),
                    exp.column("sequence_id", table="d").eq(exp.column("_sequence_id", table=t)))


def _written(rows: exp.Expression, fingerprint: exp.Expression, dropped: exp.Expression, hinted: bool
             ) -> exp.Select:
    """(producer, sequence_id, fingerprint) of the entry the statement wrote (``rows``, its topic rows: one per id)
    for each key of ``dropped``."""
    return _broadcast(exp.select(exp.alias_(exp.column("_producer", table="t"), "producer"),
                       exp.alias_(exp.column("_sequence_id", table="t"), "sequence_id"),
                       exp.alias_(fingerprint, "fingerprint"))
            .from_(source(rows, "t"))
            .join(exp.select(*KEYS).from_(source(dropped, "d")).subquery("d"), join_type="semi", on=_keyed("t")),
        "d", hinted)


def _latest(rows: exp.Expression, fingerprint: exp.Expression, dropped: exp.Expression,
            since: exp.Expression | None, hinted: bool) -> exp.Select:
    """(producer, sequence_id, fingerprint) of the last entry by position among ``rows`` (a topic's columns) for
    each key of ``dropped``, published at ``since`` or later where given. In two steps, so that the entries'
    own columns are read only where needed: the keys' last positions and commits from the narrow system columns,
    then those rows, joined on their commit too (Spark then reads only those commits' partitions; DuckDB skips the
    row groups outside the positions' range)."""
    t = lambda name: exp.column(name, table="t")        # noqa: E731
    i = lambda name: exp.column(name, table="i")        # noqa: E731
    keys = exp.select(*KEYS).from_(source(dropped, "d")).subquery("d")
    last = (exp.select(exp.alias_(t("_producer"), "producer"), exp.alias_(t("_sequence_id"), "sequence_id"),
                       exp.alias_(exp.Max(this=t("_position")), "position"),
                       exp.alias_(exp.Max(this=t("_commit")), "commit"))
            .from_(source(rows, "t"))
            .join(keys, join_type="semi", on=_keyed("t"))
            .group_by(t("_producer"), t("_sequence_id")))
    if since is not None:
        last = last.where(t("_publish_time") >= since)
    last = _broadcast(last, "d", hinted)
    return _broadcast(exp.select(exp.alias_(i("producer"), "producer"), exp.alias_(i("sequence_id"), "sequence_id"),
                       exp.alias_(fingerprint, "fingerprint"))
            .from_(source(rows, "t"))
            .join(last.subquery("i"), on=exp.and_(
                i("commit").eq(t("_commit")), i("producer").eq(t("_producer")),
                i("sequence_id").eq(t("_sequence_id")), i("position").eq(t("_position")))), "i", hinted)


def held(dropped: exp.Expression, written: exp.Expression, topic: exp.Expression,
         fingerprint: exp.Expression, since: exp.Expression | None, hinted: bool = False) -> exp.Select:
    """(producer, sequence_id, fingerprint) of the payload the topic holds for each id of a ``dropped`` entry: the
    entry the statement ``written`` with it, else the ``topic``'s last within the window (published at ``since``
    or later; None: no bound). ``fingerprint`` is over the columns of a topic row aliased ``t``; ``hinted``: the
    engine takes join hints (``_broadcast``).

    Example (p's 1 written before with "a"; the statement wrote 2 with "b" and dropped 1 and 2 again):
        >>> import duckdb
        >>> con = duckdb.connect()
        >>> _ = con.execute("CREATE TABLE topic AS SELECT * FROM (VALUES ('p', 1, 1, 'a', TIMESTAMP '2026-01-01', 1), "
        ...                 "('p', 2, 2, 'b', TIMESTAMP '2026-01-02', 2)) "
        ...                 "t(_producer, _sequence_id, _position, payload, _publish_time, _commit)")
        >>> _ = con.execute("CREATE TABLE d AS SELECT * FROM (VALUES ('p', 1), ('p', 2)) t(producer, sequence_id)")
        >>> written = exp.select("*").from_("topic").where("_sequence_id = 2").subquery()
        >>> query = held(exp.table_("d"), written, exp.table_("topic"), exp.column("payload", table="t"), None)
        >>> sorted(con.sql(query.sql("duckdb")).fetchall())
        [('p', 1, 'a'), ('p', 2, 'b')]
    """
    here = _written(written, fingerprint, dropped, hinted)
    there = _latest(topic, fingerprint, dropped, since, hinted)
    w, o = (lambda name: exp.column(name, table="w")), (lambda name: exp.column(name, table="o"))
    either = exp.func("coalesce", w("fingerprint"), o("fingerprint"))
    return (exp.select(exp.alias_(exp.func("coalesce", w("producer"), o("producer")), "producer"),
                       exp.alias_(exp.func("coalesce", w("sequence_id"), o("sequence_id")), "sequence_id"),
                       exp.alias_(either, "fingerprint"))
            .from_(here.subquery("w")).join(there.subquery("o"), join_type="full", on=_same_key("w", "o")))


def conflicting() -> exp.Expression:
    """Whether a dropped entry (aliased ``d``) conflicts with the payload held for its id (aliased ``h``, left
    joined: NULL where the topic holds none within the window)."""
    return exp.and_(exp.column("fingerprint", table="h").is_(exp.not_(exp.null())),
                    exp.column("fingerprint", table="h").neq(exp.column("fingerprint", table="d")))


def joined(dropped: exp.Expression, held_: exp.Expression) -> exp.Select:
    """The dropped entries (``d``) each beside the payload held for its id (``h``, NULL where none)."""
    return exp.select("d.*", exp.alias_(exp.column("fingerprint", table="h"), "held")).from_(
        source(dropped, "d")).join(source(held_, "h"), join_type="left", on=_same_key("d", "h"))


def counts(dropped: exp.Expression, held_: exp.Expression) -> exp.Select:
    """(producer, conflicts): per producer, its dropped entries whose payload conflicts with the one held."""
    return (exp.select("producer", exp.alias_(exp.Count(this=exp.Star()), "conflicts"))
            .from_(joined(dropped, held_).where(conflicting()).subquery("c")).group_by("producer"))


def first(dropped: exp.Expression, held_: exp.Expression) -> exp.Select:
    """(producer, sequence_id, fingerprint, held) of the first conflict, by producer then id (then fingerprint,
    among copies of one id): the one a refusal names."""
    return (exp.select("producer", "sequence_id", "fingerprint", "held")
            .from_(joined(dropped, held_).where(conflicting()).subquery("c"))
            .order_by("producer", "sequence_id", "fingerprint").limit(1))
