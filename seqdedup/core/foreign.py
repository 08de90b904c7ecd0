"""Rows of a topic that seqdedup did not write: how they are found, reported and moved aside.

seqdedup writes a topic only through ``INSERT ... WHERE is_not_dup(...)``. A tool that inserts into the topic's table
on the engine itself (``INSERT INTO events (payload) VALUES (...)``) writes rows that seqdedup never numbered or
published: *foreign* rows. A row is foreign when one of its system columns is NULL or, on Spark, when it lies in a
partition seqdedup did not publish: the one a plain INSERT makes for a NULL ``_commit``
(``__HIVE_DEFAULT_PARTITION__``), or a ``_commit = N`` partition whose directory is not one seqdedup staged
(``catalog.schema.written_by_seqdedup``, ``extensions.spark.layout.staged``).

- Every read seqdedup makes of a topic's entries (the state's replay, recovery, readers and consumers, positions)
  keeps to its own rows. A foreign partition's number never counts as a published commit, and no commit of
  seqdedup takes it (its publish would collide). So statements go on.
- ``Session.stats`` and ``recover`` (``seqdedup stats``, ``seqdedup recover``) count the foreign rows and say how
  to move them aside.
- ``Session.quarantine_foreign_rows`` (``seqdedup topic quarantine TOPIC``) moves them into the table
  ``<topic>_foreign``: the topic's columns, then ``catalog.schema.FOREIGN_COLUMNS``. On DuckDB it is one
  transaction, which also makes the topic's system columns NOT NULL (as a new topic's are: DuckDB then refuses such
  rows outright). On Spark it is three steps, each safe to repeat (``extensions.spark.quarantine.Quarantine.move``).
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Callable, Collection

from sqlglot import exp

from seqdedup.catalog.catalog import TopicRef
from seqdedup.catalog.schema import FOREIGN_COLUMNS, foreign_commits, written_by_seqdedup
from seqdedup.errors import TopicError

#: What a topic's side table is called: its name and this.
SUFFIX = "_foreign"


@dataclass(frozen=True)
class ForeignRows:
    """What a topic holds that seqdedup did not write."""

    topic: str                  # the topic's key, namespace.name
    rows: int                   # its rows seqdedup did not write
    partitions: list[str]       # Spark: its partitions seqdedup did not publish (their ``_commit`` values)
    entries: int = 0            # its rows seqdedup wrote (counted in the same pass)

    @property
    def message(self) -> str | None:
        """What they are and how to move them aside; None when there are none.

        Example:
            >>> print(ForeignRows("main.events", 2, ["__HIVE_DEFAULT_PARTITION__"]).message)
            main.events holds 2 rows seqdedup did not write (in partitions _commit=__HIVE_DEFAULT_PARTITION__): \
they were inserted into its table directly, around is_not_dup, with no producer, sequence id or position of \
seqdedup's. Every read and statement of seqdedup leaves them out; move them aside into main.events_foreign with \
`seqdedup topic quarantine main.events` (Session.quarantine_foreign_rows)
        """
        if not self.rows and not self.partitions:
            return None
        where = f" (in partitions {', '.join(f'_commit={p}' for p in self.partitions)})" if self.partitions else ""
        return (f"{self.topic} holds {self.rows} row{'' if self.rows == 1 else 's'} seqdedup did not write{where}: "
                "they were inserted into its table directly, around is_not_dup, with no producer, sequence id or "
                "position of seqdedup's. Every read and statement of seqdedup leaves them out; move them aside into "
                f"{self.topic}{SUFFIX} with `seqdedup topic quarantine {self.topic}` (Session.quarantine_foreign_rows)")


def find(reads, ref: TopicRef, *, alongside: bool = False):
    """Count the topic's foreign rows and its own in one pass, through ``reads`` (an adapter, or its committed
    reads). ``alongside``: the count is started ``alongside`` the caller's next reads (its query built now, from
    the topic's partitions as this thread lists them), and its future returned."""
    partitions = reads.storage.foreign_partitions(ref)
    foreign = exp.not_(written_by_seqdedup(foreign_commits(partitions)))
    query = exp.select(
        exp.func("coalesce", exp.func("count_if", reads.storage.own_rows(ref)), exp.convert(0)),
        exp.func("coalesce", exp.func("count_if", foreign), exp.convert(0))).from_(ref.table.copy())

    def count() -> ForeignRows:
        entries, rows = reads.fetchall(query)[0]
        return ForeignRows(ref.key, rows, partitions, entries)
    return reads.alongside(count) if alongside else count()


def side_table(ref: TopicRef) -> TopicRef:
    """The table a topic's foreign rows are moved into: ``<topic>_foreign``, beside it."""
    return TopicRef(ref.namespace, f"{ref.name}{SUFFIX}", ref.database)


def quarantine(adapter, ref: TopicRef, topics: Collection[str], clock: Callable[[], dt.datetime]) -> dict:
    """Move the registered topic ``ref``'s foreign rows into its side table (see the module's text), through
    ``adapter``, stamped with ``clock``'s time; what was moved. ``topics``: the keys of the registered topics.
    Nothing changes on bad input: a side table that is a topic or has other columns. Run under the writer lock
    (``Session.quarantine_foreign_rows``)."""
    side = side_table(ref)
    if side.key in topics:
        raise TopicError(f"the foreign rows of {ref.key} go to {side.key}, which is a topic; rename that topic, "
                         "then move them again")
    adapter.check_name(side.name)
    expected = [name.lower() for name, _ in adapter.columns(ref.table)] + list(FOREIGN_COLUMNS)
    existing = [name.lower() for name, _ in adapter.columns(side.table)]
    if existing and existing != expected:
        raise TopicError(f"the foreign rows of {ref.key} go to {side.key}, but a table {side.key} exists with other "
                         f"columns ({', '.join(existing)}; expected {', '.join(expected)}); rename or drop it, then "
                         "move them again")
    found = find(adapter, ref)
    moved = adapter.storage.move_foreign_rows(ref, side.table, clock())
    return {"topic": ref.key, "table": side.key, "rows": moved, "partitions": found.partitions}


__all__ = ["ForeignRows", "find", "side_table", "quarantine"]
