#!/usr/bin/env python3
"""Targets (Spark): ``seqdedup.connect(spark)`` on an existing catalog costs at most 1.3x starting the SparkSession
alone; ``create_topic`` costs at most 2 plain DDL statements (a ``CREATE TABLE`` of the same columns).

A SparkSession starts once per process, so each run is a new Python process on the same Hive home (the catalog made
by a first process, before any clock runs). In it: the SparkSession's start and one query (what every Spark job
pays), then ``connect``, then a plain ``CREATE TABLE`` and ``create_topic`` of the same columns, alternated. Medians
over --runs processes.

    python benchmarks/spark_startup.py [--runs 3] [--topics 3]
"""
from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from common import median  # noqa: E402

COLUMNS = {"arrival": "BIGINT", "payload": "STRING"}


def one_process(home: str, run: int, topics: int) -> dict:
    """Measured inside a fresh process: the times of this run, in seconds."""
    import seqdedup
    from seqdedup.extensions.spark import local_session

    start = time.perf_counter()
    spark = local_session(home)
    spark.sql("SELECT 1").collect()
    times = {"spark": time.perf_counter() - start}
    start = time.perf_counter()
    session = seqdedup.connect(spark)
    times["connect"] = time.perf_counter() - start
    times["ddl"], times["create_topic"] = [], []
    for i in range(topics):
        start = time.perf_counter()
        spark.sql(f"CREATE TABLE plain_{run}_{i} (arrival BIGINT, payload STRING, _producer STRING, "
                  "_sequence_id BIGINT, _highest_sequence_id BIGINT, _position BIGINT, _publish_time TIMESTAMP, "
                  "_commit BIGINT) USING parquet PARTITIONED BY (_commit)")
        times["ddl"].append(time.perf_counter() - start)
        start = time.perf_counter()
        session.create_topic(f"topic_{run}_{i}", COLUMNS)
        times["create_topic"].append(time.perf_counter() - start)
    session.close()
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--topics", type=int, default=3)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(one_process(args.child[0], int(args.child[1]), args.topics)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        home = str(pathlib.Path(tmp) / "spark-home")
        setup = ("import seqdedup; from seqdedup.extensions.spark import local_session; "
                 f"seqdedup.connect(local_session({home!r})).close()")
        subprocess.run([sys.executable, "-c", setup], check=True, capture_output=True)
        runs = []
        for run in range(args.runs):
            out = subprocess.run([sys.executable, __file__, "--topics", str(args.topics), "--child", home, str(run)],
                                 check=True, capture_output=True, text=True).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
    spark = median([r["spark"] for r in runs])
    connect = median([r["connect"] for r in runs])
    ddl = median([t for r in runs for t in r["ddl"]])
    create = median([t for r in runs for t in r["create_topic"]])
    print(f"engine=spark runs={args.runs} topics_per_run={args.topics}")
    ratio = (spark + connect) / spark
    print(f"connect: spark_session_s={spark:.2f} connect_s={connect:.2f} ratio_session_and_connect_over_session="
          f"{ratio:.2f} target<=1.30 {'MET' if ratio <= 1.3 else 'NOT MET'}")
    ratio = create / ddl
    print(f"create_topic: plain_create_table_s={ddl:.3f} create_topic_s={create:.3f} ratio_create_topic_over_ddl="
          f"{ratio:.2f} target<=2.00 {'MET' if ratio <= 2.0 else 'NOT MET'}")


if __name__ == "__main__":
    main()
