"""Compaction: a topic's commits merged into fewer, larger partitions (``seqdedup compact TOPIC``).

On Spark every commit is one partition of the topic's table (``_commit = N``, registered when the commit publishes),
so a stream that commits every few seconds makes tens of thousands of partitions and small files, and every
statement lists them. A compaction merges runs of consecutive published commits into one partition each, atomically
(Spark's ``Compaction.merge``): the rows keep their positions, the merged partition is numbered after the last
commit it holds, and every read sees each entry once, at any moment and after a kill at any moment. The catalog is
unchanged: the commits merged stay published (their numbers are the merged partition's range), so their snapshot and
run-log rows still count. A row's ``_commit`` becomes the merged partition's number.

Which partitions merge is size-tiered, as a log-structured merge tree: a partition holding ``factor ** t`` commits or
more (and fewer than ``factor ** (t + 1)``) is of tier ``t``; ``factor`` consecutive partitions of one tier merge into
one of the next. A topic of ``n`` commits then has at most about ``(factor - 1) * log(n, factor)`` partitions once
compacted, and each entry is rewritten about ``log(n, factor)`` times in its life. A commit number that was never
published (a failed commit's) is never merged across: a merged partition holds exactly the commits of its range.

The topic policy ``compact_every_commits`` (default 100; ``never`` turns it off) runs a compaction after every
commit whose number is a multiple of it, once that commit is published. On DuckDB a topic is one table: there is
nothing to merge, and a compaction reports so.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

#: Partitions of one tier merged into one of the next.
FACTOR = 10
_log = logging.getLogger("seqdedup.compaction")


@dataclass(frozen=True)
class Compaction:
    """What one compaction of a topic did."""

    topic: str
    partitions_before: int                 # the topic's partitions before (0: the engine keeps none, DuckDB)
    partitions_after: int
    merged: list[tuple[int, int]] = field(default_factory=list)   # the commits (first, last) of each new partition
    rows: int = 0                          # rows rewritten
    repaired: int = 0                      # partitions a compaction cut short left behind, dropped first


def tier(commits: int, factor: int) -> int:
    """The tier of a partition holding ``commits`` commits.

    Example:
        >>> [tier(n, 10) for n in (1, 9, 10, 99, 100)]
        [0, 0, 1, 1, 2]
    """
    level = 0
    while commits >= factor:
        commits //= factor
        level += 1
    return level


def plan(ranges: list[tuple[int, int]], factor: int = FACTOR) -> list[list[tuple[int, int]]]:
    """The partitions to merge, as groups of the (first, last) commits of consecutive partitions, from a topic's
    partitions in commit order: ``factor`` consecutive partitions of one tier merge into one, which may merge again
    with the partitions of its new tier before it (the group then holds them all: each row is rewritten once).

    Example:
        >>> plan([(n, n) for n in range(1, 8)], factor=3)       # 1-3 and 4-6 merge, 7 waits for two more
        [[(1, 1), (2, 2), (3, 3)], [(4, 4), (5, 5), (6, 6)]]
        >>> groups = plan([(1, 3), (4, 6), (7, 7), (8, 8), (9, 9)], factor=3)   # 7-9 merge, then 1-9
        >>> [(group[0][0], group[-1][1], len(group)) for group in groups]
        [(1, 9, 5)]
        >>> plan([(1, 1), (2, 2), (4, 4), (5, 5)], factor=2)    # 3 failed: never merged across
        [[(1, 1), (2, 2)], [(4, 4), (5, 5)]]
    """
    if factor < 2:
        raise ValueError(f"factor={factor}: a compaction merges at least 2 partitions into one; give 2 or more")
    done: list[list[tuple[int, int]]] = []
    stack: list[list[tuple[int, int]]] = []          # runs of partitions, each to become one
    for first, last in ranges:
        if stack and stack[-1][-1][1] + 1 != first:  # a gap: what is before it is final
            done += stack
            stack = []
        stack.append([(first, last)])
        while len(stack) >= factor and len({tier(run[-1][1] - run[0][0] + 1, factor) for run in stack[-factor:]}) == 1:
            merged = [part for run in stack[-factor:] for part in run]
            del stack[-factor:]
            stack.append(merged)
    return [run for run in done + stack if len(run) > 1]


def compact(adapter, ref, factor: int = FACTOR) -> Compaction:
    """Compact the topic ``ref`` (see the module's text) through ``adapter``, under the writer lock."""
    started = time.monotonic()
    repaired = adapter.storage.drop_merged(ref)
    ranges = adapter.storage.partition_ranges(ref)
    groups = plan(ranges, factor)
    rows = sum(adapter.storage.merge_partitions(ref, group) for group in groups)
    done = Compaction(ref.key, len(ranges) + repaired, len(ranges) - sum(len(group) - 1 for group in groups),
                      [(group[0][0], group[-1][1]) for group in groups], rows, repaired)
    _log.info("[%s] compacted %s partitions into %s (%s merges, %s rows rewritten, %s leftovers of a compaction "
              "cut short dropped) in %.2f s", ref.key, f"{done.partitions_before:,}", f"{done.partitions_after:,}",
              f"{len(groups):,}", f"{rows:,}", f"{repaired:,}", time.monotonic() - started)
    return done


def due(policies, commit: int) -> bool:
    """Whether the commit ``commit`` is one the topic's ``compact_every_commits`` compacts after."""
    every = policies.compact_every_commits
    return every is not None and commit % every == 0


__all__ = ["Compaction", "FACTOR", "plan", "tier", "compact", "due"]
