"""The catalog's tables, as data: every DDL statement and read is generated from these dictionaries.

The catalog lives in the same engine as the topics, in the session's default namespace: ``producer_sequences``
beside ``seqdedup_topics``, ``seqdedup_policies``, ``seqdedup_statements``, ``seqdedup_consumers`` and
``seqdedup_meta``. (Not in a namespace of its own: DuckDB names a database after its file, so a ``seqdedup`` schema
inside the default ``seqdedup.duckdb`` would make every ``seqdedup.x`` ambiguous.) Tables are append-only so that an
engine without transactions never overwrites anything in place.

Commits: every change to a topic (a statement, a snapshot, a policy change) is one numbered commit of that topic.
The rows it adds to ``producer_sequences`` and ``seqdedup_statements`` carry its ``commit_id`` and the topic rows
its ``_commit``. On DuckDB a transaction publishes them together. On Spark the topic rows are staged unregistered and
the commit is published by registering the topic partition ``_commit = N`` (one metastore operation); catalog rows
of a commit that was never published are ignored by every read (see ``TransactionalStorage.visible_commits``).

A consumer's output table (``seqdedup.clients.consumer.consume``) is committed the same way, though it is not a
registered topic: each batch is one commit of the output, holding the output rows and the ``seqdedup_consumers`` row
that records how far the consumer has read, so the output and the position that produced it become visible together.
"""
from __future__ import annotations

from typing import Iterable

from sqlglot import exp

from .names import SYSTEM

#: Version of the catalog layout this code writes; a catalog marked with a higher one is refused.
CATALOG_VERSION = 2


def _types(**columns: str) -> dict[str, exp.DataType]:
    return {name: exp.DataType.build(kind) for name, kind in columns.items()}


#: Snapshot rows (R7, R8). A snapshot is one header row (producer NULL, ``producers`` = how many producer rows
#: it has) plus one row per producer. A snapshot counts only when all its rows are there ("complete").
#: A full snapshot (``parent_id`` NULL) holds every producer of the state; an increment (``parent_id`` = the
#: snapshot it adds to) holds only the producers whose mark changed since that one, and a row with a NULL
#: ``sequence_id`` (a tombstone) for each producer purged since (R11). See ``catalog.state.Chain``.
PRODUCER_SEQUENCES = _types(
    topic="text",                 # the topic's qualified name, namespace.name
    snapshot_id="bigint",         # 1, 2, 3 ... per topic, in the order snapshots were taken
    position="bigint",            # the snapshot covers every entry of the topic with _position <= position
    producer="text",              # NULL on the header row
    sequence_id="bigint",         # the producer's persisted high-water mark; NULL on the header row
    last_publish_time="timestamp",  # the producer's last write, for the inactivity purge (R11)
    producers="bigint",           # header row only: the number of producer rows of this snapshot
    kind="text",                  # enabled | disabled | snapshot | purge | repair | increment: why it was taken
    taken_at="timestamp",         # when the snapshot was taken (time-based cadence, R8)
    commit_id="bigint",           # the topic commit that wrote the row; it counts only once that commit is published
    parent_id="bigint",           # an increment's: the snapshot it adds to; NULL on a full snapshot
    attempt="text",               # which attempt at the commit wrote the row, where several drivers may (COMMITS)
    composite_id="text",          # a topic of composite ids' mark (R19, catalog.ids), in place of sequence_id
)

#: The topic registry.
TOPICS = _types(topic="text", namespace="text", name="text", created_at="timestamp",
                id_parts="bigint")        # the parts of its composite ids (R19, catalog.ids); NULL: integer ids

#: Policy settings (R9), append-only: the row with the highest version per (scope, target, key) is in force;
#: a NULL value means unset.
POLICIES = _types(scope="text", target="text", key="text", value="text", version="bigint", set_at="timestamp")

#: The run log: what each statement wrote and dropped, per producer (R5).
STATEMENTS = _types(
    statement_id="text", topic="text", producer="text", written="bigint", duplicates="bigint",
    first_position="bigint", last_position="bigint", executed_at="timestamp",
    highest="bigint",             # the highest id the statement wrote for the producer
    commit_id="bigint",           # the topic commit that wrote the row (see PRODUCER_SEQUENCES)
    out_of_order="bigint",        # of the duplicates, ids that arrived after a higher id (results.ProducerCount)
    attempt="text",               # see PRODUCER_SEQUENCES
    payload_conflicts="bigint",   # of the duplicates, those whose payload differed from the topic's for their id (R18)
)

#: The ledger of dropped entries (R16): one row per entry a statement did not write, where the topic's
#: ``dropped_entries`` policy is ``keys`` or ``rows``; written in the statement's commit.
DROPPED = _types(
    topic="text", commit_id="bigint", statement_id="text",
    producer="text", sequence_id="bigint", highest_sequence_id="bigint",
    reason="text",                # udfs.REASONS: retry | straddles_mark | repeat | late
    dropped_at="timestamp",       # the statement's time (its run log rows' executed_at)
    entry="text",                 # with ``rows``: the entry's own columns as a JSON object; else NULL
    attempt="text",               # see PRODUCER_SEQUENCES
    composite_id="text",          # a topic of composite ids' (R19, catalog.ids), its ids NULL then
)

#: The holes statements left after their producers' marks (R17), where the topic's ``gap_policy`` is ``record``: one
#: row per hole, the ids ``after_id + 1`` to ``before_id - 1`` never sent; written in the statement's commit.
GAPS = _types(
    topic="text", commit_id="bigint", statement_id="text", producer="text",
    after_id="bigint",            # the producer's mark before the entry
    before_id="bigint",           # the id of the entry written after the hole
    found_at="timestamp",         # the statement's time
    attempt="text",               # see PRODUCER_SEQUENCES
)

#: Facts about the catalog itself (its layout version).
META = _types(key="text", value="text")

#: Consumer positions, append-only: one row per batch a consumer read from a source topic into an output table,
#: written in the output's commit. A consumer's position is the highest ``position`` among its rows whose commit is
#: published; the rows are keyed by the output (``topic``) like every catalog row of a commit.
CONSUMERS = _types(
    consumer="text",              # the consumer's name, chosen by the user, stable across restarts
    source="text",                # the source topic's qualified name, namespace.name
    topic="text",                 # the OUTPUT table's qualified name: the table whose commit wrote the row
    position="bigint",            # the consumer read every source entry with _position <= position
    commit_id="bigint",           # the output commit that wrote the row (and the output rows of the batch)
    consumed_at="timestamp",      # when the batch ran
    attempt="text",               # see PRODUCER_SEQUENCES
)

#: The attempts that won their commit, where several drivers may write one table (Spark on a shared metastore).
#: Two drivers can both write the catalog rows of commit N; the metastore lets one register the topic partition,
#: whose directory is named after that attempt, and the winner adds its row here once it has. A catalog row with
#: an ``attempt`` counts only if it is its commit's winner (``Commits.visible``, Spark's); rows without one were
#: written where one process writes (a local home, DuckDB) and count once their commit is published.
COMMITS = _types(topic="text", commit_id="bigint", attempt="text", published_at="timestamp")

CATALOG_TABLES = {
    "producer_sequences": PRODUCER_SEQUENCES,
    "seqdedup_topics": TOPICS,
    "seqdedup_policies": POLICIES,
    "seqdedup_statements": STATEMENTS,
    "seqdedup_meta": META,
    "seqdedup_consumers": CONSUMERS,
    "seqdedup_commits": COMMITS,
    "seqdedup_dropped": DROPPED,
    "seqdedup_gaps": GAPS,
}

#: Producer leases: which driver holds a producer name on a topic, where several Spark drivers share a metastore
#: (R14; seqdedup/core/leases.py). Not among CATALOG_TABLES: only such sessions use it, and the first producer that
#: needs it creates it. No row is ever written: a lease is a partition's entry in the metastore, registered once per
#: (lease, epoch), which is the compare-and-set that admits one holder, and renewed in its storage properties.
LEASES_TABLE = "seqdedup_leases"
LEASE_COLUMNS = _types(unused="text")    # a table needs a column besides its partition columns; never written
LEASE_PARTITIONS = _types(
    lease="text",                 # a hex digest of (topic, producer name): a name may hold any character
    epoch="bigint",               # 1, 2, 3 ... per lease, one per claim; never dropped, so never given twice
)

#: Tables added to the version-2 layout after catalogs of that version were first written: a catalog without them
#: is still version 2, and ``Catalog.create()`` adds them when a writable session opens it.
ADDED_TABLES = frozenset({"seqdedup_consumers", "seqdedup_commits", "seqdedup_dropped", "seqdedup_gaps"})
#: Columns added to the version-2 layout in the same way, by table: ``Catalog.create()`` adds them (NULL in old rows).
ADDED_COLUMNS = {"seqdedup_statements": ("out_of_order", "attempt", "payload_conflicts"),
                 "producer_sequences": ("parent_id", "attempt", "composite_id"),
                 "seqdedup_consumers": ("attempt",), "seqdedup_topics": ("id_parts",),
                 "seqdedup_dropped": ("composite_id",)}

#: The attempt that writes a catalog row, bound for the length of a commit (``Writer.commit``): NULL where one
#: process writes.
ATTEMPT = exp.cast(exp.Placeholder(this="__sd_attempt"), "text")

#: Columns seqdedup adds to every topic, after the user's own, with their types (what each holds: ``names.SYSTEM``).
SYSTEM_COLUMNS = dict(zip(SYSTEM, map(exp.DataType.build,
                                      ("text", "bigint", "bigint", "bigint", "timestamp", "bigint")), strict=True))


def system_columns(id_parts: int | None) -> dict[str, exp.DataType]:
    """The system columns of a topic whose ids have ``id_parts`` parts (None: integer ids, ``SYSTEM_COLUMNS``)."""
    if id_parts is None:
        return SYSTEM_COLUMNS
    text = exp.DataType.build("text")
    return {**SYSTEM_COLUMNS, "_sequence_id": text, "_highest_sequence_id": text}


#: Columns of ``<topic>_foreign``, the table a topic's foreign rows are moved into (``seqdedup topic quarantine``):
#: the topic's own columns (``_commit`` among them), then these (``_move`` last: Spark partitions by it).
FOREIGN_COLUMNS = _types(
    _moved_from="text",           # Spark: the file the row was read from (a move cut short copies no file twice);
                                  # DuckDB: NULL
    _moved_at="timestamp",        # when it was moved
    _move="bigint",               # the move that brought it: 1, 2, 3 ... per table
)


def written_by_seqdedup(foreign_commits: Iterable[int] = ()) -> exp.Expression:
    """The condition that keeps the rows of a topic seqdedup wrote: every system column set, and ``_commit`` none of
    ``foreign_commits`` (Spark: partitions another tool registered). Any other row is foreign: written around
    seqdedup, by an INSERT run on the engine itself. Every read of a topic's entries seqdedup makes keeps only its own.

    Example:
        >>> written_by_seqdedup([999]).sql().split(" AND ")[-3:]
        ['NOT _publish_time IS NULL', 'NOT _commit IS NULL', 'NOT _commit IN (999)']
    """
    conditions = [exp.column(name).is_(exp.null()).not_() for name in SYSTEM_COLUMNS]
    foreign = sorted(foreign_commits)
    if foreign:
        conditions.append(exp.not_(exp.column("_commit").isin(*[exp.convert(n) for n in foreign])))
    return exp.and_(*conditions)


def foreign_commits(partitions: Iterable[str]) -> frozenset[int]:
    """The commit numbers among the values of a topic's foreign partitions (``storage.foreign_partitions``).

    Example:
        >>> sorted(foreign_commits(["__HIVE_DEFAULT_PARTITION__", "999", "3"]))
        [3, 999]
    """
    return frozenset(int(value) for value in partitions if value.isdigit())


def arrow_schema(columns: dict[str, exp.DataType]):
    """The ``pyarrow`` schema of a catalog table's rows built in Python (a statement's run log).

    Example:
        >>> arrow_schema(COMMITS).types
        [DataType(string), DataType(int64), DataType(string), TimestampType(timestamp[us])]
    """
    import pyarrow as pa

    types = {exp.DataType.Type.TEXT: pa.string(), exp.DataType.Type.BIGINT: pa.int64(),
             exp.DataType.Type.TIMESTAMP: pa.timestamp("us")}
    return pa.schema([(name, types[kind.this]) for name, kind in columns.items()])


def arrow_rows(columns: dict[str, exp.DataType], given: dict, once: dict, rows: int):
    """``rows`` rows of a catalog table built in Python: each column from ``given`` (name -> an Arrow array of
    ``rows`` values, cast to the column's type) where it has one, else the value ``once`` holds for it (none: NULL)
    on every row.

    Example:
        >>> import pyarrow as pa
        >>> arrow_rows(COMMITS, {"commit_id": pa.array([1, 2])}, {"topic": "t"}, 2).to_pylist()[1]
        {'topic': 't', 'commit_id': 2, 'attempt': None, 'published_at': None}
    """
    import pyarrow as pa

    schema = arrow_schema(columns)
    return pa.table([given[f.name].cast(f.type) if f.name in given else
                     pa.repeat(pa.scalar(once.get(f.name), f.type), rows) for f in schema], schema=schema)


#: The mark (in a table's ``meta``) on seqdedup's own tables, named without a database: an engine that resolves such
#: a name in a current database its user may change (Spark: ``USE``) qualifies marked names with the database the
#: catalog is in (``SparkAdapter``).
IN_CATALOG = "seqdedup_catalog"


def catalog_table(name: str) -> exp.Table:
    """The table of a catalog table, by its name in CATALOG_TABLES (marked ``IN_CATALOG``).

    Example:
        >>> catalog_table("producer_sequences").sql()
        'producer_sequences'
    """
    if name not in CATALOG_TABLES:
        raise KeyError(name)
    return in_catalog(exp.table_(name))


def in_catalog(table: exp.Table) -> exp.Table:
    """``table``, marked as one of seqdedup's own in the catalog's database (``IN_CATALOG``)."""
    table.meta[IN_CATALOG] = True
    return table


def create_table(table: exp.Table, columns: dict[str, exp.DataType], *, exists: bool = True,
                 not_null: Iterable[str] = ()) -> exp.Create:
    """``CREATE TABLE [IF NOT EXISTS] table (columns...)`` as a tree, the columns named in ``not_null`` NOT NULL.

    Example:
        >>> create_table(catalog_table("seqdedup_meta"), META).sql("duckdb")
        'CREATE TABLE IF NOT EXISTS seqdedup_meta (key TEXT, value TEXT)'
        >>> create_table(exp.table_("t"), META, exists=False, not_null=["key"]).sql("duckdb")
        'CREATE TABLE t (key TEXT NOT NULL, value TEXT)'
    """
    required = set(not_null)
    schema = exp.Schema(
        this=table.copy(),
        expressions=[exp.ColumnDef(this=exp.to_identifier(n), kind=t.copy(), constraints=[
            exp.ColumnConstraint(kind=exp.NotNullColumnConstraint())] if n in required else None)
            for n, t in columns.items()],
    )
    return exp.Create(this=schema, kind="TABLE", exists=exists)
