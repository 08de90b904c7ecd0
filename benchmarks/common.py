"""Shared pieces of the benchmarks: the standard workload, timing, and ratio reporting."""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
#: The standard workload generator lives in the steering folder beside the project (shared/bench).
WORKLOAD_SCRIPT = pathlib.Path(os.environ.get("SEQDEDUP_WORKLOAD", HERE.parents[1] / "shared" / "bench" / "make_workload.py"))


def make_workload(out: pathlib.Path, rows: int, producers: int, topic_rows: int) -> dict[str, int]:
    """Write the standard workload (deterministic Parquet) and return its expected answers."""
    if not WORKLOAD_SCRIPT.exists():
        sys.exit(f"the workload generator {WORKLOAD_SCRIPT} is missing; set SEQDEDUP_WORKLOAD to make_workload.py")
    marker = out / f"done-{rows}-{producers}-{topic_rows}.txt"
    if not marker.exists():
        out.mkdir(parents=True, exist_ok=True)
        text = subprocess.run([sys.executable, str(WORKLOAD_SCRIPT), str(out), "--rows", str(rows), "--producers",
                               str(producers), "--topic-rows", str(topic_rows)], check=True, capture_output=True,
                              text=True).stdout
        marker.write_text(text)
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", marker.read_text())}


def timed(function, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    value = function(*args, **kwargs)
    return time.perf_counter() - start, value
