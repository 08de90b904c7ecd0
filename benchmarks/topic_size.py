#!/usr/bin/env python3
"""Targets: the cost of a statement, and of recovery, does not grow with the topic.

- a dedup statement of --rows entries into a topic of --small entries vs one of --large entries (target <= 1.1x);
- recovery (rebuilding the state: last snapshot + replay) for the large topic vs the small one, same snapshot
  interval (target <= 1.2x);
- against the usual alternative, an INSERT with an anti-join on (producer, sequence_id) against the large topic
  (which also misses in-statement repeats): the statement should be at least 2x faster.

The topics are built with DuckDB's own INSERT (10,000 producers, 200-byte payloads), each snapshotted every
--interval entries; the statement continues every producer's ids with 10% retransmits. Prints times and ratios.

    python benchmarks/topic_size.py [--small 1000000] [--large 20000000] [--rows 1000000]
"""
from __future__ import annotations

import argparse
import pathlib
import shutil
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from common import timed  # noqa: E402

import seqdedup  # noqa: E402

PRODUCERS = 10_000


def build(path: pathlib.Path, entries: int, interval: int) -> None:
    """A topic of `entries` entries, its catalog rows written by seqdedup, its bulk written directly."""
    with seqdedup.connect(str(path)) as s:
        s.create_topic("events", {"payload": "STRING"}, snapshot_interval_entries=interval,
                       snapshot_interval_seconds=0)
        s.adapter.execute(
            f"INSERT INTO events SELECT repeat('x', 200), 'producer-' || (i % {PRODUCERS}), i // {PRODUCERS}, "
            f"i // {PRODUCERS}, i + 1, now()::TIMESTAMP, 1 FROM range({entries - interval // 2}) r(i)")
        s.snapshot("events")     # commit 2; the last snapshot sits half an interval before the end, as in use
        s.adapter.execute(
            f"INSERT INTO events SELECT repeat('x', 200), 'producer-' || (i % {PRODUCERS}), i // {PRODUCERS}, "
            f"i // {PRODUCERS}, i + 1, now()::TIMESTAMP, 3 FROM range({entries - interval // 2}, {entries}) r(i)")


def staging(session, entries: int, rows: int) -> None:
    base = entries // PRODUCERS
    session.adapter.execute(
        f"CREATE OR REPLACE TEMP TABLE staging AS SELECT 'producer-' || (i % {PRODUCERS}) AS producer, "
        f"CASE WHEN i % 10 = 0 THEN {base} - 1 ELSE {base} + i // {PRODUCERS} END AS seq, repeat('y', 200) AS payload "
        f"FROM range({rows}) r(i)")


def measure(path: pathlib.Path, entries: int, rows: int) -> dict[str, float]:
    with seqdedup.connect(str(path)) as s:
        staging(s, entries, rows)
        s.adapter.execute("BEGIN")
        anti, _ = timed(s.adapter.execute,
                        f"INSERT INTO events SELECT payload, producer, seq, seq, {entries} + row_number() OVER (), "
                        "now()::TIMESTAMP, 4 FROM staging st WHERE NOT EXISTS (SELECT 1 FROM events e "
                        "WHERE e._producer = st.producer AND e._sequence_id = st.seq)")
        s.adapter.execute("ROLLBACK")
        recovery, _ = timed(lambda: s.producer_state("events"))
        statement, result = timed(s.sql, "INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq)")
    return {"statement": statement, "recovery": recovery, "anti_join_insert": anti, "written": result.written}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=1_000_000)
    ap.add_argument("--large", type=int, default=20_000_000)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--interval", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for name, entries in (("small", args.small), ("large", args.large)):
            path = pathlib.Path(tmp) / f"{name}.duckdb"
            build(path, entries, args.interval)
            runs = []
            for _ in range(2):                     # every run starts from a copy of the same topic
                copy = pathlib.Path(tmp) / "run.duckdb"
                shutil.copy(path, copy)
                runs.append(measure(copy, entries, args.rows))
                copy.unlink()
            results[name] = {k: min(r[k] for r in runs) if k != "written" else runs[0][k] for k in runs[0]}
            path.unlink()
    small, large = results["small"], results["large"]
    expected = args.rows - args.rows // 10          # the retransmits (every 10th) are duplicates
    if small["written"] != expected or large["written"] != expected:
        sys.exit(f"wrong answer: wrote {small['written']} and {large['written']}, expected {expected}")
    print(f"rows={args.rows} small_topic={args.small} large_topic={args.large} interval={args.interval}")
    for name, r in results.items():
        print(f"{name}: statement_s={r['statement']:.3f} recovery_s={r['recovery']:.3f} "
              f"anti_join_insert_s={r['anti_join_insert']:.3f} written={r['written']}")
    growth = large["statement"] / small["statement"]
    recovery = large["recovery"] / small["recovery"]
    versus = large["anti_join_insert"] / large["statement"]
    print(f"statement_large_over_small={growth:.2f} target<=1.10 {'MET' if growth <= 1.1 else 'NOT MET'}")
    print(f"recovery_large_over_small={recovery:.2f} target<=1.20 {'MET' if recovery <= 1.2 else 'NOT MET'}")
    print(f"anti_join_over_statement_on_large={versus:.2f} target>=2.00 {'MET' if versus >= 2 else 'NOT MET'}")


if __name__ == "__main__":
    main()
