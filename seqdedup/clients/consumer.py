"""The consuming side of effectively-once: a ``Reader`` that walks a topic by position, and ``consume``, which keeps
a consumer's position in the same commit as the output it computed.

Pulsar's effectively-once consumer stores the message id it has processed up to together with its results, in one
atomic write, so that a consumer killed at any moment resumes where its last stored result ends: nothing is lost and
nothing is counted twice. Here the results are rows of an output table and the message id is the topic's
``_position``. Each batch of ``consume`` is one commit of the output table (``Writer.commit``): the output rows
and the row of ``seqdedup_consumers`` recording the position they cover become visible together, or not at all
(DuckDB: one transaction; Spark: one partition registration, see extensions/spark/commits.py).

Example:
    >>> import seqdedup
    >>> session = seqdedup.connect(":memory:")
    >>> _ = session.create_topic("payments", {"amount": "BIGINT"})
    >>> _ = session.sql("CREATE TEMPORARY VIEW staging AS SELECT * FROM VALUES ('till-1', 0, 5), ('till-1', 1, 7), "
    ...                 "('till-1', 2, 30) AS t(producer, seq, amount)")
    >>> session.sql("INSERT INTO payments SELECT amount FROM staging WHERE is_not_dup(producer, seq)").written
    3
    >>> reader = Reader(session, "payments")
    >>> [row[0] for row in reader.read(max_entries=2).rows], reader.position, reader.has_more()
    ([5, 7], 2, True)
    >>> batches = consume(session, "payments", "SELECT count(*) AS n, sum(amount) AS total FROM new_entries",
    ...                   into="payment_totals", consumer="totals", max_entries=2)
    >>> [(b.consumed_from, b.consumed_through, b.rows_written) for b in batches]
    [(0, 2, 1), (2, 3, 1)]
    >>> session.sql("SELECT n, total FROM payment_totals ORDER BY _commit").rows
    [(2, 12), (1, 30)]
    >>> consume(session, "payments", "SELECT count(*) AS n, sum(amount) AS total FROM new_entries",
    ...         into="payment_totals", consumer="totals")     # caught up: nothing to do
    []
"""
from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from seqdedup.catalog.ids import decoded_rows
from seqdedup.catalog.catalog import TopicRef
from seqdedup.catalog.schema import ATTEMPT, CATALOG_TABLES, catalog_table
from seqdedup.catalog.state import last_position_query, literal
from seqdedup.errors import CommitConflict, RewriteError, TopicError
from seqdedup.sql import statements
from seqdedup.sql.dialects import read_dialect

from ..failpoints import failpoint
from ..core.results import QueryResult

#: The table name the user's SQL reads a batch's entries from.
NEW_ENTRIES = "new_entries"
#: The system column of an output table: the output commit that wrote the row (last; Spark partitions by it).
COMMIT = "_commit"
POSITION = exp.column("_position")


class Reader:
    """Reads a topic's committed entries in position order, from a position on (Pulsar's Reader).

    ``start_after`` is a position (an entry's ``_position``, its message id): the reader returns the entries after
    it. ``"earliest"`` is 0 (every entry), ``"latest"`` the topic's last position now (only entries written later).
    The reader keeps its position in memory only: to resume after a restart, store ``reader.position`` with what
    you made of the entries, in one commit (``consume`` does exactly that).
    """

    def __init__(self, session, topic: str, start_after: int | str = 0):
        self.session = session
        self.ref: TopicRef = session.ref(topic)
        self.id_parts = session.committed.topic(self.ref).id_parts      # (an unknown topic is named at once)
        self.columns = [name for name, _ in session.adapter.columns(self.ref.table, committed=True)]
        self.position: int = self._start(start_after)    # the last position returned; read() returns entries after it

    def _start(self, start_after: int | str) -> int:
        if start_after == "earliest":
            return 0
        if start_after == "latest":
            return self._fetch(last_position_query(self.ref.table, 0, self._own()))[0][0]
        if isinstance(start_after, int) and not isinstance(start_after, bool) and start_after >= 0:
            return start_after
        raise TopicError(f"start_after={start_after!r} is not a position: give a topic position (an entry's "
                         "_position, 0 or more), 'earliest' or 'latest'")

    def query(self, max_entries: int | None = None) -> exp.Select:
        """The SELECT of the entries after the reader's position, in position order: compose it, run it yourself
        (``read`` runs it and moves the position)."""
        query = (exp.select(*[exp.column(name, quoted=True) for name in self.columns]).from_(self.ref.table.copy())
                 .where(exp.and_(POSITION.copy() > literal(self.position), self._own())).order_by(POSITION.copy()))
        limit = _max_entries(max_entries)
        return query.limit(limit) if limit is not None else query

    def read(self, max_entries: int | None = None) -> QueryResult:
        """The next entries (all of them, or at most ``max_entries``), with every column (a composite id as its
        tuple, R19: ``query`` gives its text); the position moves to the last one returned."""
        rows = self._fetch(self.query(max_entries))
        if self.id_parts is not None:
            rows = decoded_rows(rows, [self.columns.index(c) for c in ("_sequence_id", "_highest_sequence_id")])
        if rows:
            self.position = rows[-1][self.columns.index("_position")]
        return QueryResult(columns=list(self.columns), rows=rows)

    def has_more(self) -> bool:
        """Whether the topic has committed entries after the reader's position."""
        return bool(self._fetch(exp.select(literal(1)).from_(self.ref.table.copy())
                                .where(exp.and_(POSITION.copy() > literal(self.position), self._own())).limit(1)))

    def _own(self) -> exp.Expression:
        """The topic's rows seqdedup wrote: a reader skips rows inserted around it (seqdedup/core/foreign.py)."""
        return self.session.adapter.committed_reads().storage.own_rows(self.ref)

    def _fetch(self, query: exp.Expression) -> list[tuple]:
        return self.session.adapter.fetchall(query, committed=True)    # committed entries only


@dataclass
class ConsumeBatch:
    """One batch of ``consume``: one commit of the output table."""

    consumed_from: int        # the consumer's position before the batch: it read the entries after it
    consumed_through: int     # the last position it read, stored with the output as the consumer's new position
    rows_written: int         # the output rows the SQL gave for the batch
    commit: int               # the output table's commit that holds them (their ``_commit``) and the position


def consume(session, source: str, sql: str, *, into: str, consumer: str, max_entries: int = 10_000,
            once: bool = False) -> list[ConsumeBatch]:
    """Run ``sql`` over the entries of topic ``source`` that consumer ``consumer`` has not consumed yet, batch by
    batch, appending its rows to the table ``into`` together with the consumer's new position, in one commit.

    ``sql`` is one query (in the session's dialect, Spark SQL by default) that reads the batch's entries from the
    table ``new_entries``: the topic's rows, user and system columns. A batch is at most ``max_entries`` entries;
    ``once`` runs one batch at most. The output table is created by the first batch, with the query's columns and
    ``_commit``. Returns the batches run: an empty list when the consumer had caught up. Killed at any moment and
    run again, it resumes after the last committed batch: each entry is consumed exactly once.
    """
    if not isinstance(consumer, str) or not consumer:
        raise TopicError(f"consumer={consumer!r}: a consumer needs a name, a non-empty string that stays the same "
                         "across restarts (its position is stored under it)")
    limit = _max_entries(max_entries)
    if limit is None:
        raise TopicError("max_entries=None: consume needs a batch size, a positive integer")
    source_ref, out_ref = session.ref(source), session.ref(into)
    with session.writer:        # the checks read through the writer's connection (DuckDB: the user's temp views)
        session.topic(source_ref)                    # an unknown source is named before anything else
        _check_output_name(session, out_ref)
        tree = _parse(session, sql)
        # The query is checked against the source's columns before anything is written, even with nothing to
        # consume.
        empty = exp.select("*").from_(source_ref.table.copy()).where(exp.false()).subquery(NEW_ENTRIES)
        _output_columns(session, out_ref, session.adapter.query_columns(_bind(tree, empty)))

    batches: list[ConsumeBatch] = []
    while True:
        try:
            batch = _batch(session, source_ref, out_ref, tree, consumer, limit)
        except CommitConflict:      # another driver consumed the same entries first: read on from its position
            continue
        if batch is None:
            return batches
        batches.append(batch)
        if once:
            return batches


def consumer_position(session, source: str, *, into: str, consumer: str) -> int:
    """The consumer's stored position: the last source position whose output is committed in ``into`` (0: none)."""
    with session.writer:
        return _position(session, session.ref(source), session.ref(into), consumer)


# --- one batch ---------------------------------------------------------------------------------------------------

def _batch(session, source: TopicRef, out: TopicRef, tree: exp.Query, consumer: str,
           max_entries: int) -> ConsumeBatch | None:
    adapter = session.adapter
    with session.writer, session.writer.scratch() as scratch:
        number = None
        if adapter.contended:
            # Where other drivers publish: the output's commit number first, then the position read fresh; a batch
            # another driver publishes in between takes that number, and this one is refused (CommitConflict).
            number = adapter.storage.last_published_commit(out) + 1 if adapter.columns(out.table) else None
            adapter.storage.refresh(catalog_table("seqdedup_consumers"), source.table)
        start = _position(session, source, out, consumer)
        through = _batch_end(session, source, start, max_entries)
        if through is None:
            return None
        entries = scratch.table("__sd_new_entries", exp.select("*").from_(source.table.copy()).where(
            exp.and_(POSITION.copy() > literal(start), POSITION.copy() <= literal(through),
                     adapter.storage.own_rows(source))))
        query = _bind(tree, entries)
        columns = adapter.query_columns(query)
        targets = _output_columns(session, out, columns, create=True)
        now = session.clock()
        with session.writer.commit(out, number) as commit:
            written = adapter.storage.write_topic(out, _output_insert(
                out, query, [n for n, _ in columns], targets, commit.number))
            failpoint("after_output_rows")
            adapter.execute(exp.insert(
                exp.select(literal(consumer), literal(source.key), literal(out.key), literal(through),
                           literal(commit.number), literal(now), ATTEMPT),
                catalog_table("seqdedup_consumers"), columns=list(CATALOG_TABLES["seqdedup_consumers"])))
        return ConsumeBatch(consumed_from=start, consumed_through=through, rows_written=written or 0,
                            commit=commit.number)


def _batch_end(session, source: TopicRef, start: int, max_entries: int) -> int | None:
    """The position of the ``max_entries``-th entry after ``start`` (or of the last one, if fewer); None when
    there is none. Positions are not dense, so this is a top-N of the positions after ``start``."""
    first = (exp.select(POSITION.copy()).from_(source.table.copy())
             .where(exp.and_(POSITION.copy() > literal(start), session.adapter.storage.own_rows(source)))
             .order_by(POSITION.copy()).limit(max_entries))
    return session.adapter.fetchall(exp.select(exp.Max(this=exp.column("_position"))).from_(first.subquery("f")))[0][0]


def _position(session, source: TopicRef, out: TopicRef, consumer: str) -> int:
    """max(position) of the consumer's rows for this source and output whose output commit is published."""
    if not session.adapter.columns(out.table):
        return 0          # no output table yet (on Spark its partitions say which commits are published)
    where = exp.and_(exp.column("consumer").eq(literal(consumer)), exp.column("source").eq(literal(source.key)),
                     exp.column("topic").eq(literal(out.key)), session.adapter.storage.visible_commits(out))
    query = exp.select(exp.func("coalesce", exp.Max(this=exp.column("position")), literal(0))).from_(
        catalog_table("seqdedup_consumers")).where(where)
    return session.adapter.fetchall(query)[0][0]


def _output_insert(out: TopicRef, query: exp.Query, values: list[str], targets: list[str],
                   commit: int) -> exp.Insert:
    """``INSERT INTO out (targets) SELECT <the query's columns values>, commit FROM (query)``: the table's own
    column names (``targets``, ``_commit`` last), which Spark's staging matches by name."""
    body = exp.select(*[exp.column(name, table="o", quoted=True) for name in values], literal(commit)).from_(
        query.subquery("o"))
    return exp.insert(body, out.table.copy(), columns=[exp.to_identifier(name, quoted=True) for name in targets])


# --- the user's SQL and the output table -------------------------------------------------------------------------

def _parse(session, sql: str) -> exp.Query:
    if not isinstance(sql, str):
        raise RewriteError(f"consume takes its query as SQL text, not {type(sql).__name__}")
    trees = statements.parse(sql, read_dialect(session.dialect))
    if len(trees) != 1 or not isinstance(trees[0], exp.Query):
        raise RewriteError("consume takes one query (SELECT ... FROM new_entries ...), whose rows it appends to the "
                           "output table; got " + ", ".join(type(t).__name__.upper() for t in trees))
    return trees[0]


def _bind(tree: exp.Query, table: exp.Expression) -> exp.Query:
    """The query with every ``new_entries`` (a table without a namespace) read from ``table`` instead.

    Example:
        >>> q = sqlglot.parse_one("SELECT count(*) FROM new_entries JOIN ns.new_entries AS n ON TRUE")
        >>> _bind(q, exp.table_("__sd_new_entries_1")).sql()
        'SELECT COUNT(*) FROM __sd_new_entries_1 AS new_entries JOIN ns.new_entries AS n ON TRUE'
    """
    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Table) and not node.args.get("db") and node.name.lower() == NEW_ENTRIES:
            bound = table.copy()
            bound.set("alias", (node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(NEW_ENTRIES))).copy())
            return bound
        return node

    return tree.copy().transform(swap)


def _check_output_name(session, out: TopicRef) -> None:
    if out.key in session.topics():
        raise TopicError(f"{out.key} is a topic; consume writes its output to a plain table of its own: give `into` "
                         "another name")
    if out.namespace == session.adapter.DEFAULT_NAMESPACE and out.name in CATALOG_TABLES:
        raise TopicError(f"{out.key} is a seqdedup catalog table; give `into` another name")
    for part in (out.namespace, out.name):
        session.adapter.check_name(part)


def _output_columns(session, out: TopicRef, columns: list[tuple[str, str]], *, create: bool = False) -> list[str]:
    """The output table's column names, matched to the query's columns (``_commit`` last). A TopicError when the
    query's columns cannot make an output table, or the table exists with other columns; with ``create`` a missing
    table is created."""
    adapter = session.adapter
    names = [name for name, _ in columns]
    lowered = [name.lower() for name in names]
    if COMMIT in lowered:
        raise TopicError(f"the query gives a column {COMMIT}, which the output table reserves for the commit that "
                         "wrote each row; rename it")
    twice = sorted({name for name in lowered if lowered.count(name) > 1})
    if twice:
        raise TopicError(f"the query gives the columns {twice} more than once; give each output column its own name "
                         "(AS ...)")
    existing = adapter.columns(out.table)
    if existing:
        if [name.lower() for name, _ in existing] != lowered + [COMMIT]:
            raise TopicError(f"the output table {out.key} exists with the columns {[n for n, _ in existing]}, but "
                             f"the query gives {names} (and {COMMIT}); write into another table, or drop this one")
        return [name for name, _ in existing]
    types = {}
    for name, kind in columns:
        try:
            types[name] = exp.DataType.build(kind, dialect=adapter.DIALECT)
        except (sqlglot.errors.ParseError, ValueError):
            raise TopicError(f"the query's column {name!r} has the type {kind}, which a table cannot hold; CAST it "
                             "to a type such as STRING or BIGINT") from None
    if create:
        adapter.create_namespace(out.namespace)
        adapter.storage.create_topic_table(out.table, {**types, COMMIT: exp.DataType.build("bigint")})
    return names + [COMMIT]


def _max_entries(max_entries: int | None) -> int | None:
    if max_entries is None:
        return None
    if isinstance(max_entries, int) and not isinstance(max_entries, bool) and max_entries > 0:
        return max_entries
    raise TopicError(f"max_entries={max_entries!r}: give a positive number of entries")


__all__ = ["Reader", "ConsumeBatch", "consume", "consumer_position"]
