"""Whether a statement's window plan spreads a large producer's entries over ranges (``sql.plan.spread``), and
which: a first look at the statement's first entries, then, where one producer may hold more than a task's share,
a pass over the keys for the largest producers' id ranges. Each answer is a few rows; the ranges are literals in
the statement's query."""
from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from seqdedup.sql import plan
from seqdedup.sql.plan import spread

from .checks import refuse_invalid

#: At most how many ranges one producer gets, and how many per task: each range is a partition of the windows, whose
#: running frames read its rows back whole (from spill files past a few thousand rows, a read-ahead buffer each).
#: With two ranges a task, one producer's 10M entries ran a 1 GB driver of ``local[2]`` out of heap; with eight,
#: 10M completed and 5M took the same time (docs/performance.md, issue 41).
MOST_RANGES, RANGES_PER_TASK = 32, 8
_TASKS: dict[tuple[str, int], list[int]] = {}     # (hash, partitions) -> the task of each label (``hash_tasks``)


def ranges(run, given: plan.Inputs) -> exp.Expression | None:
    """The ranges of the statement's entries (``window_decisions``' ``ranges``), None where it is not spread: a
    small or ordered statement, deduplication off, an engine that takes no partition hint, or no producer holding
    more than its share of the tasks (``partitions``: a producer with more entries than the statement's share per
    task would leave the other tasks idle). Composite ids (R19) are spread by their text (``composite_bounds``)."""
    adapter, partitions, steps = run.adapter, given.partitions, plan.PLANS["window"]
    if (not adapter.SPREADS or given.gather or not given.checked or run.statement.ordered
            or not partitions or partitions < 2):
        return None
    entries, largest = adapter.fetchall(run.kept("first look", lambda: steps["first look"].build(given)))[0]
    if not entries or largest * partitions <= entries:
        return None
    found = adapter.fetchall(run.kept("largest producers", lambda: steps["largest producers"].build(given)))
    if found and found[0][-1]:
        refuse_invalid(run)     # (the pass read every entry: the window plan's query would fail on one)
    tasks = _tasks(run, partitions)
    count = min(RANGES_PER_TASK * partitions, MOST_RANGES)
    integers = run.statement.id_parts is None
    bounded = spread.range_bounds if integers else spread.composite_bounds
    spread_over: dict[str, tuple[list, list[int]]] = {}
    for producer, produced, lowest, highest, total, _ in found:
        if producer is None or lowest is None or produced * partitions <= total:    # (NULLs: R4 refuses them)
            continue
        bounds = bounded(lowest, highest, count)
        labels = spread.labels_in_turn(tasks, partitions, len(bounds) + 1)
        if bounds and labels:
            spread_over[producer] = (bounds, labels)
    return spread.ranges_of(spread_over, adapter.PARTITION_HASH, batches=integers) if spread_over else None


def _tasks(run, partitions: int) -> list[int]:
    key = (run.adapter.PARTITION_HASH, partitions)
    if key not in _TASKS:
        rows = run.adapter.fetchall(spread.hash_tasks(run.adapter.PARTITION_HASH, partitions, 64 * partitions))
        _TASKS[key] = [task for _, task in sorted(rows)]
    return _TASKS[key]


def summed(outcome: pa.Table) -> pa.Table:
    """A spread statement's outcome, one row per range of a producer, as one row per producer
    (``spread.OUTCOME_SUMS``; the caller puts it in the outcome's schema)."""
    grouped = outcome.group_by("producer").aggregate([(c, how) for c, how in spread.OUTCOME_SUMS.items()])
    return pa.table({"producer": grouped.column("producer"),
                     **{c: grouped.column(f"{c}_{how}") for c, how in spread.OUTCOME_SUMS.items()}})
