"""What the fault tests share: a dump of everything a database holds, and a statement large enough to fill a disk."""
from __future__ import annotations

import os

import pyarrow as pa
from sqlglot import exp

from seqdedup.catalog.schema import CATALOG_TABLES, catalog_table

#: The statement every fault test sends and retries: entries of a view ``staging`` (producer, seq, arrival, payload).
STATEMENT = "INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq) ORDER BY arrival"


def dump(session, topics: tuple[str, ...] = ("events",)) -> dict[str, list[str]]:
    """Every row of every catalog table and of the topics, as sorted text: what "nothing was written" compares.
    Read through the session's adapter, so it works while the catalog is too damaged for a new session."""
    adapter = session.adapter
    tables = {name: catalog_table(name) for name in CATALOG_TABLES}
    tables.update({topic: session.ref(topic).table for topic in topics})
    return {name: sorted(map(repr, adapter.fetchall(exp.select("*").from_(table.copy()))))
            for name, table in tables.items() if adapter.columns(table)}


def entries(session, topic: str = "events") -> list[tuple]:
    """(producer, sequence_id) of the topic's entries, in position order."""
    return [tuple(row) for row in session.sql(
        f"SELECT _producer, _sequence_id FROM {topic} ORDER BY _position").rows]


def rows(producers: int, ids: range, payload_bytes: int = 0) -> pa.Table:
    """Entries for ``staging``: every producer ``p0, p1 ...`` with every id, in that arrival order, each with a
    payload of ``payload_bytes`` random hex digits (incompressible enough that the bytes really reach the disk)."""
    pairs = [(f"p{p}", s) for s in ids for p in range(producers)]
    return pa.table({
        "producer": [p for p, _ in pairs],
        "seq": pa.array([s for _, s in pairs], pa.int64()),
        "arrival": pa.array(range(len(pairs)), pa.int64()),
        "payload": [os.urandom(payload_bytes // 2).hex() if payload_bytes else f"{p}/{s}" for p, s in pairs],
    })


def stage(session, engine: str, table: pa.Table) -> None:
    """Make ``table`` the view ``staging`` of the session."""
    if engine == "spark":
        session.adapter.spark.createDataFrame(table).createOrReplaceTempView("staging")
    else:
        session.adapter.connection.register("staging", table)
