"""State reads and writes as sqlglot trees: the last snapshot, the replayed marks, and snapshot rows."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlglot import exp

from .schema import ATTEMPT, PRODUCER_SEQUENCES, catalog_table, written_by_seqdedup
from .templates import template

PRODUCER_SEQUENCES_TABLE = catalog_table("producer_sequences")


#: Snapshot kinds after which the state starts over from the snapshot's own rows, which no replay can check: the
#: topic was enabled (no rows), or idle producers were purged (R11) in the chain the full snapshot closes.
STARTS = ("enabled", "purge")


@dataclass(frozen=True)
class SnapshotHeader:
    """The latest complete snapshot of a topic, and the chain of snapshots the state is made of.

    A full snapshot holds every producer; an increment only those that changed since its parent (R7). The chain is
    the latest complete full snapshot, then each complete increment whose parent is the one before it, up to the
    first that is missing or torn: its rows, the newest per producer, are the state as of the chain's last
    position, and a replay of the entries after it does the rest."""

    snapshot_id: int          # its id (the chain's last); the next snapshot takes next_snapshot_id
    position: int             # it covers every entry with _position <= position
    kind: str                 # enabled | disabled | snapshot | purge | repair | increment
    taken_at: dt.datetime     # when it was taken
    commit_id: int            # the topic commit that wrote it
    next_snapshot_id: int
    chain: tuple[int, ...] = ()     # the ids of the chain, its full snapshot first (this one last)
    increment_rows: int = 0         # the rows of the chain's increments (tombstones included)
    purged: bool = False            # an increment of the chain purged producers: the next full snapshot is a start
    start_id: int | None = None     # the last snapshot where the state started over (STARTS), which retention keeps

    @property
    def enabled(self) -> bool:
        """Deduplication was on when the snapshot was taken (a disabled topic has no state)."""
        return self.kind != "disabled"

    def extended(self, snapshot_id: int, position: int, kind: str, taken_at: dt.datetime, commit_id: int, *,
                 rows: int, full: bool) -> "SnapshotHeader":
        """The header once a snapshot of ``rows`` producer rows is written after this one: a new chain when it is
        full, else this chain with one more increment."""
        start = snapshot_id if full and kind in STARTS else self.start_id
        if full:
            return SnapshotHeader(snapshot_id, position, kind, taken_at, commit_id, snapshot_id + 1, (snapshot_id,),
                                  0, False, start)
        return SnapshotHeader(snapshot_id, position, kind, taken_at, commit_id, snapshot_id + 1,
                              self.chain + (snapshot_id,), self.increment_rows + rows,
                              self.purged or kind == "purge", start)


def complete_snapshots(rows: list[tuple]) -> list[tuple]:
    """The complete snapshots among the rows ``snapshot_headers.sql`` returns (one per snapshot id), newest first:
    (snapshot_id, position, kind, taken_at, commit_id, parent_id, producers, next_snapshot_id), the last the id the
    next snapshot takes, above every id the rows carry.

    Example (2 is torn: one of its 3 producer rows is missing; 4 was never published, its header not visible; 1 has
    two headers, as when drivers create a topic at once, see ``snapshot_headers.sql``):
        >>> t = dt.datetime(2026, 1, 1)
        >>> rows = [(2, 5, "snapshot", t, 3, None, 3, 1, 2), (1, 0, "enabled", t, 1, None, 0, 2, 0),
        ...         (3, 6, "increment", t, 4, 1, 1, 1, 1), (4, None, None, None, None, None, None, 0, 1)]
        >>> [(row[0], row[2], row[7]) for row in complete_snapshots(rows)]     # id, kind, the next snapshot's id
        [(3, 'increment', 5), (1, 'enabled', 5)]
    """
    next_id = max((row[0] for row in rows), default=0) + 1
    return [(*row[:7], next_id) for row in sorted(rows, reverse=True) if row[7] and row[8] == row[6]]


def chain_of(rows: list[tuple]) -> SnapshotHeader | None:
    """The chain (see SnapshotHeader) from the complete snapshots, newest first, as ``complete_snapshots`` gives
    them: (snapshot_id, position, kind, taken_at, commit_id, parent_id, producers, next_snapshot_id). None: no full
    one.

    Example (full snapshot 1, increments 3 and 4 after it; 2 failed, 5 follows a torn one):
        >>> t = dt.datetime(2026, 1, 1)
        >>> rows = [(5, 9, "increment", t, 6, 2, 1, 6), (4, 7, "increment", t, 5, 3, 2, 6),
        ...         (3, 5, "purge", t, 4, 1, 1, 6), (1, 0, "enabled", t, 1, None, 0, 6)]
        >>> h = chain_of(rows)
        >>> h.chain, h.position, h.increment_rows, h.purged, h.start_id
        ((1, 3, 4), 7, 3, True, 1)
    """
    fulls = [row for row in rows if row[5] is None]
    if not fulls:
        return None
    full = fulls[0]
    children = {}
    for row in sorted(rows):            # oldest first: of two increments with one parent, the newer wins
        if row[5] is not None:
            children[row[5]] = row
    chain, tip, increment_rows, purged = [full], full, 0, False
    while tip[0] in children:
        tip = children[tip[0]]
        chain.append(tip)
        increment_rows += tip[6]
        purged = purged or tip[2] == "purge"
    start = next((row[0] for row in rows if row[5] is None and row[2] in STARTS), None)
    return SnapshotHeader(tip[0], tip[1], tip[2], tip[3], tip[4], full[7], tuple(row[0] for row in chain),
                          increment_rows, purged, start)


def literal(value: object) -> exp.Expression:
    """A SQL literal for a Python value, quoted by sqlglot."""
    if isinstance(value, dt.datetime):
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), exp.DataType.build("timestamp"))
    return exp.convert(value)


def snapshot_headers_query(topic: str, visible: exp.Expression) -> exp.Expression:
    """One row per snapshot id of the topic, with its header and how many of its rows ``visible`` (a condition on
    ``commit_id``) lets count: ``complete_snapshots`` keeps the complete ones."""
    return template("snapshot_headers", topic=literal(topic), producer_sequences=PRODUCER_SEQUENCES_TABLE,
                    visible=visible)


def snapshot_marks(id_parts: int | None = None) -> exp.Expression:
    """``producer_sequences`` as a topic's marks are read from it: a topic of composite ids (R19, ``id_parts``)
    keeps its marks in ``composite_id``, read as its ``sequence_id``."""
    if id_parts is None:
        return PRODUCER_SEQUENCES_TABLE.copy()
    columns = [exp.alias_(exp.column("composite_id"), name) if name == "sequence_id" else exp.column(name)
               for name in PRODUCER_SEQUENCES if name != "composite_id"]
    return exp.select(*columns).from_(PRODUCER_SEQUENCES_TABLE.copy()).subquery("producer_sequences")


def producer_state_query(topic: str, topic_table: exp.Table, header: SnapshotHeader,
                         visible: exp.Expression, own: exp.Expression | None = None,
                         id_parts: int | None = None) -> exp.Expression:
    """The marks of every producer the state knows: (producer, sequence_id, last_publish_time, replayed).
    ``visible`` (a condition on ``commit_id``, and ``attempt``) keeps out the rows of a commit that was not
    published, or was another attempt's: they may carry a snapshot id of the chain too. The replay reads the topic's
    rows where ``own`` holds (seqdedup's, ``schema.written_by_seqdedup``: by default, every one). ``id_parts``: the
    topic's composite ids (R19; None: integer ids)."""
    return template(
        "producer_state",
        topic=literal(topic),
        topic_table=topic_table.copy(),
        producer_sequences=snapshot_marks(id_parts),
        in_chain=exp.and_(exp.column("snapshot_id").isin(*[literal(i) for i in header.chain or (header.snapshot_id,)]),
                          visible),
        after=literal(header.position),
        since_commit=literal(header.commit_id),
        replay=exp.Boolean(this=header.enabled),
        own=own.copy() if own is not None else written_by_seqdedup(),
    )


def catch_up_query(topic: str, topic_table: exp.Table, commits: list[int], after: int,
                   own: exp.Expression | None = None) -> exp.Expression:
    """What ``commits`` (published by other drivers since a state) did: the entries of each (commit, producer) after
    position ``after``, and the snapshot header rows they carry, each saying whether its attempt won the commit
    (``kind`` 'entries' or 'snapshot'; queries/catch_up.sql).

    Example:
        >>> query = catch_up_query("main.t", exp.table_("t"), [7, 8], after=40)
        >>> sorted({t.name for t in query.find_all(exp.Table)})
        ['producer_sequences', 'seqdedup_commits', 't']
    """
    numbers = [literal(n) for n in commits]
    return template(
        "catch_up",
        topic=literal(topic),
        topic_table=topic_table.copy(),
        producer_sequences=PRODUCER_SEQUENCES_TABLE,
        commits_table=catalog_table("seqdedup_commits"),
        commits=exp.column("_commit").isin(*numbers),
        logged=exp.column("commit_id", table="s").isin(*[n.copy() for n in numbers]),
        after=literal(after),
        own=own.copy() if own is not None else written_by_seqdedup(),
    )


def last_position_query(topic_table: exp.Table, after: int, own: exp.Expression | None = None) -> exp.Select:
    """The topic's last position, reading only the entries after ``after`` (positions grow in commit order) where
    ``own`` holds (seqdedup's rows: ``schema.written_by_seqdedup``)."""
    position = exp.column("_position")
    return (
        exp.select(exp.func("coalesce", exp.Max(this=position), literal(after)))
        .from_(topic_table.copy())
        .where(exp.and_(exp.GT(this=position.copy(), expression=literal(after)),
                        own.copy() if own is not None else written_by_seqdedup()))
    )


def snapshot_rows(topic: str, marks, *, snapshot_id: int, position: int, kind: str, now: dt.datetime, commit: int,
                  attempt: str | None, max_producers: int | None = None, parent: int | None = None):
    """The rows ``snapshot_insert`` writes, built from marks in memory (a ``pyarrow.Table`` with producer,
    sequence_id, last_publish_time; None: none): the producer rows, then the header counting them. Appended as they are
    (``EngineAdapter.append_rows``): on Spark, with no job.

    Example:
        >>> import pyarrow as pa
        >>> marks = pa.table({"producer": ["p", "q"], "sequence_id": [4, 9],
        ...                   "last_publish_time": pa.array([dt.datetime(2026, 1, 1)] * 2, pa.timestamp("us"))})
        >>> rows = snapshot_rows("main.t", marks, snapshot_id=2, position=7, kind="snapshot",
        ...                      now=dt.datetime(2026, 1, 2), commit=3, attempt=None, max_producers=1)
        >>> rows.select(["producer", "sequence_id", "producers"]).to_pylist()
        [{'producer': 'p', 'sequence_id': 4, 'producers': None}, {'producer': None, 'sequence_id': None, 'producers': 1}]
    """
    import pyarrow as pa

    from .schema import arrow_rows, arrow_schema

    schema = arrow_schema(PRODUCER_SEQUENCES)
    if marks is None:                  # a snapshot of no producer: its header alone
        marks = schema.empty_table()
    elif pa.types.is_string(marks.schema.field("sequence_id").type):     # composite ids (R19): their own column
        marks = marks.rename_columns(["composite_id" if n == "sequence_id" else n for n in marks.column_names])
    if max_producers is not None:      # R12: the most recently active producers
        marks = marks.sort_by([("last_publish_time", "descending"), ("producer", "ascending")]).slice(
            0, max_producers)
    n = marks.num_rows
    once = {"topic": topic, "snapshot_id": snapshot_id, "position": position, "kind": kind, "taken_at": now,
            "commit_id": commit, "parent_id": parent, "attempt": attempt}
    producers = arrow_rows(PRODUCER_SEQUENCES, {name: marks.column(name) for name in marks.column_names}, once, n)
    header = pa.Table.from_pylist([{**once, "producers": n}], schema=schema)
    return pa.concat_tables([producers, header])


def snapshot_insert(
    topic: str,
    marks: exp.Expression | None,
    *,
    snapshot_id: int,
    position: int,
    kind: str,
    now: dt.datetime,
    commit: int,
    max_producers: int | None = None,
    parent: int | None = None,
    id_parts: int | None = None,
) -> exp.Insert:
    """One statement that writes a whole snapshot: the producer rows of ``marks`` and the header counting them.

    ``marks`` is a query or table with (producer, sequence_id, last_publish_time), or None for a snapshot of no
    producer: then the header alone, a row of literals (on Spark one job, where counting an empty query adds one).
    With ``max_producers`` only the most recently active producers are kept (R12); the others survive a restart
    only through replay. With ``parent``, the snapshot is an increment of that one: ``marks`` holds the producers
    that changed since, and a NULL sequence_id for each one purged. ``id_parts``: the marks are composite ids
    (R19), kept in ``composite_id``.

    Example:
        >>> import datetime as dt
        >>> snapshot_insert("main.t", exp.table_("m"), snapshot_id=2, position=7, kind="snapshot",
        ...                 now=dt.datetime(2026, 1, 1), commit=3).sql("duckdb")[:60]
        'INSERT INTO producer_sequences (topic, snapshot_id, position'
        >>> empty = snapshot_insert("main.t", None, snapshot_id=1, position=0, kind="enabled",
        ...                         now=dt.datetime(2026, 1, 1), commit=1).sql("duckdb")
        >>> "CAST(0 AS BIGINT) AS producers" in empty, " FROM " in empty
        (True, False)
    """
    common = {"topic": literal(topic), "snapshot_id": literal(snapshot_id), "position": literal(position)}
    parent_id = exp.cast(literal(parent) if parent is not None else exp.null(), "bigint")

    def header(producers: exp.Expression) -> exp.Select:
        values = {**common, "producer": exp.cast(exp.null(), "text"), "sequence_id": exp.cast(exp.null(), "bigint"),
                  "last_publish_time": exp.cast(exp.null(), "timestamp"), "producers": producers,
                  "kind": literal(kind), "taken_at": literal(now), "commit_id": literal(commit),
                  "parent_id": parent_id.copy(), "attempt": ATTEMPT.copy(),
                  "composite_id": exp.cast(exp.null(), "text")}
        return exp.select(*[exp.alias_(value, name) for name, value in values.items()])

    if marks is None:
        return exp.insert(header(exp.cast(literal(0), "bigint")), PRODUCER_SEQUENCES_TABLE.copy(),
                          columns=list(PRODUCER_SEQUENCES))
    kept = exp.select("producer", "sequence_id", "last_publish_time").from_(
        marks.subquery("m") if isinstance(marks, exp.Query) else marks.copy()
    )
    if max_producers is not None:
        kept = kept.order_by("last_publish_time DESC", "producer").limit(max_producers)
    ids = (exp.column("sequence_id"), exp.cast(exp.null(), "text"))
    if id_parts is not None:
        ids = (exp.cast(exp.null(), "bigint"), exp.column("sequence_id"))
    rows = exp.select(
        *[exp.alias_(v, k) for k, v in common.items()],
        "producer", exp.alias_(ids[0], "sequence_id"), "last_publish_time",
        exp.alias_(exp.cast(exp.null(), "bigint"), "producers"),
        exp.alias_(literal(kind), "kind"), exp.alias_(literal(now), "taken_at"), exp.alias_(literal(commit), "commit_id"),
        exp.alias_(parent_id, "parent_id"), exp.alias_(ATTEMPT.copy(), "attempt"),
        exp.alias_(ids[1], "composite_id"),
    ).from_("kept")
    body = exp.union(rows, header(exp.select(exp.Count(this=exp.Star())).from_("kept").subquery()), distinct=False)
    body = exp.select("*").from_(body.subquery("snapshot")).with_("kept", as_=kept)
    return exp.insert(body, PRODUCER_SEQUENCES_TABLE.copy(), columns=list(PRODUCER_SEQUENCES))
