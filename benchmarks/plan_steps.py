#!/usr/bin/env python3
"""Reported (DuckDB): where one statement's time goes, step by step. The standard workload's 5M-row statement, without
and with ORDER BY arrival, on a warm session; each query the plan sends is timed in wall seconds and in this
process's CPU seconds (DuckDB's threads work in this process; on a loaded machine CPU time moves far less than wall
time), against a plain INSERT of the same rows in the same run. The profile docs/performance.md gives for the row
plan comes from here.

    python benchmarks/plan_steps.py [--rows 5000000] [--runs 2] [--dropped-entries counts|keys|rows]
                                    [--payload-conflicts ignore|record]

The topic keeps its default policies unless the last two options set them (R16, R18): the ledger's steps beside the
others, for instance with ``--dropped-entries keys --payload-conflicts ignore``.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from common import make_workload, timed_cpu, workload_arguments  # noqa: E402
from dedup_vs_plain_insert import PLAIN, STATEMENTS, Engine  # noqa: E402

from seqdedup.extensions.duckdb import DuckDBAdapter  # noqa: E402


class Traced:
    """The adapter's queries while it is on: (wall s, CPU s, the query's first words)."""

    def __init__(self):
        self.calls: list[tuple[float, float, str]] = []
        self.originals = {name: getattr(DuckDBAdapter, name) for name in ("_run", "fetch_arrow")}

    def __enter__(self):
        for name, original in self.originals.items():
            setattr(DuckDBAdapter, name, self._timed(original))
        return self

    def __exit__(self, *_):
        for name, original in self.originals.items():
            setattr(DuckDBAdapter, name, original)

    def _timed(self, original):
        def call(adapter, query, *args, **kwargs):
            text = query if isinstance(query, str) else adapter.sql(query)
            seconds, cpu, value = timed_cpu(original, adapter, query, *args, **kwargs)
            self.calls.append((seconds, cpu, " ".join(text.split())[:100]))
            return value
        return call


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    workload_arguments(ap, runs=2)
    ap.add_argument("--dropped-entries", choices=["counts", "keys", "rows"], help="the topic's ledger policy (R16)")
    ap.add_argument("--payload-conflicts", choices=["ignore", "record"], help="the topic's conflicts policy (R18)")
    args = ap.parse_args()
    policies = {name: value for name, value in (("dropped_entries", args.dropped_entries),
                                                 ("payload_conflicts", args.payload_conflicts)) if value}
    make_workload(args.data, args.rows, args.producers, args.topic_rows)
    print(f"engine=duckdb cores={os.cpu_count()} load_average={os.getloadavg()[0]:.2f} rows={args.rows} "
          f"runs={args.runs} policies={policies or 'default'} (the run with the least CPU is shown)")
    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine("duckdb", args.data.resolve(), pathlib.Path(tmp))
        plain = []
        for _ in range(args.runs):
            with engine.fresh() as s:
                plain.append(timed_cpu(s.sql, PLAIN)[1])
        print(f"plain INSERT: cpu_s={min(plain):.3f}")
        for name, (statement, _) in STATEMENTS.items():
            best = None
            for _ in range(args.runs):
                with engine.fresh() as s, Traced() as traced:
                    if policies:
                        s.alter_topic("events", **policies)
                    s.state("events")
                    traced.calls.clear()
                    seconds, cpu, _ = timed_cpu(s.sql, statement)
                if best is None or cpu < best[1]:
                    best = (seconds, cpu, list(traced.calls))
            seconds, cpu, calls = best
            print(f"{name}: wall_s={seconds:.3f} cpu_s={cpu:.3f} cpu_over_plain={cpu / min(plain):.2f} "
                  f"queries={len(calls)}")
            for wall, used, text in calls:
                print(f"  cpu_s={used:7.3f} wall_s={wall:7.3f}  {text}")


if __name__ == "__main__":
    main()
