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

It prints the key window's floor beside them: the least SQL that does what ``is_new`` must (``floors``), with R20's
text key and with a 128-bit one, over the same producer-id statement. The target is measured against a statement
that joins no window; a ratio the floor itself is above is one that no plan with that key can meet.

    python benchmarks/key_window.py [--engine duckdb|spark] [--window 10000000] [--entries] [--runs 2]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import shutil
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from common import make_workload, ratio_line, timed_cpu, workload_arguments  # noqa: E402
from dedup_vs_plain_insert import STATEMENTS, Engine  # noqa: E402
from ledger import recovery_seconds  # noqa: E402
import duckdb  # noqa: E402
from sqlglot import exp  # noqa: E402

from seqdedup.catalog.state import literal  # noqa: E402
from seqdedup.sql.dialects import read_dialect  # noqa: E402
from seqdedup.sql.key_window import digest  # noqa: E402

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


def floor_keys(engine: str, parts: list[str]) -> dict[str, str]:
    """SQL on ``engine``: the key of ``parts`` as the floor makes it, by kind. ``text`` is R20's key, the producer name
    the topic stores; ``128-bit`` a digest of the same text in 16 bytes (DuckDB's ``md5_number``, a UHUGEINT; Spark
    has no 128-bit integer: the MD5's 16 bytes as BINARY)."""
    made = digest([exp.column(part) for part in parts])         # 'key:' || MD5(<the key's text>)
    text = made.expression.this.sql(read_dialect(engine))
    compact = f"md5_number({text})" if engine == "duckdb" else f"unhex(md5({text}))"
    return {"text": made.sql(read_dialect(engine)), "128-bit": compact}


def floors(engine: Windows, window: int, runs: int, written: int) -> dict[str, list[tuple[float, float]]]:
    """The key window's floor, (wall, CPU) seconds a run for each kind of key (``floor_keys``; the CPU counts on
    DuckDB alone, whose work is this process's): the least SQL that does what ``is_new(producer, seq)`` must, and
    none of what seqdedup adds (no marks in memory, positions, outcome, ledger, payload judgement or snapshot). The
    rows' keys made, the rows whose key is in a table of the window's --window keys left out, one copy of each key
    kept, written with its key: on DuckDB in one transaction on a fresh copy of one file, on Spark into a new Parquet
    table. Each must write the key window statement's ``written`` entries, or the script stops."""
    duck = engine.name == "duckdb"
    sources = {name: f"read_parquet({literal(str(engine.data / f'{name}.parquet')).sql('duckdb')})" if duck
               else f"{name}_file" for name in ("staging", "topic")}
    keys = floor_keys(engine.name, ["producer", "seq"])
    tables = {name: f"window_{i}" for i, name in enumerate(keys)}
    with _floor_session(engine, made=False) as run:
        for name, key in keys.items():
            run(f"CREATE TABLE {tables[name]} AS SELECT DISTINCT {key} AS k FROM {sources['topic']}")
            missing = max(window - _count(run(f"SELECT count(*) FROM {tables[name]}")), 0)
            run(f"INSERT INTO {tables[name]} SELECT {floor_keys(engine.name, ['k'])[name]} FROM "
                f"(SELECT concat('filled', CAST(id AS STRING)) AS k FROM range({missing}) AS r(id))")
    seconds: dict[str, list[tuple[float, float]]] = {name: [] for name in keys}
    for _ in range(runs):
        for name, key in keys.items():
            rows = f"(SELECT arrival, payload, {key} AS k FROM {sources['staging']}) AS r"
            if duck:        # (DuckDB's cheapest way to one copy a key; Spark has no DISTINCT ON)
                statements = ["BEGIN", f"INSERT INTO written SELECT DISTINCT ON (k) arrival, payload, k, 0, 0 FROM "
                              f"{rows} WHERE NOT EXISTS (SELECT 1 FROM {tables[name]} AS w WHERE w.k = r.k)", "COMMIT"]
            else:
                statements = [f"INSERT INTO written SELECT arrival, payload, k, 0, 0 FROM (SELECT r.*, row_number() "
                              f"OVER (PARTITION BY k ORDER BY arrival) AS copy FROM {rows} LEFT ANTI JOIN "
                              f"{tables[name]} AS w ON w.k = r.k) WHERE copy = 1"]
            with _floor_session(engine, made=True) as run:
                run(f"CREATE TABLE written AS SELECT arrival, payload, k, 0 AS id, 0 AS highest FROM {rows} "
                    "WHERE false")
                wall, used, _ = timed_cpu(lambda: [run(statement) for statement in statements])
                seconds[name].append((wall, used))
                if _count(run("SELECT count(*) FROM written")) != written:
                    raise SystemExit(f"the floor of {name} keys wrote other entries than the statement's {written}")
    return seconds


@contextlib.contextmanager
def _floor_session(engine: Windows, made: bool):
    """A function that runs SQL on the floor's tables: on DuckDB in its file (``made``: a fresh copy of it, gone
    after), on Spark in its own database (``made``: without the last run's output)."""
    base = engine.tmp / "floor.duckdb"
    if engine.name != "duckdb":
        engine.spark.sql("CREATE DATABASE IF NOT EXISTS floor")
        engine.spark.sql("USE floor")
        if made:
            engine.spark.sql("DROP TABLE IF EXISTS written")
        yield engine.spark.sql
        return
    path = engine.tmp / "floor_run.duckdb" if made else base
    if made:
        shutil.copy(base, path)
    with duckdb.connect(str(path)) as connection:
        yield connection.execute
    if made:
        path.unlink()


def _count(result) -> int:
    """The one value of a count, from DuckDB (a cursor) or Spark (a DataFrame)."""
    return result.fetchone()[0] if hasattr(result, "fetchone") else result.first()[0]


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
    written = 0
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
                dropped[name], written = result.duplicates, result.written
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
        for name, runs in floors(engine, args.window, args.runs, written).items():
            best, best_cpu = min(w for w, _ in runs), min(c for _, c in runs)
            on_cpu = f" (CPU {best_cpu / min(cpu['producer_ids']):.2f}x)" if args.engine == "duckdb" else ""
            print(f"key_window floor, {name} keys (bare SQL, none of seqdedup's work): {best:.3f} s, "
                  f"{best / min(wall['producer_ids']):.2f}x producer_ids{on_cpu}")


if __name__ == "__main__":
    main()
