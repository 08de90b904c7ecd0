"""Snapshots of a topic's state (R8), each in an open commit: the ones a statement takes when due, the ones its
policies call for (R10: an enable or a disable; R11: a purge of idle producers), the ones asked for (``seqdedup
snapshot``, ``recover --repair``), and the pruning of what a full one makes unneeded.

A snapshot is a full copy of the marks or an increment of the last one (``take_snapshot``); recovery reads the
chain back (``seqdedup.core.recovery``, ``seqdedup.core.topic_state``).
"""
from __future__ import annotations

import datetime as dt
import logging

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from seqdedup.catalog.catalog import TopicRef
from seqdedup.catalog.state import SnapshotHeader

from ..failpoints import failpoint
from .broker import Broker
from .topic_state import TopicState, marks_table
from .writer import Commit

#: Snapshots taken and what retention removes, one INFO line each, topic first.
_log = logging.getLogger("seqdedup.snapshots")


def take_snapshot(broker: Broker, state: TopicState, commit: Commit, *, kind: str, now: dt.datetime,
                  empty: bool = False) -> TopicState:
    """Record ``state`` (``empty``: no producers, R10) in a snapshot at its end, in the open commit; the state
    with that snapshot as its last.

    A ``snapshot`` or ``purge`` is an increment of the last snapshot (the producers that changed since, and a
    tombstone for each one purged: ``TopicState.increment``) unless a full one is due: every
    ``full_snapshot_interval`` snapshots, when the chain's increments would hold more rows than the state has
    producers (so a chain never holds much more than twice the state), or with ``max_producers_in_snapshot`` set
    (the cap is on a whole snapshot, as Pulsar's). A full snapshot makes the older ones unneeded: they are removed
    with the commit (``snapshot_retention_minutes`` after they were taken; on Spark, a small state's in batches:
    ``prune_due``), and so are the run log older than
    ``run_log_retention_minutes`` (and the holes recorded as long ago), and the ledger of dropped entries older than
    ``dropped_retention_minutes``."""
    policies, header = state.topic.applied, state.header
    increment = state.increment() if kind in ("snapshot", "purge") and not empty else None
    full = (increment is None or policies.max_producers_in_snapshot is not None
            or len(header.chain) >= policies.full_snapshot_interval
            or header.increment_rows + increment.num_rows > state.marks.num_rows)
    if full and kind == "snapshot" and header.purged:
        kind = "purge"      # a full snapshot after a purge: the state starts over from it (state.STARTS)
    elif not full and kind == "snapshot":
        kind = "increment"
    rows = None if empty else state.marks.table if full else increment
    cap = policies.max_producers_in_snapshot if full and kind in ("snapshot", "purge") else None
    snapshot_id = broker.catalog.write_snapshot(
        state.topic.ref, rows, header=header, position=state.end, kind=kind, now=now, commit=commit.number,
        max_producers=cap, parent=None if full else header.snapshot_id)
    failpoint("after_snapshot_rows")
    written = 0 if rows is None else rows.num_rows if cap is None else min(rows.num_rows, cap)
    shape = f"{kind}, full" if full else f"increment of {header.snapshot_id}" if kind == "increment" else \
        f"{kind}, increment of {header.snapshot_id}"
    _log.info("[%s] took snapshot %s (%s, %s rows) at position %s in commit %s", state.topic.ref.key, snapshot_id,
              shape, f"{written:,}", f"{state.end:,}", commit.number)
    header = header.extended(snapshot_id, state.end, kind, now, commit.number, rows=0 if full else increment.num_rows,
                             full=full)
    if full and prune_due(broker.adapter, state.header, snapshot_id, rows=state.marks.num_rows):
        commit.removes(lambda: prune(broker, state.topic.ref, header, policies, now))
    return state.after(commit=commit.number, header=header, since_snapshot=0,
                       marks=marks_table() if empty else None)


def prune_due(adapter, before: SnapshotHeader, snapshot_id: int, *, rows: int) -> bool:
    """Whether the full snapshot ``snapshot_id`` of a state of ``rows`` producers, taken after the chain
    ``before``, removes now what it makes unneeded. Where the engine's removal rewrites the whole table
    (``EngineAdapter.PRUNE_SPACING`` above 1), a small state's snapshots are removed in batches: at the first full
    snapshot of each run of that many ids, so the table holds at most about that many snapshots of it more than
    recovery needs. A state of ``PRUNE_AT_ROWS`` rows or more is pruned at every full snapshot, whose own rows
    cost about as much as the rewrite.

        >>> class Spark: PRUNE_SPACING, PRUNE_AT_ROWS = 16, 1_000
        >>> chain = SnapshotHeader(13, 0, "increment", None, 7, 14, chain=(12, 13), increment_rows=10)
        >>> [prune_due(Spark, chain, 14, rows=10), prune_due(Spark, chain, 16, rows=10),
        ...  prune_due(Spark, chain, 14, rows=1_000)]
        [False, True, True]
    """
    spacing = adapter.PRUNE_SPACING
    last_full = before.chain[0] if before.chain else 0
    return spacing <= 1 or rows >= adapter.PRUNE_AT_ROWS or snapshot_id // spacing > last_full // spacing


def prune(broker: Broker, ref, header: SnapshotHeader, policies, now: dt.datetime) -> None:
    """What a full snapshot makes unneeded: the snapshots before it, and the run log past its retention. Not where
    several drivers write one catalog without transactions (Spark on a shared metastore): removing rows rewrites a
    whole catalog table, and would drop the rows another driver appends meanwhile."""
    if not broker.adapter.SUPPORTS_TRANSACTIONS and not broker.adapter.exclusive:
        return
    failpoint("before_prune")
    snapshots_before = now - dt.timedelta(minutes=policies.snapshot_retention_minutes)
    broker.catalog.prune_snapshots(ref, header, snapshots_before)
    failpoint("during_prune")
    pruned = broker.writer.database.run_log_pruned      # (topic, log -> when this process last pruned it)
    run_log = ""
    for log, retention, remove in (("the run log", policies.run_log_retention_minutes, broker.catalog.prune_run_log),
                                   # (only where the topic keeps one: on Spark a removal rewrites the table)
                                   ("the ledger of dropped entries", policies.dropped_retention_minutes
                                    if policies.ledger else None,
                                    broker.catalog.prune_dropped),
                                   ("the holes", policies.run_log_retention_minutes
                                    if policies.gap_policy == "record" else None, broker.catalog.prune_gaps)):
        # at most once per tenth of the retention: the log then holds at most 1.1 times it, and an engine whose
        # delete rewrites the table (Spark) does not rewrite it at every full snapshot
        last = pruned.get((ref.key, log), dt.datetime.min)
        if retention is not None and now - last >= dt.timedelta(minutes=retention / 10):
            before = now - dt.timedelta(minutes=retention)
            remove(ref, before)
            pruned[(ref.key, log)] = now
            run_log += f" and {log} before {before:%Y-%m-%d %H:%M:%S}"
    start = header.start_id
    kept = f" (but snapshot {start}, where the state started over)" if start is not None and \
        start < header.snapshot_id else ""
    _log.info("[%s] pruned the snapshots before snapshot %s taken by %s%s%s", ref.key, header.snapshot_id,
              f"{snapshots_before:%Y-%m-%d %H:%M:%S}", kept, run_log)


def follow_policies(broker: Broker, state: TopicState, commit: Commit, now: dt.datetime, *,
                    purge: bool = True, reading: dt.datetime | None = None, by_log: bool = True) -> TopicState:
    """The state follows its policies, in the open commit stamped ``now``. R10: disabling forgets, enabling starts
    empty at the log's end. R11 (with ``purge``): producers idle longer than the timeout leave the state, and a
    snapshot records it.

    A statement (``by_log``) judges idleness by the earlier of the clock's ``reading`` and the topic's latest
    publish time before this commit: both must say a producer has been idle past the timeout, so that one
    statement's clock, stepped forward, expires nobody (and a stamp it left, once the clock is back, neither). A
    purge asked for (``seqdedup snapshot``, ``purge_inactive``) judges by the clock it is asked at."""
    enabled = state.topic.applied.deduplication_enabled
    if state.header.enabled != enabled:
        state = take_snapshot(broker, state, commit, kind="enabled" if enabled else "disabled", now=now,
                              empty=True)
    timeout = state.topic.applied.producer_inactivity_timeout      # None: never expire
    if purge and state.enabled and timeout is not None:
        judged = min(filter(None, (reading or now, state.published_at if by_log else None)))
        cutoff = judged - dt.timedelta(minutes=timeout)
        oldest = state.oldest_write()
        if oldest is not None and oldest < cutoff:
            marks = state.marks.table
            kept = marks.filter(pc.greater_equal(marks.column("last_publish_time"),
                                                 pa.scalar(cutoff, pa.timestamp("us"))))
            state = take_snapshot(broker, state.after(commit=commit.number, marks=kept), commit, kind="purge",
                                  now=now)
    return state.in_key_window()


def snapshot(broker: Broker, ref: TopicRef) -> int | None:
    """Take a snapshot of the topic ``ref`` now (and purge idle producers) when anything changed since the last
    one, in a commit of its own; its id (``Session.snapshot``)."""
    writer = broker.writer
    with writer:
        state = writer.state(ref)
        taken = None
        reading = broker.clock()
        now = state.stamp(reading)
        with writer.commit(ref, state.commit + 1) as commit:
            before = state.header
            state = follow_policies(broker, state, commit, now, reading=reading, by_log=False)
            if state.header is not before:
                taken = state.header.snapshot_id
            if state.enabled and state.since_snapshot:
                state = take_snapshot(broker, state, commit, kind="snapshot", now=now)
                taken = state.header.snapshot_id
        writer.keep(ref, state.after(commit=commit.number))
    return taken


def write_snapshot(broker: Broker, ref: TopicRef, marks: exp.Query, *, position: int, kind: str = "repair") -> int:
    """Write a snapshot of ``marks`` (a query of producer, sequence_id, last_publish_time) covering the entries of
    the topic ``ref`` up to ``position``, in a commit of its own; its id (``Session.write_snapshot``)."""
    writer = broker.writer
    with writer:
        state = writer.state(ref)
        try:
            with writer.commit(ref, state.commit + 1) as commit:
                return broker.catalog.write_snapshot(
                    ref, marks, header=state.header, position=position, kind=kind, now=broker.clock(),
                    commit=commit.number, max_producers=state.topic.applied.max_producers_in_snapshot,
                    id_parts=state.topic.id_parts)
        finally:
            writer.forget(ref)      # the state is the snapshot's from now on: recovered on next use


__all__ = ["take_snapshot", "prune", "follow_policies", "snapshot", "write_snapshot"]
