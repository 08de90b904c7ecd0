"""A topic's figures (``Session.stats``, ``seqdedup stats``): what it holds, what its statements wrote and dropped
(from the run log, R5), what it keeps in the catalog, and the rows written around seqdedup."""
from __future__ import annotations

from sqlglot import exp

from seqdedup.catalog.catalog import TopicRef

from .broker import Broker
from .foreign import find as find_foreign


def stats(broker: Broker, ref: TopicRef) -> dict:
    """The figures of the topic ``ref`` (see ``Session.stats``), read as this thread reads the catalog."""
    with broker.adapter.storage.listed_once(ref):     # one listing of its partitions for the state and every read below
        state = broker.state(ref)
        catalog = broker.reads()
        executor = catalog.executor
        # (no ORDER BY: on Spark a sort is a job more, to sample the keys; the producers are sorted here)
        log = (exp.select("producer", exp.alias_(exp.func("sum", exp.column("written")), "written"),
                          exp.alias_(exp.func("sum", exp.column("duplicates")), "duplicates"),
                          exp.alias_(exp.func("coalesce", exp.func("sum", exp.column("out_of_order")),
                                              exp.convert(0)), "out_of_order"))
               .from_(catalog.run_log(ref).subquery("log")).group_by("producer"))
        # The three reads below depend on each other in nothing: side by side where the engine runs queries at once
        # (on Spark Connect each is a job, mostly waited for). Their queries are built here, from the listing this
        # thread holds.
        summed = executor.alongside(lambda: executor.fetchall(log))
        foreign = find_foreign(executor, ref, alongside=True)      # the entries seqdedup wrote, and the others
        size = catalog.size(ref)
        rows = sorted(summed.result(), key=lambda row: (row[0] is None, row[0]))
        foreign = foreign.result()
    header = state.header
    figures = {
        "topic": ref.key,
        "deduplication_enabled": state.topic.applied.deduplication_enabled,
        "entries": foreign.entries,
        "last_position": state.end,
        "last_snapshot": {"snapshot_id": header.snapshot_id, "position": header.position, "kind": header.kind,
                          "taken_at": header.taken_at.isoformat()},
        "entries_since_snapshot": state.since_snapshot,
        # what the topic keeps in the catalog: snapshot rows (every snapshot kept, failed commits' rows too),
        # the chain recovery reads (its full snapshot first), the run log's rows
        "catalog": {**size, "chain": list(header.chain), "changed_since_snapshot": state.changed},
        "written": sum(r[1] for r in rows),
        "duplicates": sum(r[2] for r in rows),
        "out_of_order": sum(r[3] for r in rows),
        "producers": {r[0]: {"written": r[1], "duplicates": r[2], "out_of_order": r[3]} for r in rows},
        # rows written around seqdedup, which it leaves out (seqdedup/core/foreign.py)
        "foreign_rows": foreign.rows,
    }
    if foreign.message:
        figures["foreign"] = foreign.message
    return figures


__all__ = ["stats"]
