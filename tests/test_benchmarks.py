"""Every DuckDB benchmark runs to its end at a tiny size and checks its own answer (each script exits non-zero on a
wrong count): a script that breaks is found by the tests, not by the next person to measure. ``benchmarks/ledger.py
--ledger-rows`` stayed broken for four days (2026-12-01 to 12-05) because nothing ran it.

The ratios printed at these sizes mean nothing and are not read. Spark's paths are left to ``./dev bench --engine
spark``: a JVM per script would cost minutes of CI.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _benchmarks_common():
    """``benchmarks/common.py``, loaded by its path (its name, ``common``, stays off this process's import path)."""
    spec = importlib.util.spec_from_file_location("seqdedup_benchmarks_common", BENCHMARKS / "common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Where the scripts look for the standard workload's generator (beside the clone, or ``SEQDEDUP_WORKLOAD``).
WORKLOAD_SCRIPT = _benchmarks_common().WORKLOAD_SCRIPT

#: The standard workload at a size that takes a second (its options, from ``common.workload_arguments``).
WORKLOAD = ["--rows", "20000", "--producers", "100", "--topic-rows", "5000", "--runs", "1", "--data", "data"]

#: (script, its arguments at a tiny size; those that start with WORKLOAD read the standard workload)
TINY = [
    ("dedup_vs_plain_insert.py", WORKLOAD),
    ("plan_steps.py", WORKLOAD),
    ("ledger.py", [*WORKLOAD, "--ledger-rows", "1000"]),
    ("key_window.py", [*WORKLOAD, "--window", "20000"]),
    ("composite_ids.py", WORKLOAD),
    ("small_statements.py", ["--statements", "20", "--pairs", "3"]),
    ("producer_send.py", ["--messages", "10", "--async-messages", "2000"]),
    ("topic_size.py", ["--small", "10000", "--large", "20000", "--rows", "10000", "--interval", "1000", "--runs", "1",
                       "--recoveries", "1"]),
    ("state_size.py", ["--many", "2000", "--touched", "100", "--rows", "500", "--runs", "1", "--producers", "100",
                       "--batch", "10", "--statements", "120"]),
    ("one_producer.py", ["--rows", "20000", "--runs", "1", "--producers", "100"]),
    ("one_producer.py", ["--rows", "20000", "--runs", "1", "--producers", "100", "--id-parts", "2"]),
    ("producers_sweep.py", ["--rows", "20000", "--producers", "1,100", "--runs", "1"]),
    ("statement_path.py", ["--statements", "2"]),
]


@pytest.mark.parametrize("script, arguments", TINY, ids=[script for script, _ in TINY])
def test_a_benchmark_runs_to_its_end_on_duckdb(script, arguments, tmp_path):
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), *arguments], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    if arguments[:len(WORKLOAD)] == WORKLOAD and not WORKLOAD_SCRIPT.exists():
        # (a clone without the steering folder beside it: the script must say what is missing and how to give it)
        assert done.returncode != 0 and "SEQDEDUP_WORKLOAD" in done.stderr, done.stderr[-2000:]
        return
    assert done.returncode == 0, f"{script} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert done.stdout.strip(), f"{script} printed nothing"


#: The scripts not run here: Spark's alone (a JVM each), the CI timer (a whole clean clone) and the shared pieces.
NOT_RUN = {"foreach_batch.py", "spark_startup.py", "compaction.py", "cli_remote.py", "drivers_contention.py",
           "ci_time.py", "run_all.py", "common.py"}


def test_every_benchmark_is_run_here_or_named_as_not():
    scripts = {path.name for path in BENCHMARKS.glob("*.py")}
    tiny = {script for script, _ in TINY}
    assert scripts - tiny - NOT_RUN == set(), "a new benchmark: add it to TINY (DuckDB) or to NOT_RUN, with why"
    assert (tiny | NOT_RUN) - scripts == set(), "a benchmark named here is gone"
