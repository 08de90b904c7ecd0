#!/usr/bin/env python3
"""Target (issue 44, R19): the standard workload's 5M rows with two-part ids, ``is_not_dup(producer, (seq DIV 1000,
seq % 1000))`` into a topic created with ``id_parts=2``, cost at most 1.2x the same rows with their integer ids
(``is_not_dup(producer, seq)``, ``dedup_vs_plain_insert.py``'s starting state). The two-part ids order as the
integers do, so both statements write and drop the same entries (the answer is checked against the workload's).
The composite topic starts as the integer one does, its 1M entries written through the same two-part ids. Unordered
and ordered statements; the variants run in turn, --runs times, the best of each kept (wall seconds; on DuckDB the
process's CPU seconds too). With --lsn-like the first part is moved up by 2^40, so that it has 13 digits as a
PostgreSQL LSN of a busy database does (a composite id's text is as long as its parts' digits: ``catalog.ids``).

    python benchmarks/composite_ids.py [--engine duckdb|spark] [--runs 2] [--lsn-like]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from common import make_workload, ratio_line, timed_cpu, workload_arguments  # noqa: E402
from dedup_vs_plain_insert import STATEMENTS, Engine  # noqa: E402

TARGET = 1.2
#: The two parts of an integer id: the same order.
PARTS = "(seq DIV 1000, seq % 1000)"
#: The same, the first part as long as a busy database's LSN (2^40 and up: 13 digits).
LSN_LIKE = "(seq DIV 1000 + 1099511627776, seq % 1000)"


def composite(statement: str, parts: str = PARTS) -> str:
    return statement.replace("is_not_dup(producer, seq)", f"is_not_dup(producer, {parts})")


class Composite(Engine):
    """``Engine``'s starting state, and beside it the same topic of two-part ids."""

    parts = PARTS

    def composite(self):
        """A session on a new copy of the composite topic's starting state."""
        return self.copy_of(self.tmp / "composite.duckdb" if self.name == "duckdb" else None, self._fill)

    def _fill(self, s) -> None:
        self._views(s)
        s.create_topic("events", {"arrival": "BIGINT", "payload": "STRING"}, snapshot_interval_entries=10_000_000,
                       id_parts=2)
        s.sql(composite("INSERT INTO events SELECT position, payload FROM topic_file WHERE is_not_dup(producer, seq) "
                        "ORDER BY position", self.parts))
        s.snapshot("events")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    workload_arguments(ap, runs=2)
    ap.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb")
    ap.add_argument("--lsn-like", action="store_true", help="a first part of 13 digits, as a busy database's LSN")
    args = ap.parse_args()
    expected = make_workload(args.data, args.rows, args.producers, args.topic_rows)
    with tempfile.TemporaryDirectory() as tmp:
        engine = Composite(args.engine, args.data.resolve(), pathlib.Path(tmp))
        engine.parts = LSN_LIKE if args.lsn_like else PARTS
        print(f"engine={args.engine} cores={os.cpu_count()} load_average={os.getloadavg()[0]:.2f} rows={args.rows} "
              f"runs={args.runs} parts={engine.parts}")
        for shape, (statement, answer) in STATEMENTS.items():
            wall: dict[str, list[float]] = {"integer": [], "two_parts": []}
            cpu: dict[str, list[float]] = {name: [] for name in wall}
            for _ in range(args.runs):
                for name in wall:
                    s = engine.composite() if name == "two_parts" else engine.fresh()
                    s.state("events")
                    seconds, used, result = timed_cpu(s.sql, composite(statement, engine.parts)
                                                      if name == "two_parts" else statement)
                    if result.written != expected[answer]:
                        raise SystemExit(f"{shape} {name}: wrote {result.written}, the workload's answer is "
                                         f"{expected[answer]}")
                    wall[name].append(seconds)
                    cpu[name].append(used)
                    s.close()
            print(ratio_line(shape, "two_parts", "integer", wall, cpu, TARGET, args.engine == "duckdb"))


if __name__ == "__main__":
    main()
