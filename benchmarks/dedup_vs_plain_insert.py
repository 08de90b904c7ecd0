#!/usr/bin/env python3
"""Target: ``INSERT ... WHERE is_not_dup`` costs at most 1.3x a plain ``INSERT`` of the same rows (DuckDB).

Workload: the standard one (shared/bench/make_workload.py): 5M rows, 10,000 producers, 200-byte payloads, about
10% retransmits of ids already in the topic (1M rows) and 5% repeats inside the statement. Each run starts from
a copy of the same database file (topic loaded, state snapshotted), so every run does the same work. Both
statements read the same Parquet file; the plain one writes the same columns into a table of the same shape.
Two dedup statements are measured: without ORDER BY (entries arrive in id order: the workload's `new_entries`)
and with ORDER BY arrival (`new_entries_ordered_by_arrival`). Prints the times (best of --runs), the ratios, and
checks the number written against the workload's answers.

    python benchmarks/dedup_vs_plain_insert.py [--rows 5000000] [--runs 3]
"""
from __future__ import annotations

import argparse
import pathlib
import shutil
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from common import make_workload, timed  # noqa: E402

import seqdedup  # noqa: E402
from seqdedup.catalog.state import literal  # noqa: E402


def prepare(path: pathlib.Path, data: pathlib.Path) -> None:
    with seqdedup.connect(str(path)) as s:
        s.create_topic("events", {"arrival": "BIGINT", "payload": "STRING"}, snapshot_interval_entries=10_000_000)
        topic = literal(str(data / "topic.parquet")).sql("duckdb")
        s.sql(f"INSERT INTO events SELECT position, payload FROM read_parquet({topic}) "
              "WHERE is_not_dup(producer, seq) ORDER BY position", dialect="duckdb")
        s.snapshot("events")
        s.sql("CREATE TABLE plain AS SELECT * FROM events WHERE false", dialect="duckdb")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--producers", type=int, default=10_000)
    ap.add_argument("--topic-rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--data", type=pathlib.Path, default=pathlib.Path("bench-data"))
    args = ap.parse_args()
    expected = make_workload(args.data, args.rows, args.producers, args.topic_rows)
    staging = literal(str(args.data / "staging.parquet")).sql("duckdb")
    statements = {
        "unordered": (f"INSERT INTO events SELECT arrival, payload FROM read_parquet({staging}) "
                      "WHERE is_not_dup(producer, seq)", expected["new_entries"]),
        "ordered": (f"INSERT INTO events SELECT arrival, payload FROM read_parquet({staging}) "
                    "WHERE is_not_dup(producer, seq) ORDER BY arrival", expected["new_entries_ordered_by_arrival"]),
    }
    plain_sql = (f"INSERT INTO plain (arrival, payload, _producer, _sequence_id, _highest_sequence_id, _position, "
                 f"_publish_time) SELECT arrival, payload, producer, seq, seq, arrival, now() FROM read_parquet({staging})")
    times: dict[str, list[float]] = {"plain": [], "unordered": [], "ordered": []}
    written: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = pathlib.Path(tmp) / "base.duckdb"
        prepare(base, args.data)
        for run in range(args.runs):
            for name in times:
                db = pathlib.Path(tmp) / f"run{run}.duckdb"
                shutil.copy(base, db)
                with seqdedup.connect(str(db)) as s:
                    if name == "plain":
                        seconds, _ = timed(s.adapter.execute, plain_sql)
                    else:
                        seconds, result = timed(s.sql, statements[name][0], dialect="duckdb")
                        written[name] = result.written
                times[name].append(seconds)
                db.unlink()
    plain = min(times["plain"])
    print(f"rows={args.rows} producers={args.producers} topic_rows={args.topic_rows} runs={args.runs}")
    print(f"plain_insert_s={plain:.3f}")
    failed = False
    for name, (_, answer) in statements.items():
        ratio = min(times[name]) / plain
        ok = written[name] == answer
        failed |= not ok
        print(f"{name}: dedup_insert_s={min(times[name]):.3f} written={written[name]} expected={answer} "
              f"answer_ok={ok} ratio_dedup_over_plain={ratio:.2f} target<=1.30 {'MET' if ratio <= 1.3 else 'NOT MET'}")
    if failed:
        sys.exit("a dedup insert wrote the wrong number of entries")


if __name__ == "__main__":
    main()
