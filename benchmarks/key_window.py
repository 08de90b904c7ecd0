#!/usr/bin/env python3
"""Targets (issue 44, R20): the standard workload's 5M rows through the key window, ``is_new(producer, seq)`` on a
topic whose window holds --window keys (10M), cost at most 1.5x the same rows through ``is_not_dup(producer, seq)``
(the workload with producer ids, ``dedup_vs_plain_insert.py``'s starting state); the window's state (its keys in
memory, and the rows of a full snapshot of them) bounded by the window: --window keys against a tenth of them at
most 10x; and a new session's recovery of the full window, reported.

The window's topic starts as the producer ids' does, its 1M entries written through ``is_new(producer, seq)``, then
filled with other keys up to --window (written around the measured statement, before the clock starts). So the
statement finds the same retries in the window that the producer ids' finds below the marks. The variants run in
turn, --runs times, the best of each kept (wall seconds; on DuckDB the process's CPU seconds too).

    python benchmarks/key_window.py [--engine duckdb|spark] [--window 10000000] [--entries] [--runs 2]
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
from ledger import recovery_seconds  # noqa: E402

TARGET, STATE_TARGET = 1.5, 10.0
KEYED = STATEMENTS["unordered"][0].replace("is_not_dup(producer, seq)", "is_new(producer, seq)")


class Windows(Engine):
    """``Engine``'s starting state, and beside it the key window's: the topic written by key, filled to ``keys``."""

    entries = False     # the window in entries (key_window_entries = the keys it is filled with), not in time

    def keyed(self, keys: int):
        """A session on a new copy of the key window's starting state of ``keys`` keys."""
        return self.copy_of(self.tmp / f"window{keys}.duckdb" if self.name == "duckdb" else None,
                            lambda s: self._fill(s, keys))

    def _fill(self, s, keys: int) -> None:
        self._views(s)
        window = {"key_window_entries": keys, "producer_inactivity_timeout": "never"} if self.entries else {}
        s.create_topic("events", {"arrival": "BIGINT", "payload": "STRING"}, snapshot_interval_entries=10_000_000,
                       **window)
        written = s.sql("INSERT INTO events SELECT position, payload FROM topic_file "
                        "WHERE is_new(producer, seq) ORDER BY position").written
        if keys > written:      # other keys, none of the workload's ((producer, seq) has two parts: these one)
            s.sql(f"INSERT INTO events SELECT id, 'filled' FROM range({keys - written}) AS r(id) "
                  "WHERE is_new(concat('filled', CAST(id AS STRING)))")
        s.snapshot("events")


def state_size(session) -> tuple[int, int]:
    """The window's keys in memory (bytes of the marks) and the rows of its last full snapshot."""
    state = session.state("events")
    rows = session.sql("SELECT count(*) FROM producer_sequences WHERE snapshot_id = "
                       f"{state.header.snapshot_id} AND producer IS NOT NULL").rows[0][0]
    return state.marks.table.nbytes, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    workload_arguments(ap, runs=2)
    ap.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb")
    ap.add_argument("--window", type=int, default=10_000_000, help="keys in the window before the statement")
    ap.add_argument("--entries", action="store_true",
                    help="a window in entries (key_window_entries = --window): full, so the statement's new keys "
                         "push as many out; else in time")
    args = ap.parse_args()
    make_workload(args.data, args.rows, args.producers, args.topic_rows)
    wall: dict[str, list[float]] = {"producer_ids": [], "key_window": []}
    cpu: dict[str, list[float]] = {name: [] for name in wall}
    dropped: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        engine = Windows(args.engine, args.data.resolve(), pathlib.Path(tmp))
        engine.entries = args.entries
        for _ in range(args.runs):
            for name, statement in (("producer_ids", STATEMENTS["unordered"][0]), ("key_window", KEYED)):
                s = engine.keyed(args.window) if name == "key_window" else engine.fresh()
                s.state("events")
                seconds, used, result = timed_cpu(s.sql, statement)
                wall[name].append(seconds)
                cpu[name].append(used)
                dropped[name] = result.duplicates
                s.close()
        sizes = {}
        for keys in (args.window // 10, args.window):
            s = engine.keyed(keys)
            sizes[keys] = state_size(s)
            recovered = recovery_seconds(engine, s)
        print(f"engine={args.engine} cores={os.cpu_count()} load_average={os.getloadavg()[0]:.2f} rows={args.rows} "
              f"window={args.window} in {'entries' if args.entries else 'time'} runs={args.runs} "
              f"dropped: producer_ids={dropped['producer_ids']} key_window={dropped['key_window']}")
        print(ratio_line("key_window", "key_window", "producer_ids", wall, cpu, TARGET, args.engine == "duckdb"))
        (small_bytes, small_rows), (large_bytes, large_rows) = sizes[args.window // 10], sizes[args.window]
        for what, small, large in (("memory_bytes", small_bytes, large_bytes), ("snapshot_rows", small_rows, large_rows)):
            ratio = large / small
            print(f"state {what}: {large} with {args.window} keys, {small} with {args.window // 10}: {ratio:.2f}x "
                  f"target<={STATE_TARGET:.0f}x {'MET' if ratio <= STATE_TARGET else 'NOT MET'}")
        print(f"recovery of a window of {args.window} keys: {recovered:.3f} s (reported)")


if __name__ == "__main__":
    main()
