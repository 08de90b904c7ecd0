"""The commit protocol on Spark, which has no transactions: a commit's topic rows are staged in a directory nobody
reads, then published by registering it as the partition ``_commit = N`` (one metastore operation, a compare-and-set
where several drivers write); which catalog rows count (``visible``) follows from the published partitions and, where
several drivers write, from each commit's winning attempt."""
from __future__ import annotations

import datetime as dt
import io
import os
import threading
import uuid
from dataclasses import dataclass, field
from typing import Callable, TypeVar

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.json as pj
import pyarrow.parquet as pq
from sqlglot import exp

from seqdedup.catalog.names import STAGING
from seqdedup.catalog.schema import COMMITS, arrow_schema, catalog_table
from seqdedup.errors import CommitConflict, EngineError, already_exists

from ..storage import Decided, key_marks, keys_of
from .collaborator import Collaborator
from .errors import causes
from .frames import Observed
from .layout import local_path, remove_directory, staging_name

T = TypeVar("T")


@dataclass
class _OpenCommit:
    number: int
    published: set[int] | None      # the topic's published commits when it opened, once asked (one writer: they
                                    # stay so)
    directory: str | None = None    # where its topic rows were staged, once they were
    apart: str | None = None        # where a split write staged them (``write_decided``), removed with the commit
    dropped: str | None = None      # its folder of the entries dropped, where it wrote any
    attempt: str = field(default_factory=lambda: uuid.uuid4().hex)    # names its staging directory


@dataclass
class _Winners:
    """What one topic's published commits are known to be, where several drivers write (``visible_commits``)."""

    published: frozenset[int]       # as of this set of published commits
    described: dict[int, str]       # commit -> the attempt whose directory its partition names (no COMMITS row)


def _named_struct(fields: dict[str, exp.Expression]) -> exp.Expression:
    """``named_struct('name', expression, ...)`` of ``fields``, each expression copied (they may be parts of a
    statement's trees kept for its shape, whose parents a new tree would take)."""
    return exp.func("named_struct", *[part for name, e in fields.items()
                                      for part in (exp.Literal.string(name), e.copy())])


def _json_texts(fields: list[exp.Expression], only: exp.Expression) -> exp.Expression:
    """``fields`` (aliased) of the rows where ``only`` holds, each row a JSON object keyed by the fields' places
    ("0", "1", ...; a NULL is left out): a list that Spark's driver gathers, its size about what its text takes,
    and that Arrow reads (``_from_json_lines``)."""
    named = _named_struct({str(i): e.unalias() for i, e in enumerate(fields)})
    return exp.func("collect_list", exp.Case(ifs=[exp.If(this=only, true=exp.func("to_json", named))]))


def _from_json_lines(text: str, fields: list[exp.Expression]) -> pa.Table | list:
    """The rows that ``_json_texts`` made of ``fields``, as lines of a text (none: an empty list), under the fields'
    names (a field NULL in every row: no column). A producer is text whatever it looks like (Arrow reads an ISO date
    as a timestamp); the other values are numbers, or a composite id's text, which starts with a letter (R19)."""
    if not text:
        return []
    names = [e.alias_or_name for e in fields]
    table = pj.read_json(io.BytesIO(text.encode()), parse_options=pj.ParseOptions(explicit_schema=pa.schema(
        [(str(names.index("producer")), pa.string())])))
    return table.rename_columns([names[int(n)] for n in table.column_names])


class Commits(Collaborator):
    def __init__(self, adapter):
        super().__init__(adapter)
        self._open: dict[str, _OpenCommit] = {}     # topic key -> its commit in progress
        self._winners: dict[str, _Winners] = {}     # topic key -> its commits' winners (several drivers)
        # (thread, topic key) -> the winners a read inside ``beside_winners`` assumes, until they are read
        self._assumed: dict[tuple[int, str], dict[int, str]] = {}

    def published(self, topic) -> set[int]:
        """The commits seqdedup published: the partitions of the topic whose directory it staged (``staged``), and
        the commits a compacted one holds; any other partition is foreign (``foreign_partitions``), whatever its
        number."""
        return self.adapter.partitions.layout(topic).published

    def last_published(self, topic) -> int:
        return max(self.published(topic), default=0)

    def visible(self, topic, *, include_open: bool = True) -> exp.Expression:
        """Rows without an attempt count once their commit is published and below every failed one. Where several
        drivers write, a row's attempt must be its commit's winner: the COMMITS row the winner adds after its
        partition is registered, or, if it has not (yet), the attempt its partition's directory names."""
        current = self._open.get(topic.key) if include_open else None
        if current is not None and current.published is None:
            current.published = self.published(topic)
        published = current.published if current else self.published(topic)
        top = max(published, default=0)
        column, attempt = exp.column("commit_id"), exp.column("attempt")
        visible = column.copy() <= exp.convert(top)
        failed = sorted(set(range(1, top + 1)) - published)    # commits that wrote rows but were never published
        if failed:
            visible = exp.and_(visible, exp.not_(column.copy().isin(*failed)))
        mine = column.eq(current.number) if current else None
        if self.adapter.exclusive:
            return exp.or_(visible, mine) if current else visible
        pair = exp.Tuple(expressions=[column.copy(), attempt.copy()])
        logged = exp.select("commit_id", "attempt").from_(catalog_table("seqdedup_commits")).where(
            exp.column("topic").eq(exp.Literal.string(topic.key)))
        visible = exp.or_(exp.and_(attempt.is_(exp.null()), visible), exp.In(this=pair, query=logged.subquery()))
        described = self._described(topic, frozenset(published))
        for number, winner in sorted(described.items()):
            visible = exp.or_(visible, exp.and_(column.eq(exp.convert(number)), attempt.eq(exp.convert(winner))))
        if current:
            visible = exp.or_(visible, exp.and_(mine, attempt.eq(exp.convert(current.attempt))))
        return visible

    def _described(self, topic, published: frozenset[int]) -> dict[int, str]:
        """The winners of published commits whose attempt wrote catalog rows but no COMMITS row (it died between
        registering its partition and adding the row, or is in between now): read from their partitions."""
        known = self._winners.get(topic.key)
        if known is not None and known.published == published:
            return known.described
        assumed = self._assumed.get((threading.get_ident(), topic.key))
        if assumed is not None:
            return assumed
        described = dict(known.described) if known else {}
        self._winners[topic.key] = _Winners(published, self._read_winners(
            topic, self._unlogged(topic, published, described), described))
        return described

    def _unlogged(self, topic, published: frozenset[int], described: dict[int, str]) -> set[int]:
        """The published commits, none of ``described``, whose attempt wrote catalog rows but no COMMITS row."""
        key = exp.column("topic").eq(exp.Literal.string(topic.key))
        logged = exp.select("commit_id").from_(catalog_table("seqdedup_commits")).where(key.copy())
        tagged = exp.union(*[exp.select("commit_id").from_(catalog_table(name)).where(
            exp.and_(key.copy(), exp.column("attempt").is_(exp.not_(exp.null())),
                     exp.not_(exp.In(this=exp.column("commit_id"), query=logged.subquery()))))
            for name in ("producer_sequences", "seqdedup_statements", "seqdedup_dropped", "seqdedup_gaps",
                         "seqdedup_consumers")], distinct=True)
        return {number for (number,) in self.adapter.fetchall(tagged)
                if number in published and number not in described}

    def _read_winners(self, topic, wanted: set[int], described: dict[int, str]) -> dict[int, str]:
        """``described`` with the winners of the commits ``wanted``, read from their partitions' directories."""
        if wanted:
            locations = {int(value): location for value, location in self.adapter.partitions.listing(topic.table)
                         if value.isdigit() and int(value) in wanted}
            for number in wanted & set(locations):   # (a compaction logs its commits' winners before it merges)
                described[number] = self._partition_attempt(topic, number, locations.get(number))
        return described

    def beside_winners(self, topic, read: Callable[[], T]) -> T:
        """``read()``, a read whose rows count as ``visible`` says, where the winners it needs are not known yet
        (a process new to the topic, where several drivers write): run with the winners known before (none, in a
        new process) alongside the read of them (``alongside``), rather than after it, a job each on Spark Connect.
        Where that read finds a winner more (a commit whose winner died, or is now, between registering its
        partition and logging its win: rare), ``read()`` runs again, with it. Either way, what it gives is what it
        would give after the read of the winners."""
        published = frozenset(self.published(topic))
        known = self._winners.get(topic.key)
        if self.adapter.exclusive or not self.adapter.READS_ALONGSIDE or (
                known is not None and known.published == published):
            return read()
        described = dict(known.described) if known else {}
        unlogged = self.adapter.alongside(lambda: self._unlogged(topic, published, described))
        key = (threading.get_ident(), topic.key)
        self._assumed[key] = described
        try:
            assumed = read()
        finally:
            del self._assumed[key]
        found = self._read_winners(topic, unlogged.result(), dict(described))
        self._winners[topic.key] = _Winners(published, found)
        return assumed if found == described else read()

    def _partition_attempt(self, topic, number: int, location: str | None) -> str:
        """The attempt whose staging directory (``<commit>-<attempt>-<n>``) the partition of commit ``number`` is;
        its location read from the metastore if not given."""
        return staging_name(location or self.adapter.partitions.directory_of(topic.table, number))[1]

    def attempt(self, topic) -> str | None:
        return None if self.adapter.exclusive else self._open[topic.key].attempt

    def open(self, topic, commit: int) -> None:
        self.adapter.check_writable(None, f"a commit of {topic.key}")     # refused before the statement does any work
        self._open[topic.key] = _OpenCommit(commit, None)
        if self.adapter.remote:     # the tables a commit appends to, where the statement's job runs meanwhile
            self.adapter.files.read_ahead([catalog_table("seqdedup_statements"), catalog_table("seqdedup_commits")])

    def write(self, topic, insert: exp.Insert, *, counted: bool = True, split: str | None = None) -> int | None:
        """Stage the rows ``insert`` writes as the open commit's; their count when ``counted`` (else None). With
        ``split``, the rows of ``insert``'s last column true are staged apart (``_apart``)."""
        current = self._open[topic.key]
        names = [column.name for column in insert.this.expressions]
        current.directory, written = self.stage(topic, insert.expression, names, current.number, counted=counted,
                                                split=split)
        if split:
            self._apart(topic, split)
        return written

    def stages_apart(self, topic) -> bool:
        """Whether ``write_decided`` can stage the dropped entries apart (``split``): where the topic's directory is
        on the local disk, whose folders it moves."""
        return local_path(self.adapter.files.location(topic)) is not None

    def _apart(self, topic, split: str) -> None:
        """After a split write into the open commit's directory: its folder of written rows (``split`` false) is
        moved to a staging directory of its own, the commit's (none where no row was written), and the directory
        written is kept aside with the dropped rows' folder (``dropped_rows``) until the commit ends (``close``,
        ``discard``). Spark writes a table's partitions in one job so, where two jobs would read the decided rows
        twice."""
        current = self._open[topic.key]
        current.apart = current.directory
        root = local_path(current.apart)
        kept = f"{root}/{split}=false"
        current.directory = None
        if os.path.isdir(kept):
            current.directory = self.staging_directory(topic, current.number)
            os.rename(kept, local_path(current.directory))
        current.dropped = f"{current.apart}/{split}=true" if os.path.isdir(f"{root}/{split}=true") else None

    def dropped_rows(self, topic) -> exp.Expression | None:
        """The entries the open commit's split write staged apart (``write_decided``), as a relation of the topic's
        columns; None where it staged none."""
        dropped = self._open[topic.key].dropped
        return None if dropped is None else exp.Table(this=exp.to_identifier(dropped, quoted=True),
                                                      db=exp.to_identifier("parquet"))

    def dropped_files(self, topic, columns: list[str]) -> pa.Table | None:
        """``columns`` of the entries the open commit's split write staged apart, read by Arrow where they are on
        the local disk (not for a Spark Connect client: the server's disk need not be the client's)."""
        dropped = self._open[topic.key].dropped
        local = local_path(dropped) if dropped else None
        if local is None or self.adapter.remote:
            return None
        return pq.read_table(local, columns=columns)

    def write_decided(self, topic, decided, keep, insert_for, metrics, outcome, last, proceed, name, split=None):
        """One job: the decided rows are observed (the metrics, and the outcome of each producer's last row, as a
        list, or the outcome's aggregates where ``last`` is None) on their way to the commit's directory, whatever
        the metrics say (the caller discards them). With ``split`` (the name of a column of ``decided``, true for an
        entry dropped, where ``stages_apart``), the dropped entries are written by the same job, apart
        (``dropped_rows``); ``insert_for`` then gives the column last."""
        F = self.F

        if last is None:     # (aggregates: one row, observed as metrics are)
            observe = _named_struct({**metrics, **{f"__sd_outcome_{e.alias}": e.unalias() for e in outcome}})
        else:               # (the last rows as JSON, then the metrics: ``Observed.lines_and_values``)
            observe = _named_struct({"outcome": _json_texts(outcome, exp.column(last)),
                                     "metrics": _named_struct(metrics)})
        # (every aggregate in one struct, and the filter as text: each Column made in Python is 3 to 11 Py4J round
        # trips, 81 of a 10-entry statement's 263 as eleven aggregates and a filter)
        with self.adapter.errors():
            observed = Observed(self.adapter.frame(decided),
                                observed=F.expr(self.adapter.sql(observe)))
            kept = observed.frame.where(self.adapter.sql(
                exp.or_(exp.column(keep), exp.column(split)) if split else exp.column(keep)))
            if self.adapter.remote:     # a Connect client reads an observation only from the very plan it sent
                insert = insert_for(exp.table_(name))
                current = self._open[topic.key]
                current.directory = self.stage(topic, insert.expression, [c.name for c in insert.this.expressions],
                                                current.number, counted=False, frame=kept, split=split)[0]
                if split:
                    self._apart(topic, split)
            else:
                kept.createOrReplaceTempView(name)     # (a view and SQL over it: cheaper than two selectExpr)
                try:
                    self.write(topic, insert_for(exp.table_(name)), counted=False, split=split)    # counted above
                finally:
                    self.spark.catalog.dropTempView(name)
            # (the aggregates read the decided rows, not the view)
            if last is None:
                got = observed.values()["observed"].asDict()
                return Decided(got, [{e.alias: got.pop(f"__sd_outcome_{e.alias}") for e in outcome}])
            lines, got = observed.lines_and_values()
        return Decided(got, _from_json_lines(lines, outcome))

    def staged_rows(self, topic) -> exp.Expression:
        """The rows the open commit staged (its directory's Parquet files, ``_commit`` left out), as a relation; an
        empty one of the topic's columns when it staged none."""
        directory = self._open[topic.key].directory
        if directory is None:
            return exp.select("*").from_(topic.table.copy()).where(exp.false()).subquery()
        return exp.Table(this=exp.to_identifier(directory, quoted=True), db=exp.to_identifier("parquet"))

    def staged_keys(self, topic) -> pa.Table:
        """(producer, sequence_id) of each row the open commit staged (``Storage.staged_keys``): read from its files
        by Arrow where they are on the local disk (a statement of millions of keys would gather them in the driver's
        heap through a job), else by one (a Spark Connect client's too: the server's disk need not be the client's,
        and the server streams the rows)."""
        staged = self.staged_files(topic)
        if staged is None:
            return keys_of(self.adapter, self.staged_rows(topic))
        return key_marks(staged.to_table(columns=["_producer", "_highest_sequence_id"]))

    def staged_files(self, topic) -> ds.Dataset | None:
        """The rows the open commit staged, as an Arrow dataset of their files where they are on the local disk;
        None where they are not, or none were staged (the engine reads them: ``staged_rows``)."""
        directory = self._open[topic.key].directory
        local = local_path(directory) if directory else None
        if local is None or self.adapter.remote:
            return None
        return ds.dataset(local, format="parquet", partitioning="hive")

    def discard(self, topic) -> None:
        current = self._open[topic.key]
        for directory in (current.directory, current.apart):
            if directory:
                remove_directory(directory)
        current.directory = current.apart = current.dropped = None

    def publish(self, topic) -> None:
        current = self._open[topic.key]
        if current.directory is None:    # nothing staged (a snapshot, a policy change): an empty directory
            current.directory = self._empty_directory(topic, current.number)
        try:
            self.adapter.partitions.add(topic.table, current.number, current.directory)
        except EngineError as error:
            if already_exists(" / ".join(causes(error.__cause__ or error))):
                raise CommitConflict(f"another writer published commit {current.number} of {topic.key} first; "
                                     "this attempt is not published (decide again on the new state)") from error
            raise
        if self.adapter.remote:
            self.adapter.partitions.known(topic.table)[str(current.number)] = current.directory
        if not self.adapter.exclusive:       # the winner says so (visible_commits reads the partition if it never does)
            known = self._winners.get(topic.key)
            if known is not None and current.published is not None and known.published == current.published:
                known.published = known.published | {current.number}
            self.adapter.files.append_rows(catalog_table("seqdedup_commits"), pa.Table.from_pylist(
                [{"topic": topic.key, "commit_id": current.number, "attempt": current.attempt,
                  "published_at": dt.datetime.now()}], schema=arrow_schema(COMMITS)))

    def close(self, topic) -> None:
        current = self._open.pop(topic.key, None)
        if current is not None and current.apart:
            remove_directory(current.apart)

    def stage(self, topic, rows: exp.Select, names: list[str], commit: int, *, counted: bool = True,
              frame=None, split: str | None = None) -> tuple[str, int | None]:
        """Write ``rows``, whose columns are ``names``, to a new directory as the topic's Parquet files, every
        column cast to the table's type (``_commit`` left out: it is the partition's value); returns the path and,
        when ``counted``, the number of rows written (observed on the way: no second job; an observation costs
        some 40 ms, paid only where the count is used). With a ``frame``, ``rows`` are its projections (their FROM
        is not read): the write stays one plan with the frame's. With ``split`` (a column of ``rows``), the rows
        are written partitioned by it, a folder each (``_apart``)."""
        F = self.F

        inner = rows.copy()
        inner.set("expressions", [exp.alias_(e.unalias(), f"_c{i}") for i, e in enumerate(inner.expressions)])
        where = {name.lower(): i for i, name in enumerate(names)}
        typed = exp.select(*[
            exp.alias_(exp.cast(exp.column(f"_c{where[name.lower()]}") if name.lower() in where else exp.null(),
                                exp.DataType.build(kind, dialect=self.adapter.DIALECT)), name)
            for name, kind in self.adapter.files.columns_of(topic) if name != "_commit"
        ]).from_(inner.subquery("r"))
        if split:
            typed.select(exp.alias_(exp.column(f"_c{where[split.lower()]}"), split), copy=False)
        directory = self.staging_directory(topic, commit)
        self.adapter.check_writable(exp.insert(typed, topic.table.copy()))     # the topic rows, written below
        with self.adapter.errors():
            if frame is None:
                frame = self.adapter.frame(typed)
            else:
                frame = self._projected(self._projected(frame, inner.expressions), typed.expressions)
            if not counted:
                self._writer(frame, split).parquet(directory)
                return directory, None
            observed = Observed(frame, rows=F.count(F.lit(1)))
            self._writer(observed.frame, split).parquet(directory)
            return directory, observed.values()["rows"]

    @staticmethod
    def _writer(frame, split: str | None):
        """A frame's writer into a new directory, partitioned by ``split`` where given: each task writes a file per
        value as its rows come (``spark.sql.maxConcurrentOutputFileWriters``, held by seqdedup's calls), where
        Spark would otherwise sort each task's rows by the value first."""
        writer = frame.write.mode("error")
        return writer.partitionBy(split) if split else writer

    def _projected(self, frame, expressions: list[exp.Expression]):
        """``SELECT expressions FROM frame`` as DataFrame operations, the parameters bound now given as columns of
        literals (as ``spark.sql`` binds them)."""
        bound = self.adapter.bound(" ".join(self.adapter.sql(e) for e in expressions), ":") or {}
        inlined = [e.transform(lambda node: exp.column(f"__sd_parameter_{node.name}")
                               if isinstance(node, exp.Placeholder) and node.name in bound else node)
                   for e in expressions]
        if bound:
            frame = frame.withColumns({f"__sd_parameter_{k}": self.F.lit(v) for k, v in bound.items()})
        return frame.selectExpr(*[self.adapter.sql(e) for e in inlined])

    def staging_directory(self, topic, commit: int) -> str:
        """A new directory for the rows of ``commit`` (this attempt's), named as ``staging_name`` reads it."""
        attempt = self._open[topic.key].attempt
        return f"{self.adapter.files.location(topic)}/{STAGING}/{commit}-{attempt}-{uuid.uuid4().hex[:8]}"

    def _empty_directory(self, topic, commit: int) -> str:
        """A new directory with no file, for a commit that wrote no entry: made directly on a local disk (a Spark
        job writing no row costs about 0.4 s, as much as the rest of a snapshot's commit), elsewhere by that job."""
        directory = self.staging_directory(topic, commit)
        if local_path(directory):
            os.makedirs(local_path(directory))
            return directory
        return self.stage(topic, exp.select(exp.null()).where(exp.false()), [], commit, counted=False)[0]
