#!/usr/bin/env python3
"""Reported: rows a second with and without deduplication as the number of producers in one statement grows from 1
to 1,000,000 (issue 41's chart; docs/performance.md draws it from this output).

Each point is a statement of --rows entries (a 100-byte payload each, 5% of them sent twice) spread evenly over the
producers, into an empty topic, against a plain INSERT of the same rows into a table of the same shape, on a fresh
database each; the rows are a view over ``range`` (computed as read, the same for both). Prints one line per point,
then the chart as a Mermaid block (bars: plain INSERT; line: the statement), in millions of rows a second.

    python benchmarks/producers_sweep.py [--engine duckdb|spark] [--rows 5000000] [--producers 1,100,10000,1000000]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from common import Engines, median, timed  # noqa: E402

#: ``rows`` entries of ``producers`` producers (ids 0, 1, ... each), then the first 5% of them again.
VIEW = ("CREATE OR REPLACE TEMPORARY VIEW sweep AS "
        "SELECT concat('p', id % {producers}) AS producer, id DIV {producers} AS seq, lpad(CAST(id AS STRING), 100, 'x') "
        "AS payload FROM range({rows}) AS r(id) UNION ALL "
        "SELECT concat('p', id % {producers}), id DIV {producers}, lpad(CAST(id AS STRING), 100, 'x') "
        "FROM range({repeats}) AS r(id)")
DEDUP = "INSERT INTO events SELECT payload FROM sweep WHERE is_not_dup(producer, seq)"
PLAIN = "INSERT INTO plain SELECT payload, producer, seq FROM sweep"


def _label(count: int) -> str:
    return f"{count // 1_000_000}M" if count >= 1_000_000 else f"{count // 1000}k" if count >= 1000 else str(count)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb")
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--producers", default="1,100,10000,1000000")
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    counts = [int(c) for c in args.producers.split(",")]
    print(f"engine={args.engine} cores={os.cpu_count()} load_average={os.getloadavg()[0]:.2f} rows={args.rows} "
          f"runs={args.runs} (medians)")
    points = []
    with tempfile.TemporaryDirectory() as tmp:
        engines = Engines(args.engine, pathlib.Path(tmp))
        for count in counts:
            plain, dedup = [], []
            for _ in range(args.runs):
                session = engines.fresh()
                session.create_topic("events", {"payload": "STRING"})
                using = " USING parquet" if engines.spark is not None else ""
                engines.raw(session, f"CREATE TABLE plain (payload STRING, producer STRING, seq BIGINT){using}")
                engines.raw(session, VIEW.format(producers=count, rows=args.rows, repeats=args.rows // 20))
                plain.append(timed(engines.raw, session, PLAIN)[0])
                seconds, result = timed(session.sql, DEDUP)
                if result.written != args.rows:
                    sys.exit(f"{count} producers: wrote {result.written} entries of {args.rows}")
                dedup.append(seconds)
                session.close()
            sent = args.rows + args.rows // 20
            point = (count, sent / median(plain) / 1e6, sent / median(dedup) / 1e6)
            points.append(point)
            print(f"producers={count} plain_rows_per_s={point[1] * 1e6:,.0f} dedup_rows_per_s={point[2] * 1e6:,.0f} "
                  f"ratio={point[1] / point[2]:.2f}", flush=True)
    top = max(p[1] for p in points)
    print("```mermaid")
    print("xychart-beta")
    print(f'    title "{args.engine}, {_label(args.rows)} entries: million rows a second, by producers"')
    print(f"    x-axis [{', '.join(repr(_label(p[0])).replace(chr(39), chr(34)) for p in points)}]")
    print(f'    y-axis "million rows a second" 0 --> {top * 1.2:.1f}')
    print(f"    bar [{', '.join(f'{p[1]:.2f}' for p in points)}]")
    print(f"    line [{', '.join(f'{p[2]:.2f}' for p in points)}]")
    print("```")


if __name__ == "__main__":
    main()
