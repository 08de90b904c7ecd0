"""What a statement does with the entries it dropped, once its plan has written (R16, R18): their payloads judged
against those the topic holds for their ids (a conflict is counted, or refuses the statement), and their ledger rows
written, in the statement's commit. The plan gives them as one relation (``sql.plan.ledger``): set apart by the
row plan, staged apart by Spark's window plan, or else worked out as the statement's rows less those written."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from seqdedup.catalog.schema import DROPPED, arrow_rows, catalog_table
from seqdedup.errors import EngineError, PayloadConflictError
from seqdedup.sql import plan
from seqdedup.udfs.reference import conflict_refusal

from . import payloads
from .plans import COMMIT, NOW, Outcome, Unsettled
from .topic_state import TopicState


def _relation(run, state: TopicState, outcome: Outcome, targets: list[str], values: list[str],
              marks: exp.Expression | None) -> exp.Expression | None:
    """The statement's dropped entries (``sql.plan.conflicts.DROPPED_COLUMNS``), or None where it dropped none."""
    adapter, ref, scratch = run.adapter, run.ref, run.scratch
    if outcome.dropped is not None:         # (set apart by the plan)
        return outcome.dropped
    if outcome.apart:                        # (staged apart by its write)
        staged = adapter.storage.dropped_rows(ref)
        if staged is None:
            return None
        columns, keyed = payloads.stored(run, state, "t"), run.statement.keyed
        # (where ``held``, the write staged the entries' own fingerprints and their columns are not read; not a
        # key's own, ``window.split_write``: a statement of keys' columns are read for it)
        own = None if outcome.held and not keyed else payloads.fingerprint(run, state, columns)
        return plan.ledger.dropped_staged(staged, own, payloads.entry(state, targets, columns),
                                          run.statement.id_parts, held=outcome.held, keyed=keyed)
    sent, written = payloads.sent(run, state, targets, values, "v"), payloads.stored(run, state, "w")
    return scratch.table("__sd_dropped", plan.ledger.dropped_by_difference(
        outcome.values, adapter.storage.staged_rows(ref), marks,
        payloads.fingerprint(run, state, sent), payloads.entry(state, targets, sent),
        payloads.fingerprint(run, state, written), payloads.entry(state, targets, written), run.statement.id_parts))


def _marks_range(run, outcome: Outcome) -> tuple[int, int] | None:
    """The least and greatest mark of a statement of keys' dropped entries (a key's mark is a position), read by
    Arrow from the files its write staged them in; None where it cannot (not staged apart, not on this disk: DuckDB,
    a Spark Connect client) or none has a mark."""
    if not outcome.apart:
        return None
    *_, mark = plan.ledger.staged_columns()      # (a key's id is an integer, 0: never a composite id)
    staged = run.adapter.storage.dropped_files(run.ref, [mark])
    if staged is None:
        return None
    least, greatest = (value.as_py() for value in pc.min_max(staged.column(0)).values())
    return None if least is None else (least, greatest)


def _in_files(run, state: TopicState, outcome: Outcome, dropped: exp.Expression, judged: bool,
              late: bool) -> pa.Table | None:
    """The dropped entries (``DROPPED_COLUMNS``; judged: with ``conflict``) read by Arrow from files, with no query,
    where every reason follows from an entry's own row (not ``late``) and the engine left them in files this
    process reaches (Spark on the local disk): the judged table's, or the staged entries' where the ledger keeps
    their keys only. None elsewhere: the engine reads them. Spark then runs no job for the conflicts' counts or the
    ledger: its file is appended, as the run log's. (A late entry is one whose id the statement did not write: told
    by a semi-join to the 4M keys a large statement wrote, Arrow takes 0.5 s, about what Spark's job does.)"""
    if late:
        return None
    if judged:
        rows = run.adapter.temp_table_files(dropped)
        return None if rows is None else _with_conflicts(rows)
    if not outcome.apart or not payloads.keys_only(state):     # (the ledger's rows need the entries' columns)
        return None
    columns = plan.ledger.staged_columns(run.statement.id_parts)
    staged = run.adapter.storage.dropped_files(run.ref, list(dict.fromkeys(columns)))
    if staged is None:
        return None
    return pa.table(dict(zip(plan.conflicts.DROPPED_COLUMNS, map(staged.column, columns))))


def _with_conflicts(rows: pa.Table) -> pa.Table:
    """Judged rows (``conflicts.judged``'s columns) with ``conflict``: as ``conflicts.conflicting``, nothing held
    within the window is no conflict."""
    held, fingerprint = rows.column(plan.conflicts.HELD), rows.column("fingerprint")
    return rows.append_column("conflict", pc.fill_null(pc.and_(pc.is_valid(held), pc.not_equal(held, fingerprint)),
                                                       False))


def _judged_in_files(run, state: TopicState, outcome: Outcome, dropped: exp.Expression,
                     topic_fingerprint: exp.Expression, since: exp.Expression | None, whole: bool) -> pa.Table | None:
    """Where the write staged each dropped entry's fingerprint and its written copy's (``Outcome.held``: read as
    ``plan.ledger.dropped_staged`` reads them) in files this process reaches, and the ledger keeps no entry's
    columns: the dropped entries judged, as ``_in_files`` gives a judged table's rows. One query asks the topic what
    it holds for the ids at or below their marks (``conflicts.held_by_topic``); the entries are joined to that by
    Arrow, so no judged table of every dropped entry is written and read back (at 5M rows on Spark the step took
    about 0.2 s less, medians of seven runs each way: the topic's query is most of what is left). None
    elsewhere, and for a statement of keys, whose own fingerprints are not staged (``window.split_write``)."""
    if not outcome.held or state.topic.applied.ledger == "rows" or run.statement.keyed:
        return None
    staged = run.adapter.storage.dropped_files(run.ref, ["_producer", "_sequence_id", "_position",
                                                         "_highest_sequence_id"])
    if staged is None:
        return None
    producer, sequence_id, written = (staged.column(c) for c in ("_producer", "_sequence_id", "_highest_sequence_id"))

    def hashed(key_producer: exp.Expression, key_id: exp.Expression) -> exp.Expression:
        return run.adapter.fingerprint([(key_producer, "string"),
                                        (key_id, "string" if run.statement.id_parts else "bigint")])

    # (the topic is asked for the ids nothing was written with, at or below their marks, by their keys' hashes: the
    # join below on the keys themselves leaves out an id that only shares a hash. ``at_most``, one row per such id,
    # bounds the answer's size for the heap; an id that only shares a hash, about once in 2^64 / (ids x topic rows),
    # would add a row beyond it)
    topic = run.adapter.fetch_bulk(plan.conflicts.held_by_topic(dropped, run.ref.table, topic_fingerprint, since,
                                                                late=False, hinted=run.adapter.JOIN_HINTS,
                                                                whole=whole, hashed=hashed),
                                   at_most=written.null_count)
    rows = pa.table({"producer": producer, "sequence_id": sequence_id, "highest_sequence_id": sequence_id,
                     # (the mark's stand-in: at or below it where nothing was written with the id)
                     "mark": pc.if_else(pc.is_null(written), sequence_id, pa.nulls(len(written), sequence_id.type)),
                     # (a composite id's column holds the fingerprint as its text: ``window.split_write``)
                     "fingerprint": staged.column("_position"), plan.conflicts.WRITTEN: written.cast(pa.int64())})
    topic = pa.table({"producer": topic.column(0).cast(producer.type),
                      "sequence_id": topic.column(1).cast(sequence_id.type),
                      "topic_fingerprint": topic.column(2).cast(pa.int64())})
    rows = rows.join(topic, keys=["producer", "sequence_id"], join_type="left outer", use_threads=False)
    held = pc.coalesce(rows.column(plan.conflicts.WRITTEN), rows.column("topic_fingerprint"))
    return _with_conflicts(rows.drop_columns(["topic_fingerprint"]).append_column(plan.conflicts.HELD, held))


def _first_conflict(rows: pa.Table) -> tuple:
    """``plan.conflicts.first`` of judged rows with ``conflict``."""
    found = rows.filter(rows.column("conflict")).sort_by(
        [("producer", "ascending"), ("sequence_id", "ascending"), ("fingerprint", "ascending")])
    return tuple(found.column(c)[0].as_py() for c in ("producer", "sequence_id", "fingerprint", plan.conflicts.HELD))


def _conflict_counts(rows: pa.Table) -> dict[str, int]:
    """``plan.conflicts.counts`` of ``_in_files``' judged rows."""
    found = rows.filter(rows.column("conflict")).group_by("producer").aggregate(
        [("producer", "count", pc.CountOptions(mode="all"))])
    return dict(zip(found.column("producer").to_pylist(), found.column("producer_count").to_pylist()))


def _ledger_rows(run, rows: pa.Table) -> pa.Table:
    """``plan.ledger.record``'s rows of ``_in_files``' entries, each reason from the entry's row alone."""
    id_parts, stamp = run.statement.id_parts, run.stamp
    sequence_id, mark = rows.column("sequence_id"), rows.column("mark")
    # (no mark: a producer new to the topic, never a retry)
    retry = pc.fill_null(pc.less_equal(sequence_id, mark), False)
    straddles = pc.fill_null(pc.greater(rows.column("highest_sequence_id"), mark), False)
    reason = pc.if_else(retry, pc.if_else(straddles, "straddles_mark", "retry"), "repeat")
    if "conflict" in rows.column_names:
        reason = pc.if_else(rows.column("conflict"), "conflict", reason)
    once = {"topic": stamp["__sd_topic"], "commit_id": stamp["__sd_commit"],
            "statement_id": stamp["__sd_statement_id"], "dropped_at": stamp["__sd_now"],
            "attempt": run.adapter.storage.attempt(run.ref)}
    columns = {"producer": rows.column("producer"), "reason": reason}
    if "entry" in rows.column_names:
        columns["entry"] = rows.column("entry")
    if id_parts is None:
        columns.update(sequence_id=sequence_id, highest_sequence_id=rows.column("highest_sequence_id"))
    else:
        columns.update(composite_id=sequence_id)
    return arrow_rows(DROPPED, columns, once, rows.num_rows)


def window_start(minutes: int | None) -> exp.Expression | None:
    """The earliest publish time of an entry a dropped one is compared with (``conflict_window_minutes``; None:
    all)."""
    if minutes is None:
        return None
    return exp.Sub(this=NOW.copy(), expression=exp.Interval(this=exp.Literal.string(str(minutes)),
                                                            unit=exp.Var(this="MINUTE")))


def judge(run, state: TopicState, outcome: Outcome, targets: list[str], values: list[str],
          marks: exp.Expression | None) -> dict[str, int]:
    """R18 and R16 for the statement's dropped entries: per producer, its entries whose payload conflicts with the
    one the topic holds for their ids (none where the topic ignores conflicts); a ``PayloadConflictError`` where it
    refuses them, its commit's rows discarded; then the ledger rows, where the topic keeps them. ``marks``: the
    producers' when the statement began, for a plan that works the dropped entries out by difference."""
    adapter, ref, applied = run.adapter, run.ref, state.topic.applied
    try:
        dropped = _relation(run, state, outcome, targets, values, marks)
        if dropped is None:
            return {}
        written, found = adapter.storage.staged_rows(ref), {}
        late = run.statement.ordered or run.statement.batched
        judged, rows = applied.payload_conflicts != "ignore", None
        if judged:
            topic_fingerprint = payloads.fingerprint(run, state, payloads.stored(run, state, "t"))
            since, whole = window_start(applied.conflict_window_minutes), adapter.reads_whole(ref.table)
            rows = _judged_in_files(run, state, outcome, dropped, topic_fingerprint, since, whole)
            if rows is None:
                # (a key's mark is its position: its topic entry is found there)
                by_position = run.statement.keyed
                # (where the write carried the fingerprints of what it wrote, ``Outcome.held``, it is not read again)
                dropped = run.scratch.table("__sd_judged", plan.conflicts.judged(
                    dropped, None if outcome.held else written, ref.table, topic_fingerprint, since, late,
                    hinted=adapter.JOIN_HINTS, whole=whole, keys=by_position,
                    positions=_marks_range(run, outcome) if by_position else None))
        if rows is None:
            rows = _in_files(run, state, outcome, dropped, judged, late)
        if judged:
            found = _conflict_counts(rows) if rows is not None else \
                dict(adapter.fetchall(plan.conflicts.counts(dropped)))
            if found and applied.payload_conflicts == "refuse":
                producer, sequence_id, sent, kept = _first_conflict(rows) if rows is not None else \
                    adapter.fetchall(plan.conflicts.first(dropped))[0]
                adapter.storage.discard_commit_rows(ref)
                raise PayloadConflictError(conflict_refusal(producer, sequence_id, kept, sent))
        if applied.ledger is not None and rows is not None:
            adapter.append_rows(catalog_table("seqdedup_dropped"), _ledger_rows(run, rows))
        elif applied.ledger is not None:
            adapter.execute(plan.ledger.record(dropped, judged, written, late, NOW, COMMIT, run.statement.id_parts))
    except EngineError as error:
        raise Unsettled(error) from error
    return found
