#!/usr/bin/env python3
"""Run every benchmark that applies to an engine, each printing its own ratios against a baseline measured in the
same run. A benchmark that crashes makes the exit status non-zero; a missed target is printed, not an error.

    ./dev bench [--engine duckdb|spark]

Each script takes its own sizes (see its --help); run one alone to change them, e.g.
``.venv/bin/python benchmarks/topic_size.py --engine spark --large 20000000``.

Not run from here: ``benchmarks/ci_time.py``, which times ``.ci/run`` on a clean clone (about half an hour).
"""
from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
# (script, engines it measures, whether it takes --engine)
BENCHMARKS = [
    ("dedup_vs_plain_insert.py", {"duckdb", "spark"}, True),
    ("small_statements.py", {"duckdb", "spark"}, True),
    ("producer_send.py", {"duckdb", "spark"}, True),
    ("topic_size.py", {"duckdb", "spark"}, True),
    ("state_size.py", {"duckdb", "spark"}, True),
    ("one_producer.py", {"duckdb", "spark"}, True),
    ("producers_sweep.py", {"duckdb", "spark"}, True),
    ("key_window.py", {"duckdb", "spark"}, True),
    ("composite_ids.py", {"duckdb", "spark"}, True),
    ("foreach_batch.py", {"spark"}, False),
    ("spark_startup.py", {"spark"}, False),
    ("compaction.py", {"spark"}, False),
    ("cli_remote.py", {"spark"}, False),
    ("drivers_contention.py", {"spark"}, False),     # (12 minutes: one driver alone, then three at once)
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb")
    args = ap.parse_args()
    failed = []
    for name, engines, takes_engine in BENCHMARKS:
        if args.engine not in engines:
            continue
        print(f"== {name}", flush=True)
        command = [sys.executable, str(HERE / name), *(["--engine", args.engine] if takes_engine else [])]
        if subprocess.run(command).returncode != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
