"""The storage protocol: how a topic's commit is staged, published and read back, which rows of a topic another
tool wrote, and how a topic's partitions are merged. ``EngineAdapter`` takes each of its methods from a
collaborator (``by``): this module holds the transactional form, which an engine with transactions (DuckDB) uses
whole. There a commit is one transaction, published by its COMMIT, and a topic is one table with nothing to list,
merge or tell apart. Spark's form, a Hive partition per commit, is extensions/spark/ (``Commits``, ``Partitions``,
``Compaction``, ``Quarantine``, ``TableFiles``)."""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field
from typing import Callable, Iterator

import pyarrow as pa
from sqlglot import exp

from seqdedup.catalog.schema import FOREIGN_COLUMNS, SYSTEM_COLUMNS, create_table, foreign_commits, written_by_seqdedup
from seqdedup.catalog.state import literal


def by(collaborator: str, method):
    """A method that a collaborator carries out: ``method`` (a function of the collaborator's class), called on
    the attribute ``collaborator`` names (dotted: ``"adapter.commits"``)."""
    name, path = method.__name__, collaborator.split(".")

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        return getattr(functools.reduce(getattr, path, self), name)(*args, **kwargs)
    return call


def keys_of(adapter, rows: exp.Expression) -> pa.Table:
    """(producer, sequence_id): the ``_producer`` and ``_highest_sequence_id`` columns of a relation of topic rows
    (of keys' rows, R20: each key and its mark, the position it was written at)."""
    return key_marks(adapter.fetch_arrow(exp.select("_producer", "_highest_sequence_id").from_(rows.as_("w"))))


def key_marks(rows: pa.Table) -> pa.Table:
    """``rows`` of (_producer, _highest_sequence_id) as (producer, sequence_id), in the marks' types."""
    return pa.table({"producer": rows.column(0).combine_chunks().cast(pa.string()),
                     "sequence_id": rows.column(1).combine_chunks().cast(pa.int64())})


@dataclass
class Decided:
    """What ``write_decided`` reports: the metrics, and the outcome rows (a pyarrow Table or a list of dicts)."""

    metrics: dict
    outcome: object = field(default=None)


class TransactionalStorage:
    """The storage protocol where the engine has transactions (``SUPPORTS_TRANSACTIONS``), through its adapter."""

    def __init__(self, adapter):
        self.adapter = adapter

    def create_topic_table(self, table: exp.Table, columns: dict[str, exp.DataType]) -> None:
        # the engine itself refuses a row that leaves a system column out (a row written around seqdedup)
        system = [n for n in columns if n in SYSTEM_COLUMNS]
        self.adapter.execute(create_table(table, columns, exists=False, not_null=system))

    def create_catalog_table(self, table: exp.Table, columns: dict[str, exp.DataType]) -> bool:
        """Create a catalog table if it does not exist; whether it did."""
        if self.adapter.columns(table):
            return False
        self.adapter.execute(create_table(table, columns))
        return True

    def open_commit(self, topic, commit: int) -> None:
        """A commit of ``topic`` (a TopicRef) begins; this adapter's own reads see its rows until it ends."""

    def refresh(self, *tables: exp.Table) -> None:
        """Forget what this process knows of ``tables``' files, where another process may have written them since."""

    def attempt(self, topic) -> str | None:
        """The open commit's attempt id, written in its catalog rows where another process may take the same commit
        number (``catalog.schema.COMMITS``); None where one process writes."""
        return None

    def write_topic(self, topic, insert: exp.Insert, *, rows: int | None = None) -> int | None:
        """Write the open commit's topic rows (``insert``, at most ``rows`` of them where the caller knows); the
        number written, when the engine says."""
        return self.adapter.execute_count(insert)

    def write_topic_returning(self, topic, insert: exp.Insert) -> list[tuple]:
        """Write as ``write_topic`` does (a few rows), and give what ``insert`` returns of them (its RETURNING
        clause)."""
        return self.adapter.fetchall(insert)

    def write_decided(self, topic, decided: exp.Select, keep: str, insert_for: Callable[[exp.Expression], exp.Insert],
                      metrics: dict[str, exp.Expression], outcome: list[exp.Expression], last: str,
                      proceed: Callable[[dict], bool], name: str, split: str | None = None) -> Decided:
        """The window plan's write: the rows of ``decided`` whose column ``keep`` is true, through the INSERT that
        ``insert_for`` makes of them; the ``metrics`` (aggregates over every row of ``decided``) and the
        ``outcome`` columns of its ``last`` rows (one per producer; where ``last`` is None, ``outcome`` is aggregates
        over every row: one row). ``name``: a temporary name free for the decided rows, the same from one statement
        of this shape to the next (so is the SQL that reads them).

        Here the decided rows are materialized once, the metrics read first, and nothing is written unless
        ``proceed(metrics)``. An engine that can observe a job (Spark) does it all in one pass and writes anyway:
        the caller then discards the commit's rows (``discard_commit_rows``)."""
        table = self.adapter.create_temp_table(name, decided)
        try:
            values = self.adapter.fetchall(exp.select(*[exp.alias_(e.copy(), k) for k, e in metrics.items()]).from_(
                table.copy()))[0]
            got = dict(zip(metrics, values))
            if not proceed(got):
                return Decided(got)
            self.write_topic(topic, insert_for(exp.select("*").from_(table.copy()).where(exp.column(keep))))
            rows = exp.select(*[e.copy() for e in outcome]).from_(table.copy())
            rows = self.adapter.fetch_arrow(rows if last is None else rows.where(exp.column(last)))
            return Decided(got, rows)
        finally:
            self.adapter.drop_temp_table(table.name)

    def stages_apart(self, topic) -> bool:
        """Whether ``write_decided`` can write the entries dropped apart from the topic's rows, in the same pass
        (``split``: a column of the decided rows, true for a dropped entry). Here it cannot: it is never asked."""
        return False

    def dropped_rows(self, topic) -> exp.Expression | None:
        """The entries the open commit's ``write_decided`` wrote apart (``split``), as a relation of the topic's
        columns, each with its producer's mark when the statement began as its ``_position``; None for none."""
        return None

    def dropped_files(self, topic, columns: list[str]):
        """``columns`` of the entries ``dropped_rows`` gives, read as a ``pyarrow.Table`` from files this process
        reaches, with no query; None where it cannot (the engine reads them)."""
        return None

    def discard_commit_rows(self, topic) -> None:
        """Forget the topic rows the open commit wrote (they were never published); the commit goes on."""

    def staged_rows(self, topic) -> exp.Expression:
        """The topic rows the open commit wrote, as a relation of the topic's columns. With transactions, the
        commit's rows in the topic itself."""
        return exp.select("*").from_(topic.table.copy()).where(
            exp.column("_commit").eq(exp.Placeholder(this="__sd_commit"))).subquery()

    def staged_files(self, topic):
        """The rows ``staged_rows`` gives, as a ``pyarrow.dataset.Dataset`` of files this process reaches, read with
        no query; None where it cannot (the engine reads them)."""
        return None

    def staged_keys(self, topic) -> pa.Table:
        """(producer, sequence_id) of each topic row the open commit wrote, its highest id as the mark (a statement of
        keys, R20: the keys it wrote, each at its position)."""
        return keys_of(self.adapter, self.staged_rows(topic))

    def published_commits(self, topic) -> set[int]:
        """The topic's published commits, where the engine tracks them (``TRACKS_COMMITS``); else empty."""
        return set()

    def publish(self, topic) -> None:
        """Make the open commit's rows visible, all at once. With transactions the COMMIT does it."""

    def close_commit(self, topic) -> None:
        """The commit ended, published or not."""

    def last_published_commit(self, topic) -> int:
        """The highest commit of the topic known published outside the catalog rows (0: none, or not tracked)."""
        return 0

    def visible_commits(self, topic, *, include_open: bool = True) -> exp.Expression:
        """A condition on ``commit_id`` that keeps the catalog rows of published commits (and of the commit this
        adapter has open). With transactions every row a reader can see is published."""
        return exp.true()

    def beside_winners(self, topic, read: Callable[[], object]):
        """``read()``, a read whose rows count as ``visible_commits`` says: where those depend on a read of their
        own (several drivers, Spark), the two side by side (``Commits.beside_winners``). Here, simply ``read()``."""
        return read()

    def own_rows(self, topic) -> exp.Expression:
        """A condition that keeps the rows of ``topic`` seqdedup wrote (``catalog.schema.written_by_seqdedup``): in
        none of its foreign partitions, with every system column set."""
        return written_by_seqdedup(foreign_commits(self.foreign_partitions(topic)))

    def foreign_partitions(self, topic) -> list[str]:
        """The partitions of the topic's table seqdedup did not publish, each ``_commit`` value as the engine spells
        it, where the engine tracks commits (``TRACKS_COMMITS``); else none."""
        return []

    def move_foreign_rows(self, topic, side: exp.Table, now) -> int:
        """Move the topic's foreign rows into ``side`` (created with the topic's columns and FOREIGN_COLUMNS when it
        does not exist), in one transaction; the number of rows moved. From then on the topic's system columns are
        NOT NULL, as a new topic's are: the engine refuses a row without them."""
        foreign = exp.not_(self.own_rows(topic))
        with self.adapter.transaction():
            count = self.adapter.fetchall(exp.select(exp.Count(this=exp.Star())).from_(topic.table.copy()).where(
                foreign.copy()))[0][0]
            if count:
                extra = [exp.alias_(exp.cast(exp.null(), kind), name) for name, kind in FOREIGN_COLUMNS.items()]
                if not self.adapter.columns(side):      # the topic's columns and types, without its constraints
                    self.adapter.execute(exp.Create(this=side.copy(), kind="TABLE", expression=exp.select(
                        "*", *extra).from_(topic.table.copy()).where(exp.false())))
                last = exp.func("coalesce", exp.Max(this=exp.column("_move")), literal(0))
                move = self.adapter.fetchall(exp.select(last + 1).from_(side.copy()))[0][0]
                names = [exp.column(name, quoted=True) for name, _ in self.adapter.columns(topic.table)]
                self.adapter.execute(exp.insert(exp.select(*names, extra[0], literal(now), literal(move)).from_(
                    topic.table.copy()).where(foreign.copy()), side.copy()))
                self.delete_rows(topic.table, foreign)
            for name in SYSTEM_COLUMNS:
                self.adapter.execute(exp.Alter(this=topic.table.copy(), kind="TABLE", actions=[
                    exp.AlterColumn(this=exp.to_identifier(name), allow_null=False)]))
        return count

    def delete_rows(self, table: exp.Table, condition: exp.Expression) -> None:
        """Delete the rows of ``table`` where ``condition`` holds, at once (``seqdedup topic drop``)."""
        self.adapter.execute(exp.delete(table.copy(), where=condition.copy()))

    @contextlib.contextmanager
    def listed_once(self, topic) -> Iterator[None]:
        """Within, the topic's partitions are listed at most once, where the engine keeps them (a recovery asks for
        them several times, ``Session.stats`` more around one). Nested, the outermost one's listing serves. A writer
        holds the lock around it; what the adapter changes itself is listed again."""
        yield

    def partition_ranges(self, topic) -> list[tuple[int, int]]:
        """The commits (first, last) each of the topic's partitions holds, in commit order, where the engine keeps a
        partition per commit (``TRACKS_COMMITS``); else none: the topic is one table, with nothing to merge."""
        return []

    def drop_merged(self, topic) -> int:
        """Drop the partitions a compaction cut short merged into another but did not drop; how many."""
        return 0

    def merge_partitions(self, topic, ranges: list[tuple[int, int]]) -> int:
        """Merge the consecutive partitions holding ``ranges`` into one; the rows it holds."""
        raise NotImplementedError

    def drop_topic_table(self, topic) -> None:
        """Drop the table of ``topic`` (a TopicRef), with its rows (``seqdedup topic drop``)."""
        self.adapter.execute(exp.Drop(tables=[topic.table.copy()], kind="TABLE", exists=True))
