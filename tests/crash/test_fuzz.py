"""The crash fuzzer (fuzz.py) in its short form, on every engine: writer processes killed with SIGKILL at random
steps and moments, restarted, and checked against the reference model after every restart. The long form is
``python -m tests.crash.fuzz --engine ENGINE --iterations N`` (see docs/reliability.md).

The seed is fixed so that a failure can be replayed; ``SEQDEDUP_FUZZ_SEED`` picks another.
"""
from __future__ import annotations

import os

from .fuzz import run

#: Writer processes per run: a Spark one starts a JVM (seconds), a DuckDB one a Python (a fraction of one).
ITERATIONS = {"duckdb": 40, "spark": 4}


def test_crash_fuzz_finds_no_violation(engine, tmp_path):
    seed = int(os.environ.get("SEQDEDUP_FUZZ_SEED", "20261123"))
    stats = run(engine.name, ITERATIONS[engine.name], seed, tmp_path)
    print(stats.line(ITERATIONS[engine.name]))
    assert stats.violations == []
    assert sum(stats.kills.values()) >= ITERATIONS[engine.name] // 2, stats.kills   # the writers were attacked
    assert stats.operations > 0                                                   # and got work done
