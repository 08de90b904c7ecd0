"""A topic's state in memory, as Pulsar's broker keeps it: the persisted marks (``highestSequencedPersisted``) and
what the next commit needs, valid as of one commit.

The catalog is the durable truth (R7: the last complete snapshot plus a replay of the log after it); this is a
cache of it. It is recovered when a topic is first used in a process (``load``), then moved forward by each commit
this process makes (``after``), and checked before it is trusted where another process could have written
(``Writer.state``). A ``TopicState`` never changes: a commit makes a new one, so a reader on another thread always
sees one whole state.

The marks are an Arrow table ``(producer, sequence_id, last_publish_time)``: an engine reads it as a relation
without a row of Python per producer, and a commit folds its changes in with one vectorized group-by.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from seqdedup.catalog.catalog import Catalog, Topic, TopicRef
from seqdedup.catalog.state import SnapshotHeader, literal, producer_state_query

#: The columns of the marks.
MARKS = pa.schema([("producer", pa.string()), ("sequence_id", pa.int64()),
                   ("last_publish_time", pa.timestamp("us"))])


def marks_table(table: pa.Table | None = None) -> pa.Table:
    """``table`` (any Arrow table with the marks' columns: engines differ in time zones and nullability) in the
    marks' schema; an empty one when None."""
    if table is None:
        return MARKS.empty_table()
    columns = []
    for field in MARKS:
        column = table.column(field.name)
        if pa.types.is_timestamp(column.type) and column.type.tz is not None:
            column = pc.cast(column, pa.timestamp("us", tz=column.type.tz)).cast(pa.timestamp("us"))
        columns.append(column.cast(field.type))
    return pa.Table.from_arrays(columns, schema=MARKS)


@dataclass(frozen=True)
class TopicState:
    """What seqdedup knows of one topic between its commits."""

    topic: Topic                    # its columns and applied policies, as of ``commit``
    commit: int                     # the last commit number taken (published, or failed): the next is commit + 1
    published: frozenset[int] | None   # the published commits where the engine tracks them (Spark), else None
    end: int                        # every entry written so far has a position at or below it (0: none)
    header: SnapshotHeader          # the last complete snapshot
    since_snapshot: int             # entries written after that snapshot (R8)
    marks: pa.Table                 # the persisted marks (MARKS), empty while deduplication is disabled (R10)

    @property
    def enabled(self) -> bool:
        """Deduplication is on for the state the statements see (the snapshot says so, and the policy agrees)."""
        return self.header.enabled and self.topic.applied.deduplication_enabled

    def mark(self, producer: str) -> int | None:
        """The producer's persisted mark (R13), or None."""
        found = self.marks.filter(pc.equal(self.marks.column("producer"), producer))
        return None if not found.num_rows else found.column("sequence_id")[0].as_py()

    def oldest_write(self) -> dt.datetime | None:
        """The earliest ``last_publish_time`` of any producer: nobody expires before the timeout from it (R11)."""
        return pc.min(self.marks.column("last_publish_time")).as_py() if self.marks.num_rows else None

    def after(self, *, commit: int, end: int | None = None, delta: pa.Table | None = None,
              marks: pa.Table | None = None, header: SnapshotHeader | None = None, since_snapshot: int | None = None,
              topic: Topic | None = None) -> "TopicState":
        """The state once ``commit`` is published: the log's new ``end``; ``marks`` as the whole new marks (a
        purge, a reset) and/or ``delta`` folded in (the new highest id and write time of each producer that wrote);
        a new last snapshot, count of entries after it, or topic (policies) when the commit changed them."""
        new = self.marks if marks is None else marks
        if delta is not None and delta.num_rows:
            new = marks_table(pa.concat_tables([new, marks_table(delta)]).group_by("producer").aggregate(
                [("sequence_id", "max"), ("last_publish_time", "max")]).rename_columns(MARKS.names))
        published = None if self.published is None else self.published | {commit}
        return replace(self, topic=topic or self.topic, commit=max(self.commit, commit),
                       end=self.end if end is None else max(self.end, end), header=header or self.header,
                       since_snapshot=self.since_snapshot if since_snapshot is None else since_snapshot,
                       marks=new, published=published)


def load(catalog: Catalog, adapter, ref: TopicRef) -> TopicState:
    """Recover a topic's state from the catalog (R7): its last complete snapshot, then a replay of the entries
    written after it, which also gives the log's end and how many entries the next snapshot is due after."""
    topic = catalog.topic(ref)
    header = catalog.last_snapshot(ref)
    if header.enabled != topic.applied.deduplication_enabled:
        # A policy change recorded, but the process died before the snapshot that makes the state follow it (on
        # Spark they are two writes). The next write takes that snapshot; until then, the state is what it will
        # make it: empty, whether deduplication was just disabled or just enabled again (R10).
        marks = marks_table()
    else:
        marks = marks_table(adapter.fetch_arrow(producer_state_query(ref.key, ref.table, header)))
    position = exp.column("_position")
    after = (exp.select(exp.func("coalesce", exp.Max(this=position), literal(header.position)),
                        exp.Count(this=exp.Star()))
             .from_(ref.table.copy())
             .where(exp.and_(exp.column("_commit") >= literal(header.commit_id), position.copy() > literal(header.position))))
    end, since = adapter.fetchall(after)[0]
    published = adapter.published_commits(ref)
    commit = max(catalog.next_commit(ref) - 1, max(published, default=0))
    return TopicState(topic=topic, commit=commit, published=frozenset(published) if adapter.TRACKS_COMMITS else None,
                      end=end, header=header, since_snapshot=since, marks=marks)


__all__ = ["TopicState", "MARKS", "marks_table", "load"]
