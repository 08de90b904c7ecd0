#!/usr/bin/env python3
"""Run every benchmark in this folder, each printing its own ratios against a baseline measured in the same run.

    ./dev bench [--rows N]        (extra arguments go to every benchmark)
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
BENCHMARKS = ["dedup_vs_plain_insert.py", "small_statements.py", "producer_send.py", "topic_size.py"]

failed = False
for name in BENCHMARKS:
    print(f"== {name}", flush=True)
    failed |= subprocess.run([sys.executable, str(HERE / name), *sys.argv[1:]]).returncode != 0
sys.exit(1 if failed else 0)
