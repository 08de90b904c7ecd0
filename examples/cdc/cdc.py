"""Change data capture, effectively once: Debezium's change events of a PostgreSQL table land in a topic once each,
with the source's position (lsn, event index) as the sequence id (R19), and are applied to the table's current state
with the consumer's position stored in the same commit.

    python examples/cdc/cdc.py --database PATH [--engine duckdb|spark] [--events N] [--batch N] [--file PATH]
                               [--slot NAME] [--verbose]

It writes ``--file`` (default: ``accounts.changes.jsonl`` beside the database), JSON lines of Debezium's
PostgreSQL envelope for N changes of a table ``accounts (id, balance)``, as the connectors delivered them: the events
of one transaction share its commit LSN (``source.lsn``) and are told apart by their place in it
(``transaction.total_order``); the LSNs pass 2^63 early on (an LSN is an unsigned 64-bit WAL position); a connector
restart replays a stretch from its last flushed offset; a second server replays the same slot while the first one
still sends. The envelope's ``ts_ms`` (when the connector sent the event) is the order of arrival.

Then it ingests the file into the topic ``account_changes`` (created with ``id_parts=2``), ``--batch`` lines per
statement, each ``INSERT ... WHERE is_not_dup(slot, (lsn, total_order)) ORDER BY ts_ms``: every replayed copy is
dropped. ``consume`` then appends the topic's new entries to the table ``applied_changes`` ``--batch`` entries per
commit, the consumer's position in the same commit; the view ``accounts`` is the table's current state: each
account's latest change by the source's position, deleted accounts left out.

Kill it at any moment (``kill -9``) and run it again: the ingest resumes at the first line whose id is above the
slot's ``last_sequence_id`` (every line before it is a copy of something written), the consumer after its stored
position. A run after a finished one writes and applies nothing. ``--database`` is the DuckDB file, or with
``--engine spark`` the folder of the local session's warehouse and Hive metastore. It prints a one-line summary;
``--verbose`` prints a line where each phase resumes and one per batch before it.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot import exp

import seqdedup
from seqdedup import consume, consumer_position

#: The topic, the consumer's output table and the consumer's name (the SQL below spells the tables' names too).
TOPIC, APPLIED, CONSUMER = "account_changes", "applied_changes", "accounts"
#: The first commit LSN, and the range of the steps between commits: the first two commits are below 2^63, the
#: third and later ones at or above it (any two steps add up to 0x600 at least).
FIRST_LSN, LSN_STEPS = 2**63 - 0x600, (0x300, 0x600)
FIRST_TX = 7_000
#: 2026-01-01 00:00 UTC, in milliseconds: where the example's clock starts.
EPOCH_MS = 1_767_225_600_000

# --- the source: a table's changes, and the connectors that deliver them ---------------------------------------


#: The first two transactions: two accounts opened, then money moved between them, so that the file's first lines hold
#: every field (the engines infer its types from its lines) and the second one commits below 2^63, the third above.
OPENING = [[("c", 1, None, 500), ("c", 2, None, 300)], [("u", 1, 500, 400), ("u", 2, 300, 400)]]


@dataclass(frozen=True)
class Change:
    """One row change of ``accounts``, as PostgreSQL's logical decoding hands it to Debezium."""

    lsn: int                        # the commit LSN of its transaction
    last_commit_lsn: int | None     # the transaction before's (Debezium's source.sequence)
    total_order: int                # its place in the transaction, from 1
    tx_id: int
    op: str                         # c, u or d
    account: int
    before: int | None              # the balance before (None for a create)
    after: int | None               # the balance after (None for a delete)


def settle(accounts: dict[int, int], op: tuple) -> tuple:
    """The table after ``op`` (op, account, before, after), in ``accounts``; returns ``op``."""
    _, account, _, after = op
    if after is None:
        del accounts[account]
    else:
        accounts[account] = after
    return op


def transaction_ops(accounts: dict[int, int], size: int, next_id: int, rng: random.Random) -> list[tuple]:
    """(op, account, before, after) of a transaction of ``size`` changes of the table ``accounts``, settled in it."""
    ops = []
    for _ in range(size):
        kind = "c" if len(accounts) < 3 or rng.random() < 0.25 else "d" if rng.random() < 0.12 else "u"
        if kind == "c":
            ops.append(settle(accounts, ("c", next_id, None, rng.randrange(0, 1000))))
            next_id += 1
            continue
        account = rng.choice(sorted(accounts))
        before = accounts[account]
        after = None if kind == "d" else max(0, before + rng.randrange(-200, 300))
        ops.append(settle(accounts, (kind, account, before, after)))
    return ops


def changes(count: int, rng: random.Random) -> list[Change]:
    """``count`` changes in commit order: the opening, then transactions of 1 to 4 changes that open, update and
    close accounts (a transaction's changes share its commit LSN)."""
    accounts: dict[int, int] = {}
    found: list[Change] = []
    lsn, last_commit_lsn, tx = FIRST_LSN, None, 0
    while len(found) < count:
        if tx < len(OPENING):
            ops = [settle(accounts, op) for op in OPENING[tx]]
        else:
            ops = transaction_ops(accounts, rng.choice([1, 1, 2, 3, 4]), len(found) + 1, rng)
        found += [Change(lsn, last_commit_lsn, n, FIRST_TX + tx, *op)
                  for n, op in enumerate(ops[:count - len(found)], start=1)]
        lsn, last_commit_lsn, tx = lsn + rng.randrange(*LSN_STEPS), lsn, tx + 1
    return found


def transaction_start(stream: list[Change], i: int) -> int:
    """The index of the first change of the transaction that holds change ``i``: where a connector resumes from
    (the offset it flushes is a commit's)."""
    while i > 0 and stream[i - 1].lsn == stream[i].lsn:
        i -= 1
    return i


def deliveries(stream: list[Change], rng: random.Random) -> list[tuple[str, Change]]:
    """(server, change) in order of arrival: server-a sends the changes; it restarts and replays from a transaction
    well before where it stopped; then server-b replays the same slot from an earlier transaction to the end while
    server-a still sends for a while, their events interleaved. Each change first arrives after the one before it,
    so an ordered statement drops only copies."""
    n = len(stream)
    stop, replay = n * 45 // 100, transaction_start(stream, n * 30 // 100)
    handover, takeover, last_a = n * 65 // 100, transaction_start(stream, n * 50 // 100), n * 80 // 100
    arrived = [("server-a", c) for c in stream[:stop] + stream[replay:handover]]
    a = deque(("server-a", c) for c in stream[handover:last_a])
    b = deque(("server-b", c) for c in stream[takeover:])
    while a or b:       # two servers on one slot: their events interleave, each server's in order
        arrived.append((a if a and (not b or rng.random() < 0.5) else b).popleft())
    return arrived


def envelope(change: Change, server: str, ts_ms: int) -> dict:
    """Debezium's PostgreSQL change event (the value of a Kafka record, without its schema)."""
    def row(balance):
        return None if balance is None else {"id": change.account, "balance": balance}

    last_commit = None if change.last_commit_lsn is None else str(change.last_commit_lsn)
    source = {"version": "2.7.3.Final", "connector": "postgresql", "name": server,
              "ts_ms": EPOCH_MS + (change.tx_id - FIRST_TX) * 10, "snapshot": "false", "db": "bank",
              "sequence": json.dumps([last_commit, str(change.lsn)], separators=(",", ":")), "schema": "public",
              "table": "accounts", "txId": change.tx_id, "lsn": change.lsn}
    transaction = {"id": f"{change.tx_id}:{change.lsn}", "total_order": change.total_order,
                   "data_collection_order": change.total_order}
    return {"before": row(change.before), "after": row(change.after), "source": source, "transaction": transaction,
            "op": change.op, "ts_ms": ts_ms}


def event_lines(count: int, seed: int) -> str:
    """The file's text: one event a line, ``ts_ms`` increasing along the file."""
    rng = random.Random(seed)
    ts_ms, lines = EPOCH_MS + 60_000, []
    for server, change in deliveries(changes(count, rng), rng):
        ts_ms += rng.randrange(1, 20)
        lines.append(json.dumps(envelope(change, server, ts_ms)))
    return "\n".join(lines) + "\n"


def write_events(path: Path, text: str) -> None:
    """Write the file whole (a copy renamed into place: a run killed while writing leaves the old one or none);
    nothing when it holds ``text`` already."""
    if path.exists() and path.read_text() == text:
        return
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    os.replace(partial, path)


# --- SQL ---------------------------------------------------------------------------------------------------------

#: The envelope's fields as the topic's columns. The LSN is read as DECIMAL(20, 0): it holds every unsigned 64-bit
#: value on both engines (a JSON reader infers BIGINT, HUGEINT or DECIMAL, as the numbers it sees need).
CHANGE_EVENTS = """
CREATE OR REPLACE TEMPORARY VIEW change_events AS
SELECT :slot AS slot, CAST(e.source.lsn AS DECIMAL(20, 0)) AS lsn, e.`transaction`.total_order AS total_order,
       e.op, coalesce(e.after.id, e.before.id) AS account, e.after.balance AS balance, e.source.name AS server,
       e.ts_ms
FROM :file AS e
"""

#: The first line, in order of arrival, whose id is above the slot's mark (``:lsn``, ``:total_order``).
RESUME = """
SELECT min(ts_ms) FROM change_events
WHERE lsn > :lsn OR (lsn = :lsn AND total_order > :total_order)
"""

#: The batches from line ``:first`` on: each ``:size`` lines, as (first ts_ms, last ts_ms).
BATCHES = """
SELECT min(ts_ms), max(ts_ms) FROM (
  SELECT ts_ms, row_number() OVER (ORDER BY ts_ms) - 1 AS n FROM change_events WHERE ts_ms >= :first)
GROUP BY n DIV :size ORDER BY 1
"""

INGEST = """
INSERT INTO account_changes
SELECT op, account, balance, lsn, total_order, server, ts_ms FROM change_events
WHERE ts_ms BETWEEN :first AND :last AND is_not_dup(slot, (lsn, total_order))
ORDER BY ts_ms
"""

#: What ``consume`` appends per batch: each change, its id (text whose order is the ids' order: catalog/ids.py).
APPLY = "SELECT account, op, balance, _sequence_id AS change_id, _position AS position FROM new_entries"

CURRENT_STATE = """
CREATE OR REPLACE VIEW accounts AS
SELECT account AS id, balance FROM (
  SELECT account, op, balance, row_number() OVER (PARTITION BY account ORDER BY change_id DESC) AS newest
  FROM applied_changes)
WHERE newest = 1 AND op <> 'd'
"""


def bind(template: str, **values) -> exp.Expression:
    """The Spark SQL ``template`` with each ``:name`` replaced by ``values[name]``: a sqlglot table in a FROM, else
    a literal. Values are never pasted into SQL text."""
    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Placeholder):
            table = values[node.this.name].copy()
            table.set("alias", node.args.get("alias"))
            return table
        if isinstance(node, exp.Placeholder):
            value = values[node.name]
            return exp.Literal.string(value) if isinstance(value, str) else exp.Literal.number(value)
        return node

    return sqlglot.parse_one(template, read="spark").transform(swap)


def json_file(path: Path) -> exp.Table:
    """Spark's ``json.`path``` (seqdedup reads it with DuckDB's read_json on DuckDB)."""
    return exp.Table(this=exp.to_identifier(str(path.resolve()), quoted=True), db=exp.to_identifier("json"))


# --- the pipeline ------------------------------------------------------------------------------------------------

def connect(engine: str, database: str, master: str):
    if engine == "spark":
        from seqdedup.extensions.spark import local_session

        return seqdedup.connect(local_session(database, master=master), engine="spark")
    return seqdedup.connect(database)


def resume_from(session, mark) -> int | None:
    """The ts_ms of the first line to send: the first whose id is above the slot's mark (every line before it, in
    order of arrival, is at or below the mark: written, or a copy of what was); None when there is none."""
    lsn, total_order = (-1, -1) if mark == -1 else mark      # -1: no mark yet, every line is above it
    return session.run(bind(RESUME, lsn=lsn, total_order=total_order)).rows[0][0]


def ingest(session, slot: str, batch: int, verbose: bool) -> dict:
    """Send the lines not yet written, ``batch`` a statement, in order of arrival."""
    mark = session.last_sequence_id(TOPIC, slot)
    first = resume_from(session, mark)
    if verbose:
        print(f"ingest: last_sequence_id {mark}; " + (f"resuming at ts_ms {first}" if first is not None
                                                      else "nothing left to send"), flush=True)
    done = {"mark": mark, "sent": 0, "written": 0, "dropped": 0}
    windows = session.run(bind(BATCHES, first=first, size=batch)).rows if first is not None else []
    for start, end in windows:
        result = session.run(bind(INGEST, first=start, last=end))
        done["sent"] += result.written + result.duplicates
        done["written"] += result.written
        done["dropped"] += result.duplicates
        if verbose:
            print(f"ingest: sent the lines at ts_ms {start}..{end}: wrote {result.written}, dropped "
                  f"{result.duplicates}", flush=True)
    return done


def apply(session, batch: int, verbose: bool) -> dict:
    """Append the topic's entries not yet applied to ``applied_changes``, ``batch`` a commit, each with the
    consumer's new position; then (re)define the current state over it."""
    start = position = consumer_position(session, TOPIC, into=APPLIED, consumer=CONSUMER)
    if verbose:
        print(f"apply: resuming after position {position}", flush=True)
    applied = 0
    while batches := consume(session, TOPIC, APPLY, into=APPLIED, consumer=CONSUMER, max_entries=batch, once=True):
        b = batches[0]
        applied, position = applied + b.rows_written, b.consumed_through
        if verbose:
            print(f"apply: applied the entries after position {b.consumed_from} through {b.consumed_through}: "
                  f"{b.rows_written} changes", flush=True)
    session.run(bind(CURRENT_STATE))
    return {"from": start, "through": position, "applied": applied}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", "-d", required=True,
                        help="DuckDB: the database file. Spark: the folder of the warehouse and Hive metastore")
    parser.add_argument("--engine", default="duckdb", choices=["duckdb", "spark"])
    parser.add_argument("--master", default="local[2]", help="Spark master URL (with --engine spark)")
    parser.add_argument("--events", type=int, default=1000, help="changes of the source table (default 1000)")
    parser.add_argument("--batch", type=int, default=100, help="lines per statement, entries per commit (100)")
    parser.add_argument("--file", type=Path, help="the change events (default: accounts.changes.jsonl beside "
                                                  "the database)")
    parser.add_argument("--slot", default="debezium", help="the replication slot: the producer name")
    parser.add_argument("--seed", type=int, default=44, help="the events' random seed")
    parser.add_argument("--verbose", "-v", action="store_true", help="also print where it resumes and each batch")
    args = parser.parse_args(argv)
    if args.events < 4 or args.batch < 1:
        parser.error("--events must be at least 4 and --batch at least 1")
    folder = Path(args.database).resolve().parent
    folder.mkdir(parents=True, exist_ok=True)
    file = args.file or folder / "accounts.changes.jsonl"
    text = event_lines(args.events, args.seed)
    write_events(file, text)

    with connect(args.engine, args.database, args.master) as session:
        session.create_topic(TOPIC, {"op": "STRING", "account": "BIGINT", "balance": "BIGINT",
                                     "lsn": "DECIMAL(20, 0)", "total_order": "BIGINT", "server": "STRING",
                                     "ts_ms": "BIGINT"}, id_parts=2, if_not_exists=True)
        session.run(bind(CHANGE_EVENTS, slot=args.slot, file=json_file(file)))
        sent = ingest(session, args.slot, args.batch, args.verbose)
        applied = apply(session, args.batch, args.verbose)
        rows, balance = session.sql("SELECT count(*), coalesce(sum(balance), 0) FROM accounts").rows[0]
        print(f"{file.name}: {text.count(chr(10))} lines; after last_sequence_id {sent['mark']} sent {sent['sent']}, "
              f"wrote {sent['written']}, dropped {sent['dropped']} copies; applied {applied['applied']} changes "
              f"(after position {applied['from']} through {applied['through']}); accounts: {rows} rows, balance "
              f"{balance}; last_sequence_id {session.last_sequence_id(TOPIC, args.slot)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
