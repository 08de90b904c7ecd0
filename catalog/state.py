"""State reads and writes as sqlglot trees: the last snapshot, the replayed marks, and snapshot rows."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlglot import exp

from .schema import PRODUCER_SEQUENCES, catalog_table
from .templates import template

PRODUCER_SEQUENCES_TABLE = catalog_table("producer_sequences")


@dataclass(frozen=True)
class SnapshotHeader:
    """The latest complete snapshot of a topic."""

    snapshot_id: int          # its id; the next snapshot takes next_snapshot_id
    position: int             # it covers every entry with _position <= position
    kind: str                 # enabled | disabled | snapshot | purge
    taken_at: dt.datetime     # when it was taken
    commit_id: int            # the topic commit that wrote it
    next_snapshot_id: int

    @property
    def enabled(self) -> bool:
        """Deduplication was on when the snapshot was taken (a disabled topic has no state)."""
        return self.kind != "disabled"


def literal(value: object) -> exp.Expression:
    """A SQL literal for a Python value, quoted by sqlglot."""
    if isinstance(value, dt.datetime):
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), exp.DataType.build("timestamp"))
    return exp.convert(value)


def last_snapshot_query(topic: str, visible: exp.Expression) -> exp.Expression:
    """The latest complete snapshot among the rows ``visible`` (a condition on ``commit_id``) lets count."""
    return template("last_snapshot", topic=literal(topic), producer_sequences=PRODUCER_SEQUENCES_TABLE,
                    visible=visible)


def producer_state_query(topic: str, topic_table: exp.Table, header: SnapshotHeader) -> exp.Expression:
    """The marks of every producer the state knows: (producer, sequence_id, last_publish_time)."""
    return template(
        "producer_state",
        topic=literal(topic),
        topic_table=topic_table.copy(),
        producer_sequences=PRODUCER_SEQUENCES_TABLE,
        snapshot_id=literal(header.snapshot_id),
        after=literal(header.position),
        since_commit=literal(header.commit_id),
        replay=exp.Boolean(this=header.enabled),
    )


def last_position_query(topic_table: exp.Table, after: int) -> exp.Select:
    """The topic's last position, reading only the entries after ``after`` (positions are dense and grow)."""
    position = exp.column("_position")
    return (
        exp.select(exp.func("coalesce", exp.Max(this=position), literal(after)))
        .from_(topic_table.copy())
        .where(exp.GT(this=position.copy(), expression=literal(after)))
    )


def snapshot_insert(
    topic: str,
    marks: exp.Expression,
    *,
    snapshot_id: int,
    position: int,
    kind: str,
    now: dt.datetime,
    commit: int,
    max_producers: int | None = None,
) -> exp.Insert:
    """One statement that writes a whole snapshot: the producer rows of ``marks`` and the header counting them.

    ``marks`` is a query or table with (producer, sequence_id, last_publish_time). With ``max_producers`` only the
    most recently active producers are kept (R12); the others survive a restart only through replay.

    Example:
        >>> import datetime as dt
        >>> snapshot_insert("main.t", exp.table_("m"), snapshot_id=2, position=7, kind="snapshot",
        ...                 now=dt.datetime(2026, 1, 1), commit=3).sql("duckdb")[:60]
        'INSERT INTO producer_sequences (topic, snapshot_id, position'
    """
    kept = exp.select("producer", "sequence_id", "last_publish_time").from_(
        marks.subquery("m") if isinstance(marks, exp.Query) else marks.copy()
    )
    if max_producers is not None:
        kept = kept.order_by("last_publish_time DESC", "producer").limit(max_producers)
    common = {"topic": literal(topic), "snapshot_id": literal(snapshot_id), "position": literal(position)}
    rows = exp.select(
        *[exp.alias_(v, k) for k, v in common.items()],
        "producer", "sequence_id", "last_publish_time",
        exp.alias_(exp.cast(exp.null(), "bigint"), "producers"),
        exp.alias_(literal(kind), "kind"), exp.alias_(literal(now), "taken_at"), exp.alias_(literal(commit), "commit_id"),
    ).from_("kept")
    header = exp.select(
        *[exp.alias_(v, k) for k, v in common.items()],
        exp.cast(exp.null(), "text"), exp.cast(exp.null(), "bigint"), exp.cast(exp.null(), "timestamp"),
        exp.select(exp.Count(this=exp.Star())).from_("kept").subquery(),
        literal(kind), literal(now), literal(commit),
    )
    body = exp.union(rows, header, distinct=False)
    body = exp.select("*").from_(body.subquery("snapshot")).with_("kept", as_=kept)
    return exp.insert(body, PRODUCER_SEQUENCES_TABLE.copy(), columns=list(PRODUCER_SEQUENCES))
