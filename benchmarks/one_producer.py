#!/usr/bin/env python3
"""One producer, many entries (a backfill from one source), on a warm session:

- target: a statement whose last entry is invalid (a NULL id) fails in at most 2x a plain INSERT of the same rows:
  an error costs about a read of the source, not the whole statement (sort, decision, staged rows);
- reported: the valid statement vs the plain INSERT. All of one producer's entries are decided in one task (the
  window plan distributes by producer), so a lone producer gets one core of the machine.

The rows are generated (``range``) before the clock starts, one view with the invalid entry and one without;
medians of --runs.

    python benchmarks/one_producer.py [--engine duckdb|spark] [--rows 10000000] [--runs 3]
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from common import Engines, median, timed  # noqa: E402

VIEW = ("CREATE OR REPLACE TEMPORARY VIEW {name} AS SELECT 'p' AS producer, {seq} AS seq, 'payload' AS payload "
        "FROM range({rows}) AS r(id)")
DEDUP = "INSERT INTO events SELECT payload FROM {name} WHERE is_not_dup(producer, seq)"
PLAIN = "INSERT INTO plain SELECT payload, producer, seq FROM good"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    from seqdedup import InvalidEntryError

    with tempfile.TemporaryDirectory() as tmp:
        engines = Engines(args.engine, pathlib.Path(tmp))
        plain, valid, failing = [], [], []
        for run in range(args.runs):
            session = engines.fresh()
            session.create_topic("events", {"payload": "STRING"})
            using = " USING parquet" if engines.spark is not None else ""
            engines.raw(session, f"CREATE TABLE plain (payload STRING, producer STRING, seq BIGINT){using}")
            engines.raw(session, VIEW.format(name="good", seq="id", rows=args.rows))
            engines.raw(session, VIEW.format(name="bad", seq=f"IF(id = {args.rows - 1}, NULL, id)", rows=args.rows))
            plain.append(timed(engines.raw, session, PLAIN)[0])
            seconds, error = timed(_error, session, DEDUP.format(name="bad"))
            if not isinstance(error, InvalidEntryError):
                sys.exit(f"the statement with a NULL id was not refused as invalid: {error!r}")
            failing.append(seconds)
            seconds, result = timed(session.sql, DEDUP.format(name="good"))
            if result.written != args.rows:
                sys.exit(f"wrote {result.written} entries of {args.rows}")
            valid.append(seconds)
            session.close()
            print(f"run {run + 1}: plain INSERT {plain[-1]:.2f} s, the failing statement {failing[-1]:.2f} s, "
                  f"the statement {valid[-1]:.2f} s", flush=True)
    base = median(plain)
    ratio = median(failing) / base
    print(f"{args.engine}, {args.rows:,} entries of one producer, medians of {args.runs}: plain INSERT {base:.2f} s")
    print(f"  a statement with an invalid last entry fails in {median(failing):.2f} s: {ratio:.2f}x the plain "
          f"INSERT (target 2x: {'met' if ratio <= 2 else 'not met'})")
    print(f"  the valid statement {median(valid):.2f} s: {median(valid) / base:.2f}x the plain INSERT (reported)")


def _error(session, statement: str) -> Exception | None:
    """The error ``statement`` raises, None if it succeeds."""
    try:
        session.sql(statement)
    except Exception as error:      # noqa: BLE001 (the caller checks its kind, outside the clock)
        return error
    return None


if __name__ == "__main__":
    main()
