"""What a statement does with the entries it dropped, once its plan has written (R16, R18): their payloads judged
against those the topic holds for their ids (a conflict is counted, or refuses the statement), and their ledger rows
written, in the statement's commit. The plan gives them as one relation (``sql.plan.ledger``): set apart by the
row plan, staged apart by Spark's window plan, or else worked out as the statement's rows less those written."""
from __future__ import annotations

from sqlglot import exp

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
        columns = payloads.stored(run, state, "t")
        return plan.ledger.dropped_staged(staged, payloads.fingerprint(run, state, columns),
                                          payloads.entry(state, targets, columns), run.statement.id_parts)
    sent, written = payloads.sent(run, state, targets, values, "v"), payloads.stored(run, state, "w")
    return scratch.table("__sd_dropped", plan.ledger.dropped_by_difference(
        outcome.values, adapter.storage.staged_rows(ref), marks,
        payloads.fingerprint(run, state, sent), payloads.entry(state, targets, sent),
        payloads.fingerprint(run, state, written), payloads.entry(state, targets, written)))


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
        written, judged, found = adapter.storage.staged_rows(ref), False, {}
        late = run.statement.ordered or run.statement.batched
        if applied.payload_conflicts != "ignore":
            dropped, judged = run.scratch.table("__sd_judged", plan.conflicts.judged(
                dropped, written, ref.table, payloads.fingerprint(run, state, payloads.stored(run, state, "t")),
                window_start(applied.conflict_window_minutes), late, hinted=adapter.JOIN_HINTS)), True
            found = dict(adapter.fetchall(plan.conflicts.counts(dropped)))
            if found and applied.payload_conflicts == "refuse":
                producer, sequence_id, sent, kept = adapter.fetchall(plan.conflicts.first(dropped))[0]
                adapter.storage.discard_commit_rows(ref)
                raise PayloadConflictError(conflict_refusal(producer, sequence_id, kept, sent))
        if applied.ledger is not None:
            adapter.execute(plan.ledger.record(dropped, judged, written, late, NOW, COMMIT, run.statement.id_parts))
    except EngineError as error:
        raise Unsettled(error) from error
    return found
