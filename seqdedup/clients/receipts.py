"""What happened to each entry a client sent: written at a position, or dropped as a duplicate (R5, per entry).

Pulsar acknowledges every message: with its message id when it was persisted, and as a duplicate when it was not.
A statement's result only counts per producer, so a client that needs the per-entry answer (the ``Producer``, the
Kafka ingest) reads it back, set-based, from the topic: an entry sent with ids ``(producer, s..h)`` is in the topic
when a row has exactly those ids, and it was written by this send when that row's commit is one of the send's own
(a retried send may have committed on an earlier attempt whose answer was lost).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

from sqlglot import exp

from seqdedup.catalog.names import ARRIVAL, HIGHEST, PRODUCER, SEQUENCE_ID
from seqdedup.kept import Kept


@dataclass(frozen=True)
class Receipt:
    """One entry's outcome."""

    sequence_id: int
    highest_sequence_id: int
    position: int | None    # the entry's message id in the topic; None when the topic holds no row with its exact ids
    duplicate: bool         # not written by this send: the topic already had it, or its id was at or below the mark


def receipts_query(topic: exp.Table, entries: exp.Query, own_commits: Iterable[int], *,
                   everywhere: bool = False) -> exp.Select:
    """Per entry, in arrival order: its ids, the position of the topic row with the same ids (the latest, when
    deduplication was off and the topic has several) and whether that row is this send's.

    Only the send's own commits are searched, unless ``everywhere``: a send's written entries are there, and only a
    duplicate needs the whole topic (where the earlier write of it is). An entry that arrives twice in one send is
    written once: the later arrival is a duplicate of the first.
    """
    ids = ["_producer", "_sequence_id", "_highest_sequence_id"]
    commits = [c if isinstance(c, exp.Expression) else exp.convert(c) for c in own_commits] or [exp.convert(-1)]
    where = exp.column("_producer").isin(query=exp.select(PRODUCER).from_(entries.subquery("p")).distinct())
    if not everywhere:
        where = exp.and_(exp.column("_commit").isin(*[c.copy() for c in commits]), where)
    found = (exp.select(*ids, exp.alias_(exp.Max(this=exp.column("_position")), "position"),
                        exp.alias_(exp.Max(this=exp.column("_commit")), "written_by"))
             .from_(topic.copy()).where(where).group_by(*ids))
    keys = [exp.column(c, "e") for c in (PRODUCER, SEQUENCE_ID, HIGHEST)]
    first = exp.Window(this=exp.RowNumber(), partition_by=[k.copy() for k in keys],
                       order=exp.Order(expressions=[exp.Ordered(this=exp.column(ARRIVAL, "e"))])).eq(1)
    own = exp.func("coalesce", exp.column("written_by", "f").isin(*commits), exp.false())
    on = exp.and_(*[exp.column(c, "f").eq(k.copy()) for c, k in zip(ids, keys)])
    return (exp.select(*[k.copy() for k in keys[1:]], exp.column("position", "f"),
                       exp.alias_(exp.not_(exp.and_(own, first)), "duplicate"))
            .from_(entries.subquery("e"))
            .join(found.subquery("f"), on=on, join_type="left")
            .order_by(exp.column(ARRIVAL, "e")))


#: The receipts queries of sends, kept from one send to the next (their commits are parameters): by their shape.
_KEPT: Kept[exp.Select] = Kept(256)


def receipts(adapter, topic: exp.Table, entries: exp.Query, own_commits: Iterable[int]) -> list[tuple]:
    """The rows of ``receipts_query``: from the send's own commits, and from the whole topic only when some entry
    was not written by them (a duplicate, whose position is that of its earlier write). The commits are parameters,
    so a producer sending one entry after another runs the same SQL each time."""
    commits = sorted(set(own_commits))
    values = {f"__sd_own_commit_{i}": commit for i, commit in enumerate(commits)}
    marks = [exp.Placeholder(this=name) for name in values]
    with adapter.parameters(values):
        rows = adapter.fetchall(_kept(topic, entries, marks, everywhere=False))
        if any(row[2] is None for row in rows):
            rows = adapter.fetchall(_kept(topic, entries, marks, everywhere=True))
    return rows


def _kept(topic: exp.Table, entries: exp.Query, commits: list[exp.Expression], *, everywhere: bool) -> exp.Select:
    def made() -> exp.Select:
        query = receipts_query(topic, entries, commits, everywhere=everywhere)
        query.meta["kept"] = True
        return query

    return _KEPT.made((topic.sql(), entries.sql(), len(commits), everywhere), made)


class Receipts:
    """The outcomes of one send, in the order its entries were given."""

    def __init__(self, rows: list[tuple]):
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: int | slice) -> "Receipt | Receipts":
        if isinstance(index, slice):
            return Receipts(self._rows[index])
        return Receipt(*self._rows[index])

    def __iter__(self) -> Iterator[Receipt]:
        return (Receipt(*row) for row in self._rows)

    @property
    def written(self) -> int:
        return sum(1 for row in self._rows if not row[3])

    @property
    def duplicates(self) -> int:
        return len(self._rows) - self.written

    @property
    def positions(self) -> list[int | None]:
        return [row[2] for row in self._rows]

    def __repr__(self) -> str:
        return f"Receipts(written={self.written}, duplicates={self.duplicates})"
