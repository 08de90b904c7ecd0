"""Running one ``INSERT ... WHERE is_not_dup(...)``: the steps of ``sql.plan`` on an engine, in one commit.

The runner takes the topic's state from memory (``Writer.state``), keeps the state following its policies (R10
status, R11 purge), runs the engine's plan (``EngineAdapter.PLAN``; a statement the window plan cannot settle in
one pass runs the exceptions plan), writes the run log (R5) and a snapshot when one is due (R8), publishes, and
moves the state in memory forward. Nothing here touches a row in Python: the per-producer outcome is the only
thing that crosses to Python, one row per producer.
"""
from __future__ import annotations

import datetime as dt
import logging
import random
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import replace

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from seqdedup.catalog.schema import STATEMENTS, arrow_schema, catalog_table
from seqdedup.catalog.state import SnapshotHeader
from seqdedup.errors import CommitConflict, SeqdedupError
from seqdedup.sql import rewrite

from ..failpoints import failpoint
from . import checks, compaction, leases, plans
from .compaction import Compaction
from .plans import Outcome, Unsettled
from .results import ProducerCount, StatementResult
from .topic_state import TopicState, marks_table
from .turns import AFTER, Turns
from .writer import Commit, Scratch, Writer


#: The trees of statements' steps, by (shape, step), kept from one statement to the next (at most KEPT of them).
_KEPT: OrderedDict[tuple, exp.Expression] = OrderedDict()
_KEPT_LOCK = threading.Lock()
KEPT = 512
#: Snapshots taken and what retention removes, one INFO line each, topic first.
_log = logging.getLogger("seqdedup.snapshots")

class Run:
    """One statement on one topic (``run`` below is the whole of it)."""

    def __init__(self, session, statement: rewrite.DedupInsert):
        self.session, self.statement = session, statement
        self.written = statement        # the statement as written (``statement`` may read its rows from a table)
        self.writer: Writer = session.writer
        self.adapter = session.adapter
        self.ref = session.ref(statement.target)
        self.shape: tuple = ()      # what the steps' SQL depends on besides the parameters (see ``kept``)
        self.scratch: Scratch | None = None
        self.bound: dict = {}       # parameters a plan's steps bind besides the statement's (the marks as a map)
        self.published: tuple[TopicState, int] | None = None     # the state and number of the commit it published

    def kept(self, step: str, build) -> exp.Expression:
        """The tree of a step, built once per shape of statement and kept: a producer sending one entry after
        another, or a stream's micro-batches, run the same SQL text each time (only the parameters change)."""
        # (the scratch tables made so far are in the key: a step reads them by name, and which were made depends on
        # the path the statement took, a policy's snapshot or a plan's retry)
        key = (self.shape, step, tuple(self.scratch.names) if self.scratch else ())
        with _KEPT_LOCK:
            tree = _KEPT.get(key)
            if tree is not None:
                _KEPT.move_to_end(key)
                return tree
        tree = build()
        tree.meta["kept"] = True
        with _KEPT_LOCK:
            _KEPT[key] = tree
            while len(_KEPT) > KEPT:
                _KEPT.popitem(last=False)
        return tree

    # --- the whole statement -----------------------------------------------------------------------------------

    def __call__(self) -> StatementResult:
        writer, adapter, ref = self.writer, self.adapter, self.ref
        session = self.session
        with writer:
            try:
                state = writer.state(ref)            # an unknown topic is named before anything else
                self.shape = (writer.tag, self.statement.source.sql(), tuple(state.topic.user_columns),
                              adapter.PARTITIONS)
                targets, values = checks.check(self, state)
                reading, statement_id = session.clock(), str(uuid.uuid4())
                now = state.stamp(reading)
                with writer.commit(ref, state.commit + 1) as commit, writer.scratch() as scratch:
                    self.scratch = scratch
                    before = state
                    state = follow_policies(self.session, state, commit, now, reading=reading)
                    self.shape += (scratch.depth, state.enabled, state.marks.num_rows > 0)
                    outcome = None
                    with adapter.parameters({"__sd_base": state.end, "__sd_commit": commit.number, "__sd_now": now}):
                        if adapter.PLAN == "window" or not state.enabled:
                            outcome = plans.window(self, state, commit, targets, values, scratch)
                        if outcome is None:
                            outcome = (plans.rows if adapter.PLAN == "rows" else plans.exceptions)(
                                self, state, commit, targets, values, scratch)
                        # R14: no entry under a name a live producer holds (its next ids would fall on them)
                        leases.refuse_held_names(adapter, state.topic, outcome.producers.column("producer").to_pylist())
                        failpoint("after_topic_rows")
                        self.run_log(outcome, statement_id, now, commit)
                    written = pc.sum(outcome.producers.column("written")).as_py() or 0
                    delta = _delta(outcome.producers, now) if state.enabled else None
                    if state.enabled:       # R6: pushed, not yet persisted, until the commit is published
                        writer.pushed.claim(ref.key, dict(zip(delta.column("producer").to_pylist(),
                                                              delta.column("sequence_id").to_pylist())))
                    failpoint("after_run_log")
                    state = state.after(commit=commit.number, end=outcome.end, delta=delta,
                                        since_snapshot=state.since_snapshot + written)
                    snapshot_id, state = self.snapshot_if_due(state, commit, now)
                    if not outcome.producers.num_rows and state.header is before.header:
                        commit.abandon()        # no entry, no snapshot: nothing to publish (no empty commit)
                        state = before
                if not commit.abandoned:
                    writer.keep(ref, state)
                    self.published = (state, commit.number)
            except Unsettled as failed:        # (told apart here, once the commit is rolled back)
                raise checks.failing(self, failed.error) from failed.error
            finally:
                writer.pushed.release(ref.key)
        return StatementResult(
            topic=ref.key, statement_id=statement_id, snapshot_id=snapshot_id, rounds=outcome.rounds,
            commit=None if commit.abandoned else commit.number,
            producers=[ProducerCount(r["producer"], r["written"], r["duplicates"], r["first_position"],
                                     r["last_position"], r["out_of_order"]) for r in outcome.producers.to_pylist()])

    def compact_if_due(self) -> Compaction | None:
        """The topic's compaction, after a published commit whose number is a multiple of its
        ``compact_every_commits`` (where several drivers write, exactly one of them publishes that number). The
        statement is published whatever happens here: a compaction that fails is logged, and finished by the
        next."""
        if self.published is None or not self.adapter.TRACKS_COMMITS:
            return None
        state, commit = self.published
        if not compaction.due(state.topic.applied, commit):
            return None
        try:
            with self.writer:
                return compaction.compact(self.adapter, self.ref)
        except SeqdedupError as error:
            logging.getLogger("seqdedup").warning("could not compact %s after commit %s (the next compaction "
                                                  "finishes it): %s", self.ref.key, commit, error)
            return None

    def run_log(self, outcome: Outcome, statement_id: str, now: dt.datetime, commit: Commit) -> None:
        """R5: the per-producer counts, in the run log, in the statement's commit (from the outcome in memory: on
        Spark, with no job of its own)."""
        producers, schema = outcome.producers, arrow_schema(STATEMENTS)
        once = {"statement_id": statement_id, "topic": self.ref.key, "executed_at": now, "commit_id": commit.number,
                "attempt": self.adapter.attempt(self.ref)}
        rows = pa.table([pa.repeat(pa.scalar(once[f.name], f.type), producers.num_rows) if f.name in once
                         else producers.column(f.name) for f in schema], schema=schema)
        self.adapter.append_rows(catalog_table("seqdedup_statements"), rows)

    def snapshot_if_due(self, state: TopicState, commit: Commit, now: dt.datetime) -> tuple[int | None, TopicState]:
        """R8: every snapshot_interval_entries entries, or snapshot_interval_seconds after the last snapshot."""
        policies = state.topic.applied
        since = state.since_snapshot
        seconds = (now - state.header.taken_at).total_seconds()
        due = since >= policies.snapshot_interval_entries or (
            policies.snapshot_interval_seconds > 0 and since > 0 and seconds >= policies.snapshot_interval_seconds)
        if not due:
            return None, state
        state = take_snapshot(self.session, state, commit, kind="snapshot" if state.enabled else "disabled", now=now,
                              empty=not state.enabled)
        return state.header.snapshot_id, state


def take_snapshot(session, state: TopicState, commit: Commit, *, kind: str, now: dt.datetime,
                  empty: bool = False) -> TopicState:
    """Record ``state`` (``empty``: no producers, R10) in a snapshot at its end, in the open commit; the state
    with that snapshot as its last.

    A ``snapshot`` or ``purge`` is an increment of the last snapshot (the producers that changed since, and a
    tombstone for each one purged: ``TopicState.increment``) unless a full one is due: every
    ``full_snapshot_interval`` snapshots, when the chain's increments would hold more rows than the state has
    producers (so a chain never holds much more than twice the state), or with ``max_producers_in_snapshot`` set
    (the cap is on a whole snapshot, as Pulsar's). A full snapshot makes the older ones unneeded: they are removed
    with the commit (``snapshot_retention_minutes`` after they were taken), and so is the run log older than
    ``run_log_retention_minutes``."""
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
    snapshot_id = session.catalog.write_snapshot(
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
    if full:
        commit.removes(lambda: prune(session, state.topic.ref, header, policies, now))
    return state.after(commit=commit.number, header=header, since_snapshot=0,
                       marks=marks_table() if empty else None)


def prune(session, ref, header: SnapshotHeader, policies, now: dt.datetime) -> None:
    """What a full snapshot makes unneeded: the snapshots before it, and the run log past its retention. Not where
    several drivers write one catalog without transactions (Spark on a shared metastore): removing rows rewrites a
    whole catalog table, and would drop the rows another driver appends meanwhile."""
    if not session.adapter.SUPPORTS_TRANSACTIONS and not session.adapter.exclusive:
        return
    failpoint("before_prune")
    snapshots_before = now - dt.timedelta(minutes=policies.snapshot_retention_minutes)
    session.catalog.prune_snapshots(ref, header, snapshots_before)
    failpoint("during_prune")
    retention = policies.run_log_retention_minutes
    pruned = session.writer.database.run_log_pruned      # (topic -> when this process last pruned its run log)
    # at most once per tenth of the retention: the run log then holds at most 1.1 times it, and an engine whose
    # delete rewrites the table (Spark) does not rewrite it at every full snapshot
    run_log = ""
    if retention is not None and now - pruned.get(ref.key, dt.datetime.min) >= dt.timedelta(minutes=retention / 10):
        run_log_before = now - dt.timedelta(minutes=retention)
        session.catalog.prune_run_log(ref, run_log_before)
        pruned[ref.key] = now
        run_log = f" and the run log before {run_log_before:%Y-%m-%d %H:%M:%S}"
    start = header.start_id
    kept = f" (but snapshot {start}, where the state started over)" if start is not None and \
        start < header.snapshot_id else ""
    _log.info("[%s] pruned the snapshots before snapshot %s taken by %s%s%s", ref.key, header.snapshot_id,
              f"{snapshots_before:%Y-%m-%d %H:%M:%S}", kept, run_log)


def follow_policies(session, state: TopicState, commit: Commit, now: dt.datetime, *,
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
        state = take_snapshot(session, state, commit, kind="enabled" if enabled else "disabled", now=now,
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
            state = take_snapshot(session, state.after(commit=commit.number, marks=kept), commit, kind="purge",
                                  now=now)
    return state


def _delta(producers: pa.Table, now: dt.datetime) -> pa.Table:
    """The marks a statement sets: each producer that wrote, at the highest id it wrote, written now."""
    wrote = producers.filter(pc.greater(producers.column("written"), 0))
    return marks_table(pa.table({"producer": wrote.column("producer"), "sequence_id": wrote.column("highest"),
                                 "last_publish_time": pa.repeat(pa.scalar(now, pa.timestamp("us")), wrote.num_rows)}))


#: How many times a statement decides again when another driver published its commit number first.
CONFLICT_RETRIES = 20


def run(session, tree: exp.Expression) -> StatementResult:
    """Run one ``INSERT ... WHERE is_not_dup(...)`` through ``session``. Where several drivers write a topic, the one
    whose commit number another took first decides again on the new state (optimistic, as Delta's commits); one that
    lost ``turns.AFTER`` race claims a turn, and the others wait for it; under steady contention a statement claims
    its turn before its first try (seqdedup/core/turns.py). The automatic compaction a commit may be due runs after the
    turn is given back."""
    tree = rewrite.expand_is_not_dup(tree, session.adapter.binary)
    turns = Turns.of(session.adapter, session.ref(tree.target).key)
    # under steady contention, a turn claimed before the first try (seqdedup/core/turns.py)
    mine = turns.claim("before its first try, other drivers contending") if turns and turns.contended() else None
    try:
        for retry in range(CONFLICT_RETRIES + 1):
            if turns is not None:
                mine = turns.wait(mine)
            try:
                statement = Run(session, tree)
                result = replace(statement(), conflicts=retry)
                break
            except CommitConflict:
                if retry == CONFLICT_RETRIES:
                    raise
                if turns is not None:
                    turns.saw_contention()
                    if mine is None and retry + 1 >= AFTER:
                        mine = turns.claim()
                time.sleep(random.uniform(0, 0.05 * 2 ** min(retry, 5)))    # apart, so that the racers do not meet
    finally:
        if mine is not None:
            turns.release(mine)
    # (after the turn is given back: the other drivers need not wait for a compaction, which they write through)
    return replace(result, compaction=statement.compact_if_due())
