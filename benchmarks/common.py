"""Shared pieces of the benchmarks: the standard workload, timing, and ratio reporting."""
from __future__ import annotations

import argparse

import functools
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
        for stale in out.glob("done-*.txt"):      # the files are rewritten: another size's answers no longer hold
            stale.unlink()
        text = subprocess.run([sys.executable, str(WORKLOAD_SCRIPT), str(out), "--rows", str(rows), "--producers",
                               str(producers), "--topic-rows", str(topic_rows)], check=True, capture_output=True,
                              text=True).stdout
        marker.write_text(text)
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", marker.read_text())}


def workload_arguments(ap: argparse.ArgumentParser, *, runs: int) -> None:
    """The standard workload's options (make_workload), and how many runs."""
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--producers", type=int, default=10_000)
    ap.add_argument("--topic-rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=runs)
    ap.add_argument("--data", type=pathlib.Path, default=pathlib.Path("bench-data"))


def timed(function, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    value = function(*args, **kwargs)
    return time.perf_counter() - start, value


def cpu_clock(spark=None):
    """A clock of CPU seconds: this process's (every thread's: DuckDB's work), and with ``spark`` (a classic
    session, local mode) its JVM's too, where Spark's work runs."""
    stat = None if spark is None else f"/proc/{spark._jvm.java.lang.ProcessHandle.current().pid()}/stat"
    if stat is None or not os.path.exists(stat):
        return time.process_time
    tick = os.sysconf("SC_CLK_TCK")

    def clock() -> float:
        with open(stat) as f:       # (utime and stime, in ticks: the 14th and 15th fields, after the command's name)
            fields = f.read().rsplit(")", 1)[1].split()
        return time.process_time() + (int(fields[11]) + int(fields[12])) / tick
    return clock


def timed_cpu(function, *args, clock=time.process_time, **kwargs) -> tuple[float, float, object]:
    """Wall seconds, CPU seconds by ``clock`` (``cpu_clock``; by default this process's) and the value. On a loaded
    machine CPU time moves much less than wall time: it counts work, not waiting."""
    cpu = clock()
    seconds, value = timed(function, *args, **kwargs)
    return seconds, clock() - cpu, value


def ratio_line(label: str, measured: str, base: str, wall: dict[str, list[float]], cpu: dict[str, list[float]],
               target: float, with_cpu: bool) -> str:
    """One target's line: the best wall seconds of ``measured`` and of ``base`` (keys of ``wall``), their ratio
    against ``target``, and with ``with_cpu`` (DuckDB, whose work is this process's) the ratio of their best CPU
    seconds (``cpu``)."""
    value, against = min(wall[measured]), min(wall[base])
    line = (f"{label}: {measured}_s={value:.3f} {base}_s={against:.3f} ratio={value / against:.2f} "
            f"target<={target:.2f} {'MET' if value / against <= target else 'NOT MET'}")
    if with_cpu:
        line += f" cpu_ratio={min(cpu[measured]) / min(cpu[base]):.2f}"
    return line


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


class Engines:
    """A session on one engine with a scratch database: DuckDB a file in ``tmp``; Spark a local session with its
    Hive home in ``tmp`` and a namespace of its own per ``fresh()``; "connect" the same through a Spark Connect
    session, on a server of the run's own on this machine."""

    def __init__(self, name: str, tmp: pathlib.Path, metastore: str | None = None):
        self.name, self.tmp, self.count = name, tmp, 0
        self.spark = None
        if name == "spark":
            from seqdedup.extensions.spark import local_session

            self.spark = local_session(tmp / "spark-home", master="local[2]", metastore=metastore)
        elif name == "connect":
            from seqdedup.extensions.spark.connect_server import start_local_server

            self.server = start_local_server(tmp / "connect-home")
            self.spark = self.server.session()

    def fresh(self):
        """A session on a new, empty database (Spark: a new namespace, made current)."""
        import seqdedup

        self.count += 1
        if self.spark is None:
            return seqdedup.connect(str(self.tmp / f"bench{self.count}.duckdb"))
        self.spark.sql(f"CREATE DATABASE bench{self.count}")
        self.use(self.current())
        return seqdedup.connect(self.spark)

    def current(self) -> str | None:
        """The database the last ``fresh()`` made current (Spark), for ``use``; None on DuckDB (a file each)."""
        return None if self.spark is None else f"bench{self.count}"

    def use(self, database: str | None) -> None:
        """Make ``database`` (``current()``'s) current again: a benchmark that runs two sessions in turn."""
        if database is not None:
            self.spark.sql(f"USE {database}")

    def raw(self, session, text: str):
        """Run Spark SQL text on the engine itself, not through seqdedup (the baselines); for DuckDB it is
        translated once, before any clock runs (``duckdb_text``)."""
        if self.spark is not None:
            return self.spark.sql(text).collect()
        return session.adapter.connection.execute(duckdb_text(text)).fetchall()


@functools.lru_cache(maxsize=None)
def duckdb_text(text: str) -> str:
    import sqlglot

    return sqlglot.transpile(text, read="spark", write="duckdb")[0]
