#!/usr/bin/env python3
"""Targets: the state's cost follows what changed, not everything that ever existed (issue 14).

1. A --rows-entry statement touching --touched producers, with --many producers in the state vs with --touched
   (target <= 1.2x), and recovery (snapshot chain + replay, as a process does at a topic's first use) with --many
   vs --touched producers (reported, with the time per million producers).
2. A steady stream of --batch-entry statements over --producers producers (each statement the next --batch
   producers, round robin; default policies: a snapshot every 1000 entries): rows written to producer_sequences per
   1,000 entries (target: about the producers that changed, not --producers per snapshot), and the rows it holds
   after --statements statements vs after 100 (target <= 2x).

    python benchmarks/state_size.py [--engine duckdb|spark] [--many 1000000] [--statements 10000]
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from common import Engines, median, timed  # noqa: E402

STATEMENT = "INSERT INTO events SELECT payload FROM batch WHERE is_not_dup(producer, seq)"


def batch(engines: Engines, session, query: str) -> None:
    """Make the view ``batch`` the rows of ``query`` (Spark SQL), computed once: the next statement's source."""
    if engines.spark is not None:
        engines.spark.sql(query).cache().createOrReplaceTempView("batch")
        return
    engines.raw(session, f"CREATE OR REPLACE TABLE batch AS {query}")


def rows(producers: str, seq: str, count: int) -> str:
    return (f"SELECT 'x' AS payload, 'producer-' || CAST({producers} AS STRING) AS producer, "
            f"CAST({seq} AS BIGINT) AS seq FROM range(0, {count}) AS r(i)")


class StateCase:
    """A session whose topic's state holds ``many`` producers, and the statements that touch ``touched`` of them.
    Two cases run in turn, a statement each (``main``), so that what else the machine does falls on both alike: run
    one after the other, the first case's statements met a quieter or busier machine than the second's, and one
    code measured 0.95x to 2.15x."""

    def __init__(self, engines: Engines, many: int, touched: int, entries: int):
        self.engines, self.many, self.touched, self.entries, self.sent = engines, many, touched, entries, 0
        self.session = engines.fresh()
        self.database = engines.current()
        self.session.create_topic("events", {"payload": "STRING"})
        batch(engines, self.session, rows("i", "0", many))
        self.session.sql(STATEMENT)                         # every producer once: id 0, and a full snapshot

    def statement(self) -> float:
        """One statement's seconds: the next ``entries`` ids of the touched producers."""
        self.engines.use(self.database)
        per = self.entries // self.touched
        batch(self.engines, self.session,
              rows(f"i % {self.touched}", f"1 + {self.sent * per} + floor(i / {self.touched})", self.entries))
        self.sent += 1
        seconds, result = timed(self.session.sql, STATEMENT)
        assert result.written == self.entries, result
        return seconds

    def recovery(self) -> float:
        """A new session's first read of the state: snapshot chain and replay."""
        self.engines.use(self.database)
        self.session.writer.forget()
        with self.session.writer:
            seconds, state = timed(self.session.writer.state, self.session.ref("events"))
        assert state.marks.num_rows == self.many
        return seconds


def stream(engines: Engines, producers: int, size: int, statements: int) -> dict:
    session = engines.fresh()
    session.create_topic("events", {"payload": "STRING"}, snapshot_interval_seconds=0)
    written_rows, after_100 = 0, None
    rounds = producers // size
    for k in range(statements):
        first, lap = (k % rounds) * size, k // rounds
        batch(engines, session, rows(f"{first} + i", str(lap), size))
        result = session.sql(STATEMENT)
        if result.snapshot_id is not None:
            written_rows += 1 + session.sql(
                f"SELECT producers FROM producer_sequences WHERE topic = '{session.ref('events').key}' "
                f"AND producer IS NULL AND snapshot_id = {result.snapshot_id}").rows[0][0]
        if k + 1 == 100:
            after_100 = session.stats("events")["catalog"]["snapshot_rows"]
    held = session.stats("events")["catalog"]
    session.close()
    return {"per_1000": written_rows / (statements * size / 1000), "after_100": after_100,
            "after_all": held["snapshot_rows"], "snapshots_held": held["snapshots"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb")
    ap.add_argument("--many", type=int, default=1_000_000)
    ap.add_argument("--touched", type=int, default=1_000)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=9, help="statements of each case, in turn")
    ap.add_argument("--producers", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--statements", type=int, default=None, help="default: 10000 on DuckDB, 1000 on Spark")
    args = ap.parse_args()
    statements = args.statements or (10_000 if args.engine == "duckdb" else 1_000)
    if statements < 100:
        ap.error("--statements must be at least 100: the rows held are compared with those after 100")
    with tempfile.TemporaryDirectory() as tmp:
        engines = Engines(args.engine, pathlib.Path(tmp))
        small = StateCase(engines, args.touched, args.touched, args.rows)
        large = StateCase(engines, args.many, args.touched, args.rows)
        times = {small: [], large: []}
        for run in range(args.runs + 1):                    # the first statements warm the sessions up
            for case in (small, large) if run % 2 else (large, small):
                seconds = case.statement()
                if run:
                    times[case].append(seconds)
        pairs = [b / a for a, b in zip(times[small], times[large])]
        print(f"[{args.engine}] a {args.rows}-entry statement touching {args.touched} producers: "
              f"{median(times[large]):.3f} s with {args.many} producers in the state, {median(times[small]):.3f} s "
              f"with {args.touched}: {median(times[large]) / median(times[small]):.2f}x (target <= 1.2x; the "
              f"median of {args.runs} paired ratios {median(pairs):.2f}x)")
        recovered = {case: median([case.recovery() for _ in range(3)]) for case in (small, large)}
        print(f"[{args.engine}] recovery: {recovered[large]:.3f} s with {args.many} producers, "
              f"{recovered[small]:.3f} s with {args.touched}: {recovered[large] / recovered[small]:.1f}x, "
              f"{recovered[large] / args.many * 1e6:.2f} s per million producers")
        for case in (small, large):
            case.session.close()
        s = stream(engines, args.producers, args.batch, statements)
        print(f"[{args.engine}] a stream of {statements} {args.batch}-entry statements over {args.producers} "
              f"producers: {s['per_1000']:.0f} producer_sequences rows written per 1,000 entries (about 1,000 "
              f"producers change per 1,000 entries; a full snapshot each time would be {args.producers + 1})")
        print(f"[{args.engine}] producer_sequences rows held: {s['after_100']} after 100 statements, "
              f"{s['after_all']} after {statements} ({s['snapshots_held']} snapshots): "
              f"{s['after_all'] / s['after_100']:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
