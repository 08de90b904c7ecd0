"""Running a statement's plan on the engine: the window plan (one pass), the exceptions plan (the decision on the
keys, then one filtered write) and the row plan (DuckDB's), each step a tree from ``sql.plan`` kept per statement
shape (``Run.kept``), the statement's values bound as parameters. Each returns the ``Outcome``: one row per
producer, the only thing that crosses to Python."""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from seqdedup.errors import EngineError
from seqdedup.sql import plan

from .checks import described, refuse_invalid
from .topic_state import TopicState, unmarked
from .writer import Commit, Scratch

#: The values that differ from one statement to the next are parameters (``EngineAdapter.parameters``), so that a
#: statement's SQL is built and generated once per shape: the base position, the commit, the time, the id.
BASE, COMMIT = (exp.Placeholder(this=name) for name in ("__sd_base", "__sd_commit"))
NOW = exp.cast(exp.Placeholder(this="__sd_now"), "timestamp")
#: The marks as a map, where a plan takes them so (``EngineAdapter.MARKS_AS_MAP``).
MARKS = exp.Placeholder(this="__sd_marks")
#: Why a statement whose source gave other rows on a second read is refused.
CHANGED = ("the statement's SELECT gave other entries when read a second time (a non-deterministic expression such as "
           "rand(), a sample, or a source that changed during the statement): seqdedup cannot decide entries that "
           "change under it. Materialize the SELECT into a table first. Nothing was written")
#: The outcome's columns as Arrow reads them (``sql.plan.OUTCOME``).
OUTCOME = pa.schema([("producer", pa.string()), ("sent", pa.int64()), ("written", pa.int64()),
                     ("duplicates", pa.int64()), ("first_position", pa.int64()), ("last_position", pa.int64()),
                     ("highest", pa.int64()), ("out_of_order", pa.int64())])


class Unsettled(EngineError):
    """A plan's query failed while computing the entries: whose expression failed is told once the commit is rolled
    back (DuckDB reads nothing more in a transaction an error aborted)."""

    def __init__(self, error: EngineError):
        super().__init__(str(error))
        self.error = error


@dataclass
class Outcome:
    """What a plan did: per producer (``OUTCOME``), the log's new end, and the decision rounds it took."""

    producers: pa.Table
    end: int
    rounds: int
    table: exp.Table | None = None      # the outcome as an engine table, when the plan made one


def window(run, state: TopicState, commit: Commit, targets: list[str], values: list[str],
           scratch: Scratch) -> Outcome | None:
    """The window plan (see sql/plan/window.py): one pass. None when a batch entry straddles (undecided)."""
    adapter, statement = run.adapter, run.statement
    checked = state.enabled
    marks, seen = marks_relation(run, state, scratch, checked, inline=True)
    late = checked and statement.ordered     # (unordered, arrival is id order: nothing comes late)
    gather = adapter.fits_one_task(described(run))     # (its size: that of the values, a little more)
    # (a small statement's cost is its fixed costs, a large one's is per row: see EngineAdapter.constant)
    base = adapter.constant(BASE) if gather else BASE
    refuse = plan.refusal(adapter.RAISE_ERROR) if adapter.RAISE_ERROR else None

    def insert_for(rows: exp.Expression) -> exp.Insert:
        return plan.insert_rows(run.ref.table, targets, values, rows, NOW, COMMIT)

    def decide_and_write(source: exp.Select):
        decided = run.kept(f"window {source is statement.values} {gather} {marks is MARKS}", lambda:
                            plan.window_decisions(source, marks, statement.order, base=base,
                                                  partitions=adapter.PARTITIONS, number=adapter.row_number(),
                                                  checked=checked, late=late, seen=seen, gather=gather,
                                                  refuse=refuse))
        return adapter.write_decided(run.ref, decided, plan.ACCEPTED, insert_for, plan.window_metrics(seen),
                                     plan.window_outcome(late=late), plan.LAST, proceed=settled,
                                     name=scratch.name("__sd_decided"))

    written = None
    try:
        with adapter.parameters(run.bound):
            written = decide_and_write(statement.values)
    except EngineError as error:
        adapter.discard_commit_rows(run.ref)
        if plan.REFUSED not in str(error):
            # Spark 4.3 fails to run some plans whole (a window over a cross join with a UNION ALL: "cannot
            # assign instance of DefaultSerializationProxy"): the statement's rows are read once into a scratch
            # table and decided from there; an error of the user's own expressions fails again, here, and is
            # reported.
            try:
                rows = scratch.table("__sd_values", statement.values)
                with adapter.parameters(run.bound):
                    written = decide_and_write(exp.select("*").from_(rows))
            except EngineError as again:
                adapter.discard_commit_rows(run.ref)
                if plan.REFUSED not in str(again):
                    raise Unsettled(again) from again
    if written is None:     # the query met an invalid entry (``refuse``): counted and named here
        refuse_invalid(run)
    metrics = written.metrics
    if metrics.get("unseen"):
        adapter.discard_commit_rows(run.ref)
        raise EngineError(CHANGED)
    if metrics["invalid"]:
        adapter.discard_commit_rows(run.ref)
        refuse_invalid(run)
    if metrics["undecided"]:
        adapter.discard_commit_rows(run.ref)
        return None
    producers = outcome_table(written.outcome)
    end = max(state.end, metrics["end"] or 0)
    return Outcome(producers, end, 1)


def marks_relation(run, state: TopicState, scratch: Scratch, checked: bool, *,
          inline: bool = False) -> tuple[exp.Expression | None, bool]:
    """The marks a plan joins as a relation (None: no producer has one), and whether they are only those of
    the producers a first read of the statement carried (``seen``: a semi-join of a large state; then a
    relation even when empty, so that an entry of a producer that read did not carry is caught). ``inline``
    (the window plan): a few marks come as a map, bound to the parameter ``__sd_marks`` (``MARKS_AS_MAP``)."""
    adapter = run.adapter
    above = adapter.SEMI_JOIN_ABOVE
    seen = checked and above is not None and state.marks.num_rows > above
    if not seen and not (checked and state.marks.num_rows):
        return None, False
    table = carried_marks(run, state) if seen else state.marks.table
    if inline and 0 < table.num_rows <= (adapter.MARKS_AS_MAP or 0):
        run.bound[MARKS.name] = adapter.marks_map(table)
        return MARKS, seen
    return scratch.relation("__sd_marks", table), seen


def carried_marks(run, state: TopicState) -> pa.Table:
    """The marks of the producers the statement carries, and a row with no mark for each that has none: a
    semi-join of a large state, so that the engine gets the few marks the statement needs."""
    carried = run.adapter.fetch_arrow(run.kept("carried", lambda: plan.carried_producers(run.statement.keys)))
    names = carried.column(0).cast(pa.string())
    found = state.marks.lookup(names)
    return pa.concat_tables([found, unmarked(pc.filter(names, pc.invert(
        pc.is_in(names, value_set=found.column("producer")))))])


def exceptions(run, state: TopicState, commit: Commit, targets: list[str], values: list[str],
               scratch: Scratch) -> Outcome:
    """The exceptions plan (see sql/plan/exceptions.py): the statement's rows read once, the decision on their keys,
    then one filtered write.

    Every later step reads the rows of that one reading: a SELECT read again may give other rows (a sample,
    ``rand()`` or a Python function among its expressions, a file replaced meanwhile), and a write decided on one
    reading and made from another could write an id twice."""
    adapter, kept = run.adapter, run.kept
    try:
        rows = scratch.table("__sd_values", run.statement.values)
    except EngineError as error:
        raise Unsettled(error) from error
    statement = run.statement = run.statement.over(rows)
    keys = statement.keys
    marks, seen = marks_relation(run, state, scratch, state.enabled)
    producers = scratch.name("__sd_producers")
    try:
        producers = adapter.create_temp_table(producers, kept(f"producers {seen}", lambda: plan.producers(
            keys, marks, seen=seen)))
    except EngineError as error:
        raise Unsettled(error) from error
    sums = ("__sd_invalid", "__sd_batches", "__sd_room") + ((plan.UNSEEN,) if seen else ())
    invalid, batches, room, *unseen, sparse = adapter.fetchall(kept(f"sums {seen}", lambda: exp.select(
        *[exp.func("coalesce", exp.Sum(this=exp.column(c)), exp.convert(0)) for c in sums],
        exp.func("count_if", exp.column("__sd_sparse"))).from_(producers.copy())))[0]
    if any(unseen):
        raise EngineError(CHANGED)
    if invalid:
        refuse_invalid(run)
    rounds = 1
    if not batches and not statement.ordered:
        exceptions = adapter.create_temp_table(scratch.name("__sd_exceptions"), kept(
            "repeats", lambda: plan.repeats(keys, producers)))
        counts = kept("repeat counts", lambda: plan.repeat_counts(keys, producers, exceptions))
    else:
        candidates = adapter.create_temp_table(scratch.name("__sd_candidates"), kept(
            "candidates", lambda: plan.candidates(keys, producers)))
        decisions, rounds = decide(run, candidates, bool(batches), scratch)
        exceptions = adapter.create_temp_table(scratch.name("__sd_exceptions"), kept(
            f"decided exceptions {rounds}", lambda: plan.decided_exceptions(decisions, statement.key_columns)))
        counts = kept(f"decided counts {rounds}", lambda: plan.decided_counts(decisions))
    outcome = adapter.create_temp_table(scratch.name("__sd_outcome"), kept(
        f"outcome {statement.ordered or bool(batches)} {rounds}",
        lambda: plan.outcome(producers, counts.subquery(), BASE)))
    kept_once = adapter.fetchall(kept("kept once", lambda: exp.select(
        exp.func("count_if", exp.column("__sd_kept").eq(1))).from_(exceptions.copy())))[0][0]
    windowed = bool(kept_once or sparse)
    try:
        adapter.write_topic(run.ref, kept(f"write {windowed}", lambda: plan.insert_rows(
            run.ref.table, targets, values, plan.write_rows(statement.values, producers, exceptions,
                                                             statement.key_columns, values, base=BASE,
                                                             windowed=windowed), NOW, COMMIT)))
    except EngineError as error:
        raise Unsettled(error) from error
    table = adapter.fetch_arrow(kept("outcome rows", lambda: exp.select(*plan.OUTCOME).from_(
        outcome.copy()).order_by("producer")))
    return Outcome(outcome_table(table), state.end + room, rounds, table=outcome)


def rows(run, state: TopicState, commit: Commit, targets: list[str], values: list[str],
         scratch: Scratch) -> Outcome:
    """The row plan (see sql/plan/rows.py; an engine whose tables number their rows: ``PLAN`` "rows"): the
    statement's rows read once into a table with their producers' marks, the repeats and the entries that came late
    removed from it, then every candidate left written, its position its row's place in the table."""
    adapter, kept = run.adapter, run.kept
    statement = run.statement
    marked = state.marks.num_rows if state.enabled else 0
    large = adapter.SEMI_JOIN_ABOVE is not None and marked > adapter.SEMI_JOIN_ABOVE
    try:
        if large:       # the marks of the producers the rows carry, read from the rows (a semi-join)
            statement = run.statement = statement.over(scratch.table("__sd_values", statement.values))
            marks = scratch.relation("__sd_marks", carried_marks(run, state))
        else:
            marks = scratch.relation("__sd_marks", state.marks.table) if marked else None
        rows = adapter.create_temp_table(scratch.name("__sd_rows"), kept(
            f"rows {marks is None} {large}", lambda: plan.rows_once(statement.values, marks)))
    except EngineError as error:
        raise Unsettled(error) from error
    first, last, invalid, batches = adapter.fetchall(kept("rows summary", lambda: plan.rows_summary(rows)))[0]
    if invalid:
        refuse_invalid(run)
    rounds, late = 1, statement.ordered or bool(batches)      # (out of order: a batch entry can overlap too)
    if not late:
        repeats = adapter.create_temp_table(scratch.name("__sd_repeats"), kept(
            "repeats", lambda: plan.row_repeats(rows)))
        adapter.execute(kept("drop repeats", lambda: plan.drop_repeats(rows, repeats)))
        dropped = kept("dropped repeats", lambda: plan.dropped_repeats(repeats))
    else:
        key_columns = [plan.ROW] + statement.key_columns
        candidates = adapter.create_temp_table(scratch.name("__sd_candidates"), kept(
            "row candidates", lambda: plan.row_candidates(rows, statement.key_columns)))
        decisions, rounds = decide(run, candidates, bool(batches), scratch, key_columns)
        adapter.execute(kept(f"drop rejected {rounds}", lambda: plan.drop_rejected(rows, decisions)))
        dropped = kept(f"dropped rejected {rounds}", lambda: plan.dropped_rejected(decisions))
    with adapter.parameters({plan.FIRST_ROW.name: first if first is not None else 0}):
        try:
            adapter.write_topic(run.ref, kept("write rows", lambda: plan.insert_rows(
                run.ref.table, targets, values, plan.rows_written(rows, values, statement.key_columns, BASE),
                NOW, COMMIT)), rows=0 if first is None else last - first + 1)
        except EngineError as error:
            raise Unsettled(error) from error
        table = adapter.fetch_arrow(kept(f"row outcome {late} {rounds}", lambda: plan.row_outcome(
            rows, dropped, BASE, late=late).order_by("producer")))
    producers = outcome_table(table)
    end = max([state.end] + [p for p in producers.column("last_position").to_pylist() if p is not None])
    return Outcome(producers, end, rounds)


def decide(run, candidates: exp.Table, batches: bool, scratch: Scratch,
           key_columns: list[str] | None = None) -> tuple[exp.Table, int]:
    """The windowed decision of the candidates (their ``key_columns``: the statement's keys unless given), in
    rounds; after the first, only the producers with an undecided entry (a batch entry that straddles) take
    part."""
    key_columns, order = key_columns or run.statement.key_columns, run.statement.order
    decisions = run.adapter.create_temp_table(scratch.name("__sd_decisions"), run.kept(
        f"round 1 {batches}", lambda: plan.first_round(candidates, key_columns, order, batches=batches)))
    rounds = 1
    if not batches:
        return decisions, rounds
    pending_producers = scratch.table("__sd_pending", plan.undecided_producers(decisions))
    if not run.adapter.fetchall(exp.select(exp.Count(this=exp.Star())).from_(pending_producers.copy()))[0][0]:
        return decisions, rounds
    pending = scratch.table("__sd_rounds", plan.rows_of(decisions, pending_producers, inside=True))
    while run.adapter.fetchall(exp.select(exp.Count(this=exp.Star())).from_(pending.copy()).where(
            exp.column(plan.ACCEPTED).is_(exp.null())))[0][0]:
        pending = scratch.table("__sd_rounds", plan.decision_round(pending, key_columns, order, batches=True))
        rounds += 1
    settled = exp.union(plan.rows_of(decisions, pending_producers, inside=False),
                        exp.select("*").from_(pending.copy()), distinct=False)
    return scratch.table("__sd_decided", settled), rounds


def settled(metrics: dict) -> bool:
    """Whether a window plan's rows may be written: no invalid entry and none undecided."""
    return not metrics["invalid"] and not metrics["undecided"] and not metrics.get("unseen")


def outcome_table(table) -> pa.Table:
    """The outcome in its schema (engines return integer columns of several widths, or rows)."""
    if not isinstance(table, pa.Table):
        table = pa.Table.from_pylist(list(table), schema=OUTCOME) if table else OUTCOME.empty_table()
    return pa.Table.from_arrays([table.column(f.name).cast(f.type) for f in OUTCOME], schema=OUTCOME).sort_by(
        "producer")
