"""Dropping a topic on purpose (``seqdedup topic drop NAME --yes``): its table with every entry, its registry row, its
policies, its snapshots (``producer_sequences``), its run log, its ledger of dropped entries, its holes and the consumer
positions on it, for good.

The registry row goes first: from then on the topic is unknown to every statement. On DuckDB one transaction holds
the whole drop. On Spark each table changes in one metastore operation of its own, so a drop cut short leaves rows
of a topic nobody can use; dropping it again finishes the work.
"""
from __future__ import annotations

from sqlglot import exp

from seqdedup.catalog.schema import catalog_table
from seqdedup.catalog.state import literal
from seqdedup.errors import TopicError

#: catalog table -> the condition on its rows that belong to the topic whose key is given.
OWNED = {
    "seqdedup_topics": lambda key: exp.column("topic").eq(literal(key)),
    "producer_sequences": lambda key: exp.column("topic").eq(literal(key)),
    "seqdedup_statements": lambda key: exp.column("topic").eq(literal(key)),
    "seqdedup_dropped": lambda key: exp.column("topic").eq(literal(key)),
    "seqdedup_gaps": lambda key: exp.column("topic").eq(literal(key)),
    "seqdedup_policies": lambda key: exp.and_(exp.column("scope").eq(literal("topic")),
                                              exp.column("target").eq(literal(key))),
    # a consumer's position in the topic (source) would skip the entries of a topic created again under its name
    "seqdedup_consumers": lambda key: exp.or_(exp.column("topic").eq(literal(key)),
                                              exp.column("source").eq(literal(key))),
}


def drop_topic(adapter, ref, registered: bool) -> dict:
    """Delete the topic ``ref`` (a TopicRef; ``registered``: whether the registry holds it) and everything seqdedup
    keeps of it, through ``adapter``; what was removed. Run under the writer lock (``Session.drop_topic``)."""
    entries = None
    if adapter.columns(ref.table):
        entries = adapter.fetchall(exp.select(exp.Count(this=exp.Star())).from_(ref.table.copy()))[0][0]
    leftovers = {name: rows for name, rows in _rows(adapter, ref.key).items() if rows}
    if not registered and entries is None and not leftovers:
        raise TopicError(f"unknown topic {ref.key}; `seqdedup topic list` shows the topics")
    with adapter.transaction():
        adapter.storage.delete_rows(catalog_table("seqdedup_topics"), OWNED["seqdedup_topics"](ref.key))
        if entries is not None:
            adapter.storage.drop_topic_table(ref)
        for name in leftovers.keys() - {"seqdedup_topics"}:
            adapter.storage.delete_rows(catalog_table(name), OWNED[name](ref.key))
    return {"topic": ref.key, "registered": registered, "entries": entries, "catalog_rows": leftovers}


def _rows(adapter, key: str) -> dict[str, int]:
    """How many rows of each catalog table belong to the topic (whether their commit was published or not)."""
    counts = [exp.select(exp.alias_(literal(name), "t"), exp.alias_(exp.Count(this=exp.Star()), "n"))
              .from_(catalog_table(name)).where(condition(key)) for name, condition in OWNED.items()]
    union = counts[0]
    for count in counts[1:]:
        union = exp.union(union, count, distinct=False)
    return dict(adapter.fetchall(union))
