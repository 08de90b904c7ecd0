"""The writer process the crash fuzzer (fuzz.py) kills: it opens a database, reports what it recovered, and runs
operations of a plan, acknowledging each one as it returns.

    python fuzz_child.py ENGINE DATABASE PLAN
    python fuzz_child.py ENGINE DATABASE --serve

With ``--serve`` it lives on and takes turns: each line on its standard input is a plan (as in the PLAN file); for
each it connects, runs the plan, closes its session and prints {"done": true}. Another writer process writes the
database between its turns (fuzz.py, ``--alternate``), so a writer that trusted what it remembered from its last
turn instead of what the catalog holds now would write a duplicate, or lose an entry, and the parent would see it.

PLAN is a JSON file: {"first": index of its first operation, "operations": [...]}; an operation is one of
``{"kind": "create", "policies": {...}}``, ``{"kind": "send", "entries": [[producer, seq, highest|null,
payload], ...], "ordered": bool[, "keyed": [key, ...]]}`` (keyed: ``is_new`` of these keys, R20), ``{"kind": "snapshot"}``, ``{"kind": "disable"}``, ``{"kind": "enable"}``,
each with ``"at"``, the seconds since the fuzz began that the session's clock reads while it runs.

Prints one JSON line per step: {"started": ...} once seqdedup is imported (the parent times random kills from
it), {"state": ...} once the database is open and its state recovered, {"ack": i, ...} after operation i returned.
``SEQDEDUP_CRASH_AT`` (seqdedup/failpoints.py) makes it kill itself at a step of a commit.
"""
from __future__ import annotations

import datetime as dt
import json
import sys

from sqlglot import exp

import seqdedup
from seqdedup import InvalidEntryError
from seqdedup.catalog import ids
from seqdedup.catalog.state import literal

TOPIC = "events"
#: The name a keyed statement's counts go under in an acknowledgement (the engines count its keys together, R20).
KEYS = "(keys)"
EPOCH = dt.datetime(2026, 1, 1)


class Clock:
    def __init__(self) -> None:
        self.now = EPOCH

    def __call__(self) -> dt.datetime:
        return self.now


def say(**line) -> None:
    print(json.dumps(line), flush=True)


def state(session) -> dict:
    """What the database holds, as a new process recovers it: the topic's entries and the producers' marks."""
    if not any(key.endswith(f".{TOPIC}") for key in session.topics()):
        return {"topic": False}
    entries = session.sql(f"SELECT _producer, _sequence_id, _highest_sequence_id, payload, _position, _commit "
                          f"FROM {TOPIC}")
    topic = session.topic(TOPIC)
    applied = topic.applied
    ledger = None
    if applied.ledger:     # its rows, and the duplicates the run log counts (R16)
        # Of published commits only, as a reader sees them: on Spark a commit killed before it was published leaves
        # the rows it appended (its ledger rows, not yet its run log row) in the catalog tables, where no reader
        # counts them, and the next commit takes a number above theirs.
        # Both are pruned by the same retention, one after the other: where no transaction holds the two (Spark), a
        # writer killed between them leaves the ledger rows of commits the run log no longer holds, until the next
        # prune. So the ledger is counted from the run log's oldest commit on (all of it before is pruned or due).
        catalog, ref = session.broker.catalog, session.ref(TOPIC)
        oldest = exp.select(exp.func("coalesce", exp.func("min", exp.column("commit_id")), exp.convert(2**62))).from_(
            catalog.run_log(ref).subquery("oldest"))
        ledger = session.run(exp.select(
            exp.select(exp.func("count", exp.Star())).from_(catalog.dropped(ref).subquery("ledger"))
            .where(exp.column("commit_id") >= oldest.subquery()).subquery(),
            exp.select(exp.func("coalesce", exp.func("sum", exp.column("duplicates")), exp.convert(0)))
            .from_(catalog.run_log(ref).subquery("log")).subquery())).rows[0]
    as_sent = (lambda s: s) if topic.id_parts is None else integer_id      # (R19: the ids as the plan sent them)
    rows = [[p, as_sent(ids.decoded(s) if topic.id_parts else s), as_sent(ids.decoded(h) if topic.id_parts else h),
             *rest] for p, s, h, *rest in entries.rows]
    return {"topic": True, "entries": rows,
            "marks": {p: as_sent(s) for p, s, _ in session.producer_state(TOPIC).rows},
            "enabled": applied.deduplication_enabled, "ledger": ledger}


#: A composite topic's ids (R19) are the plan's integer ids s as (FIRST + s // PART, s % PART): the same order.
PART = 8
#: ... the first part of a valid id offset so that it goes from 12 digits to 13 at s = 32: the stored text spells
#: each part with its count of digits (catalog/ids.py), and the order must hold across the change. A negative id
#: keeps its negative part (refused, R4).
FIRST = 10**12 - 4


def composite_id(s: int | None) -> tuple[int, int] | None:
    return None if s is None else (s // PART + (FIRST if s >= 0 else 0), s % PART)


def integer_id(s: tuple[int, int] | None) -> int | None:
    return None if s is None else (s[0] - FIRST if s[0] >= FIRST else s[0]) * PART + s[1]


def stage(session, entries: list[list]) -> None:
    """A temporary view ``staging`` of the entries, numbered in arrival order."""
    rows = [(literal(p) if p is not None else exp.null(), literal(s) if s is not None else exp.null(),
             literal(h) if h is not None else exp.null(), literal(payload), literal(i))
            for i, (p, s, h, payload) in enumerate(entries)]
    values = exp.values(rows, alias="t", columns=["producer", "seq", "highest", "payload", "arrival"])
    select = exp.select(exp.cast(exp.column("producer"), "string").as_("producer"),
                        exp.cast(exp.column("seq"), "bigint").as_("seq"),
                        exp.cast(exp.column("highest"), "bigint").as_("highest"), "payload", "arrival").from_(values)
    session.adapter.execute(exp.Create(this=exp.table_("staging"), kind="VIEW", replace=True, expression=select,
                                       properties=exp.Properties(expressions=[exp.TemporaryProperty()])))


def run(session, operation: dict) -> dict:
    kind = operation["kind"]
    if kind == "create":
        if state(session)["topic"]:       # a retried create whose first attempt committed
            return {}
        session.create_topic(TOPIC, {"payload": "STRING"}, **operation["policies"])
    elif kind == "send":
        keys = operation.get("keyed")       # is_new(key): each entry's key staged as its producer
        stage(session, operation["entries"] if keys is None else
              [[k, 0, None, e[3]] for k, e in zip(keys, operation["entries"])])
        order = " ORDER BY arrival" if operation["ordered"] else ""
        # (no batch entry: the two-argument form, whose plan takes no rounds, and whose ledger reasons follow from
        # each entry's own row: on Spark they are made from the statement's files)
        single = all(entry[2] is None for entry in operation["entries"])
        call = f"is_not_dup(producer, seq{'' if single else ', highest'})" if keys is None else "is_new(producer)"
        if session.state(TOPIC).topic.id_parts:      # (R19; a negative id's parts: (0, -3) on both engines, refused)
            call = (f"is_not_dup(producer, (CASE WHEN seq < 0 THEN seq DIV {PART} ELSE seq DIV {PART} + {FIRST} END, "
                    f"seq % {PART}))")
        try:
            result = session.sql(f"INSERT INTO {TOPIC} SELECT payload FROM staging WHERE {call}{order}")
        except InvalidEntryError as error:
            return {"error": type(error).__name__}
        return {"counts": {KEYS if keys is not None else p.producer: [p.written, p.duplicates]
                           for p in result.producers}}
    elif kind == "snapshot":
        session.snapshot(TOPIC)
    elif kind == "compact":
        session.compact(TOPIC, factor=2)       # pairs: merges happen with few commits
    else:
        session.alter_topic(TOPIC, deduplication_enabled=kind == "enable")
    return {}


def turn(engine: str, database: str, plan: dict) -> None:
    """Open the database (recovering its state), report it, run the plan's operations, close."""
    clock = Clock()
    if engine == "spark":
        from seqdedup.extensions.spark import local_session

        session = seqdedup.connect(local_session(database), clock=clock)
    else:
        session = seqdedup.connect(database, clock=clock)
    for name, value in plan.get("adapter", {}).items():     # e.g. tests/engines.py's DISTRIBUTED
        setattr(session.adapter, name, value)
    say(state=state(session))
    for index, operation in enumerate(plan["operations"], start=plan["first"]):
        clock.now = EPOCH + dt.timedelta(seconds=operation["at"])
        say(ack=index, **run(session, operation))
    session.close()


def main() -> None:
    engine, database, plan = sys.argv[1:4]
    say(started=True)
    if plan != "--serve":
        with open(plan) as file:
            turn(engine, database, json.load(file))
        return
    for line in sys.stdin:
        turn(engine, database, json.loads(line))
        say(done=True)


if __name__ == "__main__":
    main()
