#!/usr/bin/env python3
"""Target for compaction (Spark, where every commit is a partition): a statement and a recovery on a topic of
10,000 commits cost what they cost on a topic of 10, once compacted (at most 1.2x, medians), against the same topic
before compaction. The small topic is measured first (after a warm-up) and last, the baseline the lower of the two.

A topic's history is built in bulk, as that many one-entry statements leave it (real statements cost a second
each here, 10,000 of them hours): each commit a partition of its own, staged where seqdedup stages it and registered
the way a commit publishes, with its run log row; then one real snapshot at the end (the last snapshot a stream has).
Then, on each topic: --statements real 10-entry statements (timed: median), and a recovery of the topic's state
(the writer forgets it, and reads the last snapshot and replays the log after it: median of --recoveries). The
large topic is measured before compaction, compacted (``Session.compact``, timed), and measured again.

    python benchmarks/compaction.py [--commits 10000] [--small 10] [--statements 7] [--recoveries 5]

DuckDB keeps a topic in one table, whatever its commits: there is nothing to compact and nothing to measure.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import uuid

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from common import Engines, median, timed  # noqa: E402

STATEMENT = "INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq)"
PRODUCERS = 10


def build(engines: Engines, commits: int):
    """A session on a new namespace whose topic ``events`` has ``commits`` one-entry commits after its own."""
    from seqdedup.catalog.names import STAGING

    session = engines.fresh()
    spark = engines.spark
    session.create_topic("events", {"payload": "STRING"}, compact_every_commits="never")    # commit 1
    ref = session.ref("events")
    table = session.adapter.files.table_location(ref.table).removeprefix("file:")
    first, last = 2, commits + 1
    # commit c holds one entry: position c - 1, producer p<c % 10>, sequence id c
    rows = spark.sql(f"SELECT concat('payload-', id) AS payload, concat('p', id % {PRODUCERS}) AS _producer, id AS "
                     "_sequence_id, id AS _highest_sequence_id, id - 1 AS _position, current_timestamp() AS "
                     f"_publish_time, id AS _commit FROM range({first}, {last + 1})")
    scratch = f"{engines.tmp}/bulk-{uuid.uuid4().hex[:8]}"
    rows.repartition(4).write.partitionBy("_commit").parquet(scratch)
    os.makedirs(f"{table}/{STAGING}", exist_ok=True)
    for commit in range(first, last + 1):
        os.rename(f"{scratch}/_commit={commit}", f"{table}/{STAGING}/{commit}-bulk-0")
    for start in range(first, last + 1, 500):
        specs = " ".join(f"PARTITION (_commit = {c}) LOCATION '{table}/{STAGING}/{c}-bulk-0'"
                         for c in range(start, min(start + 500, last + 1)))
        spark.sql(f"ALTER TABLE {ref.key} ADD {specs}")
    # (named columns: the run log gains columns, R18's payload_conflicts the latest)
    spark.sql(f"INSERT INTO seqdedup_statements (statement_id, topic, producer, written, duplicates, first_position, "
              "last_position, executed_at, highest, commit_id, out_of_order, attempt) "
              f"SELECT uuid(), '{ref.key}', concat('p', id % {PRODUCERS}), 1, 0, "
              f"id - 1, id - 1, current_timestamp(), id, id, 0, NULL FROM range({first}, {last + 1})")
    spark.catalog.refreshTable(ref.key)
    session.writer.forget()
    session.snapshot("events")          # real: recovers the whole log, then records it
    return session


def measure(engines: Engines, session, statements: int, recoveries: int, first_id: int) -> tuple[float, float]:
    """(median seconds of a 10-entry statement, median seconds of a recovery of the topic's state)."""
    engines.spark.catalog.setCurrentDatabase(session.ref("events").namespace)    # its catalog tables' namespace
    costs = []
    for i in range(statements + 1):
        ids = first_id + 10 * i
        engines.spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW staging AS SELECT concat('p', id % {PRODUCERS}) AS "
                          f"producer, id AS seq, 'payload' AS payload FROM range({ids}, {ids + 10})")
        seconds, result = timed(session.sql, STATEMENT)
        assert result.written == 10, result
        costs.append(seconds)
    ref = session.ref("events")
    recovered = []
    for _ in range(recoveries):
        session.writer.forget(ref)
        recovered.append(timed(session.state, ref)[0])
    return median(costs[1:]), median(recovered)        # the first statement warms the plans


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=10_000)
    ap.add_argument("--small", type=int, default=10, help="commits of the baseline topic")
    ap.add_argument("--statements", type=int, default=7)
    ap.add_argument("--recoveries", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        engines = Engines("spark", pathlib.Path(tmp))
        small = build(engines, args.small)
        measure(engines, small, 2, 2, 10**9)          # warm-up: the session's first plans and JIT
        base = measure(engines, small, args.statements, args.recoveries, 2 * 10**9)
        print(f"topic of {args.small} commits: statement {base[0]:.3f} s, recovery {base[1]:.3f} s", flush=True)
        built, large = timed(build, engines, args.commits)
        partitions = len(large.adapter.storage.partition_ranges(large.ref("events")))
        before = measure(engines, large, args.statements, args.recoveries, 10**9)
        print(f"topic of {args.commits} commits ({partitions} partitions, built in {built:.0f} s): "
              f"statement {before[0]:.3f} s ({before[0] / base[0]:.2f}x), recovery {before[1]:.3f} s "
              f"({before[1] / base[1]:.2f}x)", flush=True)
        took, done = timed(large.compact, "events")
        print(f"compaction: {done.partitions_before} partitions -> {done.partitions_after} in {took:.1f} s "
              f"({done.rows} rows rewritten)", flush=True)
        after = measure(engines, large, args.statements, args.recoveries, 2 * 10**9)
        again = measure(engines, small, args.statements, args.recoveries, 3 * 10**9)    # the baseline, late
        base = (min(base[0], again[0]), min(base[1], again[1]))
        print(f"topic of {args.small} commits, again: statement {again[0]:.3f} s, recovery {again[1]:.3f} s "
              "(the baseline is the lower of the two)")
        print(f"compacted: statement {after[0]:.3f} s ({after[0] / base[0]:.2f}x, target <= 1.2x), recovery "
              f"{after[1]:.3f} s ({after[1] / base[1]:.2f}x, target <= 1.2x)")


if __name__ == "__main__":
    main()
