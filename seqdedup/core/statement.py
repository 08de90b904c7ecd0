"""Running one ``INSERT ... WHERE is_not_dup(...)``: the steps of ``sql.plan`` on an engine, in one commit.

The runner takes the topic's state from memory (``Writer.state``), keeps the state following its policies (R10
status, R11 purge), runs the engine's plan (``EngineAdapter.PLAN``; a statement the window plan cannot settle in
one pass runs the exceptions plan), writes the run log (R5) and a snapshot when one is due (R8), publishes, and
moves the state in memory forward. Nothing here touches a row in Python: the per-producer outcome is the only
thing that crosses to Python, one row per producer.
"""
from __future__ import annotations

import datetime as dt
import functools
import logging
import random
import time
import uuid
from dataclasses import replace

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from seqdedup.catalog.schema import STATEMENTS, arrow_rows, catalog_table
from seqdedup.catalog.state import literal
from seqdedup.errors import CommitConflict, SeqdedupError
from seqdedup.kept import Kept
from seqdedup.sql import key_window, rewrite

from ..failpoints import failpoint
from . import checks, compaction, leases, payloads, plans
from .broker import Broker
from .compaction import Compaction
from .dropped import judge as judge_dropped
from .plans import Unsettled
from .results import ProducerCounts, StatementResult
from .snapshots import follow_policies, take_snapshot
from .topic_state import TopicState, marks_table
from .turns import AFTER, Turns
from .writer import Commit, Scratch, Writer


#: The most trees of statements' steps kept, and of statements split (``rewritten``).
KEPT = 512
#: The trees of statements' steps, by (shape, step), kept from one statement to the next.
_KEPT: Kept[exp.Expression] = Kept(KEPT)

class Run:
    """One statement on one topic (``run`` below is the whole of it), on ``broker``; ``dialect``: the one it was
    written in (its errors quote it so)."""

    def __init__(self, broker: Broker, statement: rewrite.DedupInsert, dialect: str):
        self.broker, self.statement, self.dialect = broker, statement, dialect
        self.written = statement        # the statement as written (``statement`` may read its rows from a table)
        self.writer: Writer = broker.writer
        self.adapter = broker.adapter
        self.ref = broker.ref(statement.target)
        self.shape: tuple = ()      # what the steps' SQL depends on besides the parameters (see ``kept``)
        self.scratch: Scratch | None = None
        self.bound: dict = {}       # parameters a plan's steps bind besides the statement's (the marks as a map)
        self.stamp: dict = {}       # the statement's own parameters: base position, commit, time, topic, id
        self.published: tuple[TopicState, int] | None = None     # the state and number of the commit it published

    def kept(self, step: str, build) -> exp.Expression:
        """The tree of a step, built once per shape of statement and kept: a producer sending one entry after
        another, or a stream's micro-batches, run the same SQL text each time (only the parameters change)."""
        # (the scratch tables made so far are in the key: a step reads them by name, and which were made depends on
        # the path the statement took, a policy's snapshot or a plan's retry)
        def made() -> exp.Expression:
            tree = build()
            tree.meta["kept"] = True
            return tree

        return _KEPT.made((self.shape, step, tuple(self.scratch.names) if self.scratch else ()), made)

    # --- the whole statement -----------------------------------------------------------------------------------

    def __call__(self) -> StatementResult:
        writer, adapter, ref = self.writer, self.adapter, self.ref
        with writer, adapter.holding():
            try:
                state = writer.state(ref)            # an unknown topic is named before anything else
                checks.id_shape(self, state.topic)
                self.shape = (writer.tag, self.statement.text, tuple(state.topic.user_columns),
                              adapter.PARTITIONS, state.topic.id_parts)
                targets, values = checks.check(self, state)
                reading, statement_id = self.broker.clock(), str(uuid.uuid4())
                now = state.stamp(reading)
                with writer.commit(ref, state.commit + 1) as commit, writer.scratch() as scratch:
                    self.scratch = scratch
                    before = state
                    state = follow_policies(self.broker, state, commit, now, reading=reading)
                    # (and the topic's policies: a step whose SQL depends on one, the ledger, payload conflicts,
                    # the key window, is kept per value; a change of policy between two statements of one shape
                    # once reused the other policy's SQL, 3af6488)
                    self.shape += (scratch.depth, state.enabled, state.marks.num_rows > 0,
                                   tuple(vars(state.topic.applied).values()))
                    outcome, conflicts = None, {}
                    self.stamp = {"__sd_base": state.end, "__sd_commit": commit.number, "__sd_now": now,
                                  "__sd_topic": ref.key, "__sd_statement_id": statement_id}
                    with adapter.parameters(self.stamp):
                        if adapter.PLAN == "window" or not state.enabled:
                            outcome = plans.window(self, state, commit, targets, values, scratch)
                        if outcome is None:
                            outcome = (plans.rows if adapter.PLAN == "rows" else plans.exceptions)(
                                self, state, commit, targets, values, scratch)
                        # (a composite id has no next id, so no hole: R19)
                        holes = state.enabled and state.topic.applied.gap_policy != "allow" and \
                            state.topic.id_parts is None
                        # R18, R16: only where the statement dropped an entry (most small statements drop none)
                        judged = payloads.judged(state) and plans.dropped_any(outcome.producers)
                        differ = judged and plans.by_difference(state, outcome)
                        marks = plans.began_marks(state, outcome, scratch) if holes or differ else None
                        if holes:       # R17 (a statement that leaves a hole is refused for it first)
                            plans.judge_holes(self, state, marks)
                        if judged:
                            conflicts = judge_dropped(self, state, outcome, targets, values, marks)
                        keyed = self.statement.keyed    # (is_new: a key's digest is no name a producer holds)
                        if not keyed:   # R14: no entry under a name a live producer holds (its next ids would fall on them)
                            leases.refuse_held_names(adapter, state.topic, outcome.producers.column("producer"))
                        failpoint("after_topic_rows")
                        # (a statement's keys counted together: sorting or listing millions of keys costs seconds)
                        reported = plans.keys_together(outcome.producers) if keyed else \
                            outcome.producers.sort_by("producer")
                        if keyed:
                            conflicts = {None: sum(conflicts.values())}
                        reported = reported.append_column("payload_conflicts", conflicts_column(
                            reported.column("producer"), conflicts))
                        if state.topic.applied.dropped_entries != "nothing":     # R16: keeps no counts either
                            self.run_log(reported, statement_id, now, commit)
                    written = pc.sum(outcome.producers.column("written")).as_py() or 0
                    delta = _delta(outcome.producers, now, outcome.keys, keyed) if state.enabled else None
                    if state.enabled and not keyed:     # R6: pushed, not yet persisted, until the commit is published
                        writer.pushed.claim(ref.key, dict(zip(delta.column("producer").to_pylist(),
                                                              delta.column("sequence_id").to_pylist())))
                    failpoint("after_run_log")
                    state = state.after(commit=commit.number, end=outcome.end, delta=delta,
                                        since_snapshot=state.since_snapshot + written, unmarked=keyed)
                    if keyed:       # (a window in entries holds its last keys: snapshotted so, R20)
                        state = state.in_key_window()
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
            ledger=functools.partial(ledger_rows, self.adapter, self.broker.catalog, self.ref),
            producers=ProducerCounts(reported))

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

    def run_log(self, producers: pa.Table, statement_id: str, now: dt.datetime, commit: Commit) -> None:
        """R5: the per-producer counts (``OUTCOME``, with each producer's ``payload_conflicts``: R18), in the run log,
        in the statement's commit (from the outcome in memory: on Spark, with no job of its own)."""
        if pa.types.is_string(producers.schema.field("highest").type):     # (a composite id is no BIGINT: R19)
            producers = producers.set_column(producers.schema.get_field_index("highest"), "highest",
                                             pa.nulls(producers.num_rows, pa.int64()))
        once = {"statement_id": statement_id, "topic": self.ref.key, "executed_at": now, "commit_id": commit.number,
                "attempt": self.adapter.storage.attempt(self.ref)}
        rows = arrow_rows(STATEMENTS, {name: producers.column(name) for name in producers.column_names}, once,
                          producers.num_rows)
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
        state = take_snapshot(self.broker, state, commit, kind="snapshot" if state.enabled else "disabled", now=now,
                              empty=not state.enabled)
        return state.header.snapshot_id, state


def conflicts_column(producers: pa.ChunkedArray, conflicts: dict[str | None, int]) -> pa.Array:
    """Each of ``producers``' payload conflicts (R18), 0 for a producer ``conflicts`` does not name: looked up by
    Arrow, not per producer in Python (a statement may have a million producers, and few with conflicts).

    Example:
        >>> conflicts_column(pa.chunked_array([["a", "b", None]]), {"b": 2, None: 1}).to_pylist()
        [0, 2, 1]
    """
    if not conflicts:       # (most statements: none dropped, or conflicts ignored)
        return pa.nulls(len(producers), pa.int64()).fill_null(0)
    named = pa.array(list(conflicts), producers.type)
    found = pc.index_in(producers, value_set=named)
    return pc.fill_null(pc.take(pa.array(list(conflicts.values()), pa.int64()), found), 0).combine_chunks()


def ledger_rows(adapter, catalog, ref, statement_id: str) -> pa.Table:
    """The ledger rows of statement ``statement_id`` of topic ``ref`` (R16): what ``StatementResult.dropped``
    reads."""
    ledger = catalog.dropped(ref).where(exp.column("statement_id").eq(literal(statement_id)))
    return adapter.fetch_arrow(ledger.order_by("producer", "sequence_id", "composite_id", "reason"))


def _delta(producers: pa.Table, now: dt.datetime, keys: pa.Table | None = None, keyed: bool = False) -> pa.Table:
    """The marks a statement sets: each producer that wrote, at the highest id it wrote, written now. A key (R20,
    ``keyed``) is marked at the position it was written at, as its entry's highest id says (``insert_rows``): the
    ``keys`` written, read back where the plan counted a statement's keys together (``plans.keyed_together``)."""
    wrote = producers.filter(pc.greater(producers.column("written"), 0))
    names, ids = wrote.column("producer"), wrote.column("last_position" if keyed else "highest")
    if keys is not None:
        names, ids = keys.column("producer"), keys.column("sequence_id")
    return marks_table(pa.table({"producer": names, "sequence_id": ids,
                                 "last_publish_time": pa.repeat(pa.scalar(now, pa.timestamp("us")), len(names))}))


#: How many times a statement decides again when another driver published its commit number first.
CONFLICT_RETRIES = 20


def rewritten(adapter, tree: exp.Expression) -> rewrite.DedupInsert:
    """The statement split for the plan (``rewrite.expand_is_not_dup``), kept per adapter by the statement's text
    (at most ``KEPT`` of them): a producer sending one entry after another, or a stream's micro-batches, run the same
    statement each time, and splitting it again took 1.2 ms of a 17 ms send. Its trees are only read, as the kept
    steps' are (``Run.kept``). The key holds where the text placed each node too, which errors cite
    (``seqdedup.errors.at``): the same statement written across other lines is split anew."""
    kept = adapter.__dict__.setdefault("_rewritten", Kept(KEPT))
    # (``_meta``, not ``meta``: reading the property gives every node a dict of its own)
    key = (tree.sql(), tuple((m["line"], m["col"]) for m in (getattr(n, "_meta", None) for n in tree.walk())
                             if m and "line" in m))
    return kept.made(key, lambda: rewrite.expand_is_not_dup(key_window.expand_is_new(tree), adapter.binary))


def run(broker: Broker, tree: exp.Expression, dialect: str) -> StatementResult:
    """Run one ``INSERT ... WHERE is_not_dup(...)``, written in ``dialect``, on ``broker``. Where several drivers
    write a topic, the one whose commit number another took first decides again on the new state (optimistic, as
    Delta's commits); one that lost ``turns.AFTER`` race claims a turn, and the others wait for it; under steady
    contention a statement claims its turn before its first try (seqdedup/core/turns.py). The automatic compaction a
    commit may be due runs after the turn is given back."""
    tree = rewritten(broker.adapter, tree)
    turns = Turns.of(broker.adapter, broker.ref(tree.target).key)
    # under steady contention, a turn claimed before the first try (seqdedup/core/turns.py)
    mine = turns.claim("before its first try, other drivers contending") if turns and turns.contended() else None
    try:
        for retry in range(CONFLICT_RETRIES + 1):
            if turns is not None:
                mine = turns.wait(mine)
            try:
                statement = Run(broker, tree, dialect)
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
