"""Running a statement's plan on the engine: the window plan (one pass), the exceptions plan (the decision on the
keys, then one filtered write) and the row plan (DuckDB's), each step a tree from ``sql.plan`` kept per statement
shape (``Run.kept``), the statement's values bound as parameters. Each returns the ``Outcome``: one row per
producer, the only thing that crosses to Python."""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from seqdedup.errors import EngineError, SequenceGapError
from seqdedup.sql import plan
from seqdedup.udfs.reference import gap_refusal

from . import payloads, ranges as spread
from .checks import described, refuse_invalid
from .marks import numbered, reduced
from .topic_state import TopicState, unmarked
from .writer import Commit, Scratch

#: The values that differ from one statement to the next are parameters (``EngineAdapter.parameters``), so that a
#: statement's SQL is built and generated once per shape: the base position, the commit, the time, the id.
BASE, COMMIT = (exp.Placeholder(this=name) for name in ("__sd_base", "__sd_commit"))
NOW = exp.cast(exp.Placeholder(this="__sd_now"), "timestamp")
#: The marks as a map, where a plan takes them so (``EngineAdapter.MARKS_AS_MAP``).
MARKS = exp.Placeholder(this="__sd_marks")
#: BIGINT's bounds, where NumPy finds a least or greatest (``outcome_of_rows``).
INT64 = np.iinfo(np.int64)
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
    values: exp.Expression | None = None    # the statement's rows as read once, when the plan read them so
    apart: bool = False                 # its write staged the entries it dropped apart (``dropped_rows``)
    dropped: exp.Expression | None = None   # the entries it dropped, where it set them apart (``sql.plan.ledger``)
    held: bool = False                  # ... staged with the fingerprint of the entry written with their id
    keys: pa.Array | None = None        # a statement of keys (R20) counted together: the keys it wrote (``together``)


def written_fingerprint(run, state: TopicState, targets: list[str], values: list[str]) -> exp.Expression | None:
    """The fingerprint of an entry of the window plan's rows, where its split write carries that of each dropped
    entry's written copy (``sql.plan.window.window_decisions``' ``held``): payload conflicts judged (R18) in a
    statement in id order (no ORDER BY) with no batch entries (composite ids have none), or of keys (R20:
    ``window.key_decisions``' ``held``). None elsewhere: the judgement reads the written entries back."""
    statement = run.statement
    if statement.ordered or statement.batched:
        return None
    return payloads.fingerprint(run, state, payloads.sent(run, state, targets, values, None))


def inputs(run, targets: list[str], values: list[str], **given) -> plan.Inputs:
    """What a plan's steps are built from (``sql.plan.Inputs``): the values that change from one statement to the
    next are parameters, the tables are added as the steps make them."""
    return plan.Inputs(run.statement, topic=run.ref.table, targets=targets, values=values, publish_time=NOW,
                       commit=COMMIT, base=BASE, **given)


def window(run, state: TopicState, commit: Commit, targets: list[str], values: list[str],
           scratch: Scratch) -> Outcome | None:
    """The window plan (see sql/plan/window.py): one pass. None when a batch entry straddles (undecided)."""
    adapter, steps = run.adapter, plan.PLANS["window"]
    checked = state.enabled
    given = inputs(run, targets, values, checked=checked, partitions=adapter.PARTITIONS,
                   refuse=plan.refusal(adapter.RAISE_ERROR) if adapter.RAISE_ERROR else None)
    marks, seen = marks_relation(run, state, scratch, given, inline=True)
    size = adapter.estimated_size(described(run))      # (the statement's: that of the values, a little more)
    gather = adapter.within(size, adapter.ONE_TASK_BYTES)
    small = adapter.small(size)
    # (a small statement's cost is its fixed costs, a large one's is per row: see EngineAdapter.constant)
    given = dataclasses.replace(given, marks=marks, seen=seen, gather=gather,
                                base=adapter.constant(BASE) if gather else BASE)
    # (a producer with more than a task's share of the entries: spread over ranges of its ids, see sql/plan/spread.py)
    given = dataclasses.replace(given, ranges=spread.ranges(run, given))
    # R16, R18: the dropped entries are those the write stages apart, where the storage can (``split``); else the
    # statement's rows read once, less those written (one reading either way)
    after = dropped_after_plan(run, state)
    split = after and adapter.storage.stages_apart(run.ref)
    held = written_fingerprint(run, state, targets, values) if split else None
    # (what the ledger and the conflicts read of a dropped entry: its keys, and its fingerprints where ``held``; a
    # dropped key's own fingerprint is not staged, ``window.split_write``, so its columns are)
    bare = payloads.keys_only(state) or (held is not None and not run.statement.keyed
                                         and state.topic.applied.ledger != "rows")
    given = dataclasses.replace(given, split=split, bare=split and bare, held=held)
    if after and not split:
        try:
            given = dataclasses.replace(given, read_once=True).having(values=scratch.table(
                "__sd_values", steps["values"].build(given)))
        except EngineError as error:
            raise Unsettled(error) from error
    spread_key = given.ranges.sql() if given.ranges is not None else ""
    together = keyed_together(run, given, after, split)
    given = dataclasses.replace(given, together=together)

    def decide_and_write(i: plan.Inputs):
        decided = run.kept(f"window {not i.read_once} {gather} {marks is MARKS} {spread_key} {split} "
                           f"{i.held is not None} {i.together}",
                           lambda: steps["decide"].build(dataclasses.replace(i, number=adapter.row_number())))
        # (the engine reads the metrics and the outcome off its own table of the decided rows: their columns only)
        metrics = run.kept(f"metrics {seen}", lambda: steps["metrics"].build(i)).expressions
        # (split: an ordered statement of composite ids counts its late ids in the pass only where nothing is staged
        # apart, ``late_after_write``; a policy changed between two statements of one shape changes that)
        outcome = run.kept(f"outcome {checked} {together} {split}", lambda: steps["outcome"].build(i)).expressions
        write = steps["split write" if split else "write"]
        return adapter.storage.write_decided(run.ref, decided, plan.ACCEPTED,
                                             lambda rows: write.build(i.having(accepted=rows)),
                                             {m.alias: m.this for m in metrics}, outcome,
                                             None if together else plan.LAST,
                                             proceed=settled, name=scratch.name("__sd_decided"),
                                             split=plan.DROPPED_ENTRY if split else None)

    written = None
    try:
        with adapter.parameters(run.bound), adapter.sized(small):
            written = decide_and_write(given)
    except EngineError as error:
        adapter.storage.discard_commit_rows(run.ref)
        if plan.REFUSED not in str(error):
            # Spark 4.3 fails to run some plans whole (a window over a cross join with a UNION ALL: "cannot
            # assign instance of DefaultSerializationProxy"): the statement's rows are read once into a scratch
            # table and decided from there; an error of the user's own expressions fails again, here, and is
            # reported. (Logged: a plan that fails where it should not, a kept step's SQL out of step with the
            # statement, is otherwise rescued unseen.)
            logging.getLogger("seqdedup").info("the window plan failed whole (%s); deciding from its rows read once",
                                               (str(error).strip().splitlines() or [""])[0])
            try:
                rows = scratch.table("__sd_values", steps["values"].build(given))
                with adapter.parameters(run.bound), adapter.sized(small):
                    written = decide_and_write(dataclasses.replace(given, read_once=True).having(values=rows))
            except EngineError as again:
                adapter.storage.discard_commit_rows(run.ref)
                if plan.REFUSED not in str(again):
                    raise Unsettled(again) from again
    if written is None:     # the query met an invalid entry (``refuse``): counted and named here
        refuse_invalid(run)
    metrics = written.metrics
    if metrics.get("unseen"):
        adapter.storage.discard_commit_rows(run.ref)
        raise EngineError(CHANGED)
    if metrics["invalid"]:
        adapter.storage.discard_commit_rows(run.ref)
        refuse_invalid(run)
    if metrics["undecided"]:
        adapter.storage.discard_commit_rows(run.ref)
        return None
    producers = outcome_table(written.outcome)
    if given.ranges is not None:        # (a row per range of each producer)
        producers = outcome_table(spread.summed(producers))
    if plan.window.late_after_write(given):
        producers = with_late(producers, late_staged(run))
    keys = None
    if together:
        producers = producers.filter(pc.greater(producers.column("sent"), 0))     # (none sent: no row)
        keys = written_keys(run) if state.enabled else None
    end = max(state.end, metrics["end"] or 0)
    return Outcome(producers, end, 1, values=given.tables.get("values"), apart=split, keys=keys,
                   held=given.held is not None)


def late_staged(run) -> pa.Table:
    """(producer, out_of_order) of an ordered statement whose window plan left them to be counted after its write,
    from the entries it staged (``sql.plan.window.late_staged``): by Arrow where the staged files are on the local
    disk (5M entries, 750,000 dropped: about 0.4 s, against a job), else by the engine. The written rows are read a
    batch at a time, so the driver holds the dropped entries' keys, not the statement's."""
    storage, ref = run.adapter.storage, run.ref
    keys = ["_producer", "_sequence_id"]
    dropped = storage.dropped_files(ref, [*keys, "_highest_sequence_id"])
    written = storage.staged_files(ref) if dropped is not None else None
    if written is None:
        relation = storage.dropped_rows(ref)
        if relation is None:
            return pa.table({"producer": pa.array([], pa.string()), "out_of_order": pa.array([], pa.int64())})
        try:
            return run.adapter.fetch_arrow(plan.window.late_staged(relation, storage.staged_rows(ref)))
        except EngineError as error:
            raise Unsettled(error) from error
    mark = dropped.column("_highest_sequence_id")
    above = dropped.filter(pc.or_kleene(pc.is_null(mark), pc.greater(dropped.column("_sequence_id"), mark)))
    # (each id once; those the statement wrote, found by the written rows' probe of the few dropped, are not late)
    ids = above.select(keys).group_by(keys).aggregate([])
    found = [pa.Table.from_batches([batch]).join(ids, keys=keys, join_type="left semi")
             for batch in written.to_batches(columns=keys)]
    late = ids.join(pa.concat_tables(found), keys=keys, join_type="left anti") if found else ids
    return late.group_by("_producer").aggregate([("_producer", "count")])


def with_late(producers: pa.Table, late: pa.Table) -> pa.Table:
    """``producers`` (an outcome) with ``late``'s counts (producer, count) as their ``out_of_order`` (0 where none)."""
    at = pc.index_in(producers.column("producer"), value_set=late.column(0).cast(pa.string()))
    column = pc.fill_null(pc.take(late.column(1).cast(pa.int64()), at), 0)
    return producers.set_column(producers.schema.get_field_index("out_of_order"), "out_of_order", column)


def keyed_together(run, given: plan.Inputs, after: bool, split: bool) -> bool:
    """Whether the window plan reports a statement of keys (R20) as one row of counts, its keys read back from the
    rows it wrote (``written_keys``): a row per key would be gathered by the driver as a list, a row per entry
    (Spark's driver runs out of heap at a million or two). Not where the ledger's reasons are judged after the write
    against each key's mark (``by_difference``), nor where a key's entries are spread over ranges."""
    return run.statement.keyed and given.ranges is None and (split or not after)


def written_keys(run) -> pa.Table:
    """(producer, sequence_id): the keys the open commit wrote, each at its position (each once: a key a statement
    writes had no mark, and it writes one copy)."""
    try:
        return run.adapter.storage.staged_keys(run.ref)
    except EngineError as error:
        raise Unsettled(error) from error


def dropped_after_plan(run, state: TopicState) -> bool:
    """Whether the statement's dropped entries are needed (a ledger of them, their payloads judged) and its plan
    does not set them apart as it decides: the row plan does, from its numbered rows; the others (Spark's) leave
    them to be found after the write (``seqdedup.core.dropped``)."""
    return run.adapter.PLAN != "rows" and payloads.judged(state)


def dropped_any(producers: pa.Table) -> bool:
    """Whether a statement's outcome per producer (``OUTCOME``) counts a dropped entry (its ``duplicates`` are its
    entries not written)."""
    return bool(pc.sum(producers.column("duplicates")).as_py())


def keys_together(producers: pa.Table) -> pa.Table:
    """An is_new statement's outcome (``OUTCOME``) as the run log and the result give it: its keys' counts as one row
    whose producer is NULL (a row per key would be a row per entry), first and last positions of them all."""
    if not producers.num_rows:
        return producers
    together = {"producer": pa.array([None], pa.string())}
    for name, how in plan.spread.OUTCOME_SUMS.items():
        column = producers.column(name)
        together[name] = pa.array([getattr(pc, how)(column).as_py() or (0 if how == "sum" else None)], pa.int64())
    return pa.table(together, schema=OUTCOME)


def by_difference(state: TopicState, outcome: Outcome) -> bool:
    """Whether the statement's dropped entries are worked out as its rows less those written: they are needed,
    and the plan neither set nor staged them apart (the producers' marks are then needed for their reasons)."""
    return payloads.judged(state) and outcome.dropped is None and not outcome.apart


def began_marks(state: TopicState, outcome: Outcome, scratch: Scratch) -> exp.Expression | None:
    """The marks the statement's producers began with, as a relation (None: none of them had one): what the Spark
    ledger's reasons and the holes are judged against, after the write. Only theirs: a state of a million producers
    is not uploaded again for a statement of ten."""
    if not state.marks.num_rows:
        return None
    began = state.marks.lookup(outcome.producers.column("producer").cast(pa.string()))
    return scratch.relation("__sd_began", began) if began.num_rows else None


def judge_holes(run, state: TopicState, marks: exp.Expression | None) -> None:
    """R17, where the topic's ``gap_policy`` is ``record`` (each hole the commit's entries leave, into
    ``seqdedup_gaps``) or ``refuse`` (a statement that leaves one writes nothing, and the error names the first)."""
    adapter, ref = run.adapter, run.ref
    found = plan.gaps.holes(adapter.storage.staged_rows(ref), marks)
    try:
        if state.topic.applied.gap_policy == "record":
            adapter.execute(plan.gaps.record(found, NOW, COMMIT))
            return
        first = adapter.fetchall(found.order_by("producer", "after_id").limit(1))
    except EngineError as error:
        raise Unsettled(error) from error
    if first:
        adapter.storage.discard_commit_rows(ref)
        raise SequenceGapError(gap_refusal(*first[0]))


def marks_relation(run, state: TopicState, scratch: Scratch, given: plan.Inputs, *,
                   inline: bool = False) -> tuple[exp.Expression | None, bool]:
    """The marks a plan joins as a relation (None: no producer has one), and whether they are only those of
    the producers a first read of the statement carried (``seen``: a semi-join of a large state; then a
    relation even when empty, so that an entry of a producer that read did not carry is caught). A statement of
    keys (R20) with more entries than a semi-join takes (``more_entries``) joins the whole state, without the
    distinct count of its keys that would learn as much (on Spark ``local[2]``, 5M keys' digests: about 10 s).
    ``inline`` (the window plan): a few marks come as a map, bound to the parameter ``__sd_marks``
    (``MARKS_AS_MAP``)."""
    adapter, checked = run.adapter, given.checked
    above = adapter.SEMI_JOIN_ABOVE
    seen = checked and above is not None and state.marks.num_rows > above
    if not seen and not (checked and state.marks.num_rows):
        return None, False
    table = carried_marks(run, state, given) if seen and not joins_whole_state(run, state) else None
    if table is None:       # (a small state, or a statement that carries a large part of it)
        table, seen = state.marks.table, False
    return given_marks(run, table, scratch, inline=inline), seen


def given_marks(run, table: pa.Table, scratch: Scratch, *, inline: bool = True) -> exp.Expression:
    """The marks ``table`` as a plan reads them: a few (``MARKS_AS_MAP``) as a map bound to the parameter
    ``MARKS``, where the plan takes one (``inline``); else a relation."""
    if inline and 0 < table.num_rows <= (run.adapter.MARKS_AS_MAP or 0):
        run.bound[MARKS.name] = run.adapter.marks_map(table, run.statement.id_parts)
        return MARKS
    return scratch.relation("__sd_marks", table)


#: However large the state, a statement that carries at most this many producers is joined to their marks alone.
CARRIED_NAMES = 1 << 16


def carried_limit(adapter, state: TopicState) -> int | None:
    """The most producers a statement may carry and still be joined to their marks alone (None: any number)."""
    whole = adapter.WHOLE_STATE_FROM
    # (a power of two, so that few trees are kept; at least CARRIED_NAMES, which cost little to read)
    return None if whole is None else max(1 << (state.marks.num_rows // whole).bit_length(), CARRIED_NAMES)


def joins_whole_state(run, state: TopicState) -> bool:
    """Whether a statement on a large state joins all of it: a statement of keys (R20) with more entries than a
    semi-join of the state takes (``more_entries``), learned without counting its keys."""
    return run.statement.keyed and more_entries(run, carried_limit(run.adapter, state))


def more_entries(run, limit: int | None) -> bool:
    """Whether the statement has more than ``limit`` entries: its first ``limit`` + 1 rows read, no more (the
    engine stops its scan there). A statement of keys has about as many keys as entries, so one with more joins the
    whole state without reading its rows into a table first to count its keys (5M keys: 0.8 s of 5 s on DuckDB).
    A source that gives other rows when read again changes only which join is made, never the decision."""
    if limit is None:
        return False
    probe = run.kept(f"more entries {limit}", lambda: exp.select(exp.Count(this=exp.Star())).from_(
        exp.select(exp.convert(1)).from_(run.statement.keys.subquery("k")).limit(limit + 1).subquery("f")))
    try:
        return run.adapter.fetchall(probe)[0][0] > limit
    except EngineError as error:
        raise Unsettled(error) from error


def carried_marks(run, state: TopicState, given: plan.Inputs, entries: int | None = None) -> pa.Table | None:
    """The marks of the producers the statement carries, and a row with no mark for each that has none: a
    semi-join of a large state, so that the engine gets the few marks the statement needs. None where it carries
    more than 1/``WHOLE_STATE_FROM`` of the state's producers (a statement of many keys, R20): the engine joins the
    whole state for less than the names cost to read and look up (no more of them than that are read). A statement
    of keys with more ``entries`` than that (it has about as many keys as entries) joins the whole state unread."""
    limit = carried_limit(run.adapter, state)
    if limit is not None and run.statement.keyed and entries is not None and entries > limit:
        return None
    query = run.kept(f"carried {limit}", lambda: plan.CARRIED.build(given) if limit is None else
                     plan.CARRIED.build(given).limit(limit + 1))
    carried = run.adapter.fetch_arrow(query)
    if limit is not None and carried.num_rows > limit:
        return None
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
    adapter, kept, steps = run.adapter, run.kept, plan.PLANS["exceptions"]
    i = inputs(run, targets, values, read_once=True, checked=state.enabled)
    try:
        i = i.having(values=scratch.table("__sd_values", steps["values"].build(i)))
    except EngineError as error:
        raise Unsettled(error) from error
    statement = run.statement = i.read
    marks, seen = marks_relation(run, state, scratch, i)
    i = dataclasses.replace(i, marks=marks, seen=seen)
    try:
        i = i.having(producers=adapter.create_temp_table(scratch.name("__sd_producers"), kept(
            f"producers {seen}", lambda: steps["producers"].build(i))))
    except EngineError as error:
        raise Unsettled(error) from error
    invalid, batches, room, *unseen, sparse = adapter.fetchall(kept(f"sums {seen}", lambda: steps["sums"].build(i)))[0]
    if any(unseen):
        raise EngineError(CHANGED)
    if invalid:
        refuse_invalid(run)
    rounds, i = 1, dataclasses.replace(i, batches=bool(batches))
    if not batches and not statement.ordered:
        i = i.having(exceptions=adapter.create_temp_table(scratch.name("__sd_exceptions"), kept(
            "repeats", lambda: steps["repeats"].build(i))))
        counts = kept("repeat counts", lambda: steps["repeat counts"].build(i))
    else:
        candidates = adapter.create_temp_table(scratch.name("__sd_candidates"), kept(
            "candidates", lambda: steps["candidates"].build(i)))
        decisions, rounds = decide(run, i.having(candidates=candidates), steps, scratch)
        i = i.having(decisions=decisions)
        i = i.having(exceptions=adapter.create_temp_table(scratch.name("__sd_exceptions"), kept(
            f"decided exceptions {rounds}", lambda: steps["decided exceptions"].build(i))))
        counts = kept(f"decided counts {rounds}", lambda: steps["decided counts"].build(i))
    i = i.having(counts=counts.subquery())
    outcome = adapter.create_temp_table(scratch.name("__sd_outcome"), kept(
        f"outcome {statement.ordered or bool(batches)} {rounds}", lambda: steps["outcome"].build(i)))
    i = i.having(outcome=outcome)
    kept_once = adapter.fetchall(kept("kept once", lambda: steps["kept once"].build(i)))[0][0]
    i = dataclasses.replace(i, windowed=bool(kept_once or sparse))
    try:
        adapter.storage.write_topic(run.ref, kept(f"write {i.windowed}", lambda: steps["write"].build(i)))
    except EngineError as error:
        raise Unsettled(error) from error
    table = adapter.fetch_arrow(kept("outcome rows", lambda: steps["outcome rows"].build(i)))
    return Outcome(outcome_table(table), state.end + room, rounds, table=outcome, values=i.table("values"))


def rows(run, state: TopicState, commit: Commit, targets: list[str], values: list[str],
         scratch: Scratch) -> Outcome:
    """The row plan (see sql/plan/rows.py; an engine whose tables number their rows: ``PLAN`` "rows"): the
    statement's rows read once into a table with their producers' marks, the repeats and the entries that came late
    removed from it, then every candidate left written, its position its row's place in the table."""
    adapter, kept, steps = run.adapter, run.kept, plan.PLANS["rows"]
    marked = state.marks.num_rows if state.enabled else 0
    large = adapter.SEMI_JOIN_ABOVE is not None and marked > adapter.SEMI_JOIN_ABOVE
    if large and joins_whole_state(run, state):
        large = False       # (it joins the whole state, so its rows are read once by the step that joins them)
    judged = payloads.judged(state)       # R16, R18: the dropped entries set apart, for the ledger and conflicts
    i = inputs(run, targets, values, read_once=large, checked=state.enabled, dropped=judged,
               together=run.statement.keyed)     # (its keys counted as one row, read back once written)
    shape = f"{payloads.fingerprinted(state)} {payloads.kept_whole(state)}"

    def with_payload(i: plan.Inputs) -> plan.Inputs:
        """An entry's fingerprint and columns, for the steps that set the dropped entries apart: built with such a
        step only, which a statement that drops nothing never builds."""
        columns = payloads.sent(run, state, targets, values, "r")
        return dataclasses.replace(i, fingerprint=payloads.fingerprint(run, state, columns),
                                   entry=payloads.entry(state, targets, columns))
    try:
        if large:       # the marks of the producers the rows carry, read from the rows (a semi-join)
            once, entries = adapter.create_counted_temp_table(scratch.name("__sd_values"), steps["values"].build(i))
            i = i.having(values=once)
            run.statement = i.read
            carried = carried_marks(run, state, i, entries)
            marks = scratch.relation("__sd_marks", state.marks.table if carried is None else carried)
        else:
            marks = given_marks(run, state.marks.table, scratch) if marked else None
        i = dataclasses.replace(i, marks=marks)
        with adapter.parameters(run.bound):     # (the marks, where they are a map)
            held, entries = adapter.create_counted_temp_table(scratch.name("__sd_rows"), kept(
                f"rows {'none' if marks is None else type(marks).__name__} {large}", lambda: steps["rows"].build(i)))
        i = i.having(rows=held)
    except EngineError as error:
        raise Unsettled(error) from error
    batches, dropped = 0, None
    if i.statement.batched:     # (without a third argument there are none)
        batches = adapter.fetchall(kept("rows summary", lambda: steps["summary"].build(i)))[0][0]
    rounds, late = 1, i.statement.ordered or bool(batches)      # (out of order: a batch entry can overlap too)
    i = dataclasses.replace(i, batches=bool(batches))

    def set_apart() -> exp.Table:       # (the dropped entries, before they are removed from the rows)
        step = ("dropped rejected" if late else "dropped repeats") if removed else "dropped below"
        return adapter.create_temp_table(scratch.name("__sd_dropped"), kept(
            f"{step} {shape} {rounds}", lambda: steps[step].build(with_payload(i))))

    # the rows to remove: the repeats, or the candidates rejected (counted where one round decides); a small
    # statement writes first, its outcome worked out from the keys it wrote, where none is removed (``written_first``)
    removed, table = 1, None if late else written_first(run, i, entries)
    wrote = table is not None
    if table is not None or (entries <= 1 and not batches):
        removed = 0     # (none repeats among the rows written; or one entry, which neither repeats nor comes late)
    elif not late:
        repeats, removed = adapter.create_counted_temp_table(scratch.name("__sd_repeats"), kept(
            "repeats", lambda: steps["repeats"].build(i)))
        i = i.having(repeats=repeats)
    else:
        i = i.having(candidates=kept("row candidates", lambda: steps["candidates"].build(i)).subquery())
        if batches:
            decisions, rounds = decide(run, i, steps, scratch)
        else:       # one round decides every candidate: only the rejected are kept
            decisions, removed = adapter.create_counted_temp_table(scratch.name("__sd_decisions"), kept(
                "rejected", lambda: steps["rejected"].build(i)))
        i = i.having(decisions=decisions)
    if removed:     # (else the rows stay as they are, and what the statement dropped is set apart below, if any)
        if judged:
            dropped = set_apart()
        step = "drop rejected" if late else "drop repeats"
        adapter.execute(kept(f"{step} {rounds}", lambda: steps[step].build(i)))
    elif late and not batches:      # (in order, none rejected: what is left is written or at or below its mark)
        table = written_first(run, i, entries)
        wrote = table is not None
    if table is None:
        outcome = steps[("outcome rejected" if late else "outcome repeats") if removed else "outcome"]
        table = adapter.fetch_arrow(kept(f"row outcome {late} {rounds} {bool(removed)} {i.together}",
                                         lambda: outcome.build(i)), at_most=entries)     # (a row per producer)
    if judged and dropped is None and dropped_any(table):
        dropped = set_apart()       # (only entries at or below their mark: nothing was removed)
    if not wrote:       # (the outcome read before the write gives its first row's number)
        first = table.column(plan.FIRST)
        with adapter.parameters({plan.FIRST_ROW.name: first[0].as_py() if len(first) else 0}):
            try:
                adapter.storage.write_topic(run.ref, kept("write rows", lambda: steps["write"].build(i)),
                                            rows=pc.sum(table.column("written")).as_py() or 0)
            except EngineError as error:
                raise Unsettled(error) from error
    producers = outcome_table(table)
    last = pc.max(producers.column("last_position")).as_py()      # (None: nothing was written)
    end = state.end if last is None else max(state.end, last)
    keys = written_keys(run) if i.together and state.enabled else None
    return Outcome(producers, end, rounds, dropped=dropped, keys=keys)


def written_first(run, i: plan.Inputs, entries: int) -> pa.Table | None:
    """A small statement without batch entries (``fetchable``) whose rows are left as they are (without ORDER BY,
    before its repeats are looked for; with it, once its window rejected none) writes its candidates, each at the
    base plus its place among them, and its outcome is worked out from the keys and positions the write returns:
    one query where reading the rows back and writing them were two (0.5 ms of a ten-entry statement of 8.5). Where
    a row was not written (at or below its mark), the rows' keys are read back too, for what each producer sent.
    Where an id repeats among the rows written, the write is undone and None returned: the engine's way removes the
    copies, then writes again. None too, before anything is written, where the statement is not of that kind."""
    if not fetchable(run, i, entries):
        return None
    adapter, base, steps = run.adapter, run.stamp[BASE.name], plan.PLANS["rows"]
    try:
        wrote = adapter.storage.write_topic_returning(
            run.ref, run.kept("returning write", lambda: steps["returning write"].build(i)))
    except EngineError as error:
        raise Unsettled(error) from error
    producers, ids, highest, row = _columns(wrote, RETURNED)
    row, candidate = row - base - 1, np.ones(len(row), bool)
    if len(wrote) < entries:        # (the others, at or below their marks, for what each producer sent)
        at, *theirs, written = _columns(adapter.fetchall(run.kept("fetched", lambda: steps["fetched"].build(i))),
                                        FETCHED)
        others = ~written
        producers, ids, highest, row = (np.concatenate([mine, other[others]]) for mine, other in
                                        zip((producers, ids, highest, row), [*theirs, at]))
        candidate = np.concatenate([candidate, np.zeros(int(others.sum()), bool)])
    table = outcome_of_rows(pa.array(producers, pa.string()), candidate, row, ids, highest, base)
    if table is None:
        adapter.execute(run.kept("unwrite", lambda: steps["unwrite"].build(i)))
    return table


#: The NumPy types of the columns a small statement's write returns (producer, id, highest id, position) and of
#: its rows read back (``sql.plan.rows_fetched``: row, producer, id, highest id, whether a candidate).
RETURNED, FETCHED = (object, np.int64, np.int64, np.int64), (np.int64, object, np.int64, np.int64, bool)


def _columns(rows: list[tuple], kinds: tuple) -> list[np.ndarray]:
    """A few rows' columns, each taken whole by NumPy as its kind (no Python per row).

    Example:
        >>> [c.tolist() for c in _columns([("a", 5), ("b", 6)], (object, np.int64))], len(_columns([], (bool,))[0])
        ([['a', 'b'], [5, 6]], 0)
    """
    return [np.array(column, kind) for column, kind in zip(list(zip(*rows)) or [()] * len(kinds), kinds)]


def fetchable(run, i: plan.Inputs, entries: int) -> bool:
    """Whether a statement's outcome may be worked out in Python from its rows' keys: a few rows
    (``EngineAdapter.FETCHED_OUTCOME_AT_MOST``) with integer ids, not counted together (R20's keys)."""
    at_most = run.adapter.FETCHED_OUTCOME_AT_MOST
    return at_most is not None and 0 < entries <= at_most and not i.together and i.statement.id_parts is None


def outcome_of_rows(producers, candidate: np.ndarray, row: np.ndarray, ids: np.ndarray, highest: np.ndarray,
                    base: int) -> pa.Table | None:
    """The outcome of a statement whose rows are left as they are, from each row's producer, whether it is a
    candidate, its row's place (from 0), id and highest id: each candidate written at ``base`` plus 1 plus its
    place, each other row at or below its producer's mark, as the outcome's query counts them with no rows
    removed. None where an id repeats among the candidates."""
    # (a few hundred rows at most: NumPy over each producer's number costs a third of Arrow's group-bys, whose
    # fixed cost is most of it at this size)
    names, group = numbered(producers)
    kept, kept_ids = group[candidate], ids[candidate]
    order = np.lexsort((kept_ids, kept))
    if np.any((np.diff(kept[order]) == 0) & (np.diff(kept_ids[order]) == 0)):
        return None         # (an id repeats: the engine removes the copies)
    groups = len(names)
    sent, written = np.bincount(group, minlength=groups), np.bincount(kept, minlength=groups)
    none = written == 0     # (a producer none of whose entries is written: no positions, no highest id)

    def extreme(ufunc: np.ufunc, start: int, values: np.ndarray) -> np.ndarray:
        """Each producer's least or greatest of its candidates' ``values``."""
        return reduced(ufunc, start, kept, values, groups)

    def position(places: np.ndarray) -> pa.Array:
        return pa.array(np.where(none, 0, places) + base + 1, mask=none)

    at = row[candidate]
    return pa.table({"producer": names, "sent": sent, "written": written, "duplicates": sent - written,
                     "first_position": position(extreme(np.minimum, INT64.max, at)),
                     "last_position": position(extreme(np.maximum, INT64.min, at)),
                     "highest": pa.array(extreme(np.maximum, INT64.min, highest[candidate]), mask=none),
                     "out_of_order": np.zeros(groups, np.int64)})


def decide(run, i: plan.Inputs, steps: dict[str, plan.Step], scratch: Scratch) -> tuple[exp.Table, int]:
    """The windowed decision of the candidates (``sql.plan.round_steps``), in rounds; after the first, only the
    producers with an undecided entry (a batch entry that straddles) take part."""
    adapter = run.adapter
    decisions = adapter.create_temp_table(scratch.name("__sd_decisions"), run.kept(
        f"round 1 {i.batches}", lambda: steps["round 1"].build(i)))
    rounds = 1
    if not i.batches:
        return decisions, rounds
    i = i.having(decisions=decisions)
    i = i.having(pending=scratch.table("__sd_pending", steps["pending"].build(i)))
    if not adapter.fetchall(steps["pending count"].build(i))[0][0]:
        return decisions, rounds
    i = i.having(rounds=scratch.table("__sd_rounds", steps["pending rows"].build(i)))
    while adapter.fetchall(steps["undecided"].build(i))[0][0]:
        i = i.having(rounds=scratch.table("__sd_rounds", steps["next round"].build(i)))
        rounds += 1
    return scratch.table("__sd_decided", steps["settled"].build(i)), rounds


def settled(metrics: dict) -> bool:
    """Whether a window plan's rows may be written: no invalid entry and none undecided."""
    return not metrics["invalid"] and not metrics["undecided"] and not metrics.get("unseen")


def outcome_table(table) -> pa.Table:
    """The outcome in its schema (engines return integer columns of several widths, or rows), in no order (a
    statement's result sorts it by producer). A column it lacks is NULL (the producer of an outcome together)."""
    text = OUTCOME.set(OUTCOME.get_field_index("highest"), pa.field("highest", pa.string()))   # (R19's ids)
    if not isinstance(table, pa.Table):
        rows = list(table or ())
        table = pa.Table.from_pylist(rows, schema=text if any(isinstance(r["highest"], str) for r in rows)
                                     else OUTCOME)
    schema = OUTCOME
    if "highest" in table.column_names and pa.types.is_string(table.schema.field("highest").type):
        schema = text
    return pa.Table.from_arrays([table.column(f.name).cast(f.type) if f.name in table.column_names
                                 else pa.nulls(table.num_rows, f.type) for f in schema], schema=schema)
