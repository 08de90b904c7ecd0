"""Scenario C17, two writers on one topic with overlapping ids, as data the thread and process tests share.

Writer ``a`` sends producers p0 and p1 (ids 0..249) and p2 (0..499); writer ``b`` sends p0 and p1 (the same ids)
and p3 (0..499): 1000 entries each, 500 of them the same (producer, id) as the other writer's. (Writer ``c``, for
three drivers, sends p0, p2, p3 and p4, ids 0..249 each.) Each sends its
entries in id order, in statements of a given size. Whatever the interleaving, the topic must hold each of the
1500 distinct entries exactly once, and the writers' results must add up to that.
"""
from __future__ import annotations

from sqlglot import exp

from seqdedup.catalog.state import literal

TOPIC = "events"
IDS = {"a": {"p0": 250, "p1": 250, "p2": 500}, "b": {"p0": 250, "p1": 250, "p3": 500},
       # a third writer, for several Spark drivers: p0 as both others, p2 and p3 as one other each, p4 its own
       "c": {"p0": 250, "p2": 250, "p3": 250, "p4": 250}}


def expected(writers: str) -> list[tuple[str, int]]:
    """Every distinct (producer, id) the writers send, sorted."""
    return sorted({(p, s) for w in writers for p, n in IDS[w].items() for s in range(n)})


EXPECTED = expected("ab")


def entries(writer: str) -> list[tuple[str, int]]:
    """The writer's 1000 entries, in id order, its producers interleaved."""
    ids = IDS[writer]
    return [(p, s) for s in range(max(ids.values())) for p in sorted(ids) if s < ids[p]]


def statements(writer: str, size: int) -> list[list[tuple[str, int]]]:
    rows = entries(writer)
    return [rows[i:i + size] for i in range(0, len(rows), size)]


def send(session, writer: str, rows: list[tuple[str, int]]):
    """One statement with these entries, in this order, staged in a view of the writer's own (sessions of one
    SparkSession share their temporary views)."""
    view = f"staging_{writer}"
    values = exp.values([(literal(p), literal(s), literal(i)) for i, (p, s) in enumerate(rows)], alias="t",
                        columns=["producer", "seq", "arrival"])
    session.run(exp.Create(this=exp.table_(view), kind="VIEW", replace=True, expression=exp.select(
        exp.cast(exp.column("producer"), "string").as_("producer"), exp.cast(exp.column("seq"), "bigint").as_("seq"),
        "arrival").from_(values), properties=exp.Properties(expressions=[exp.TemporaryProperty()])))
    payload = exp.func("concat", literal(f"{writer}:"), exp.column("producer"), literal("/"),
                       exp.cast(exp.column("seq"), "string"))
    return session.run(exp.insert(
        exp.select(payload).from_(view).where(exp.func("is_not_dup", exp.column("producer"), exp.column("seq")))
        .order_by("arrival"), TOPIC))


def topic_entries(session) -> list[tuple[str, int]]:
    """(producer, sequence id) of every entry, sorted: one row per entry, so a duplicate shows twice."""
    return sorted((p, s) for p, s in session.sql(f"SELECT _producer, _sequence_id FROM {TOPIC}").rows)
