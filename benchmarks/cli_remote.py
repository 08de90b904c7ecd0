#!/usr/bin/env python3
"""Target (Spark Connect): a command line command against a warm server (``--remote``) takes a few seconds, at most
5 s, where ``--engine spark`` starts a JVM per command (about a minute).

The server is started as the docs say (``seqdedup connect-server``) and warmed: the catalog made, and each command
run once before any clock runs. Each command is then a new process, as a user runs it (medians over --runs), beside
two baselines over a connection to the same server: a plain ``spark.sql`` on a warm session of this process (what a
statement costs the server), and a new process that opens a session and runs one ``spark.sql`` (the least a command
process can cost: Python, pyspark's client, one round trip). The number of cores and the load are printed with them:
on a busy machine every figure grows. For scale, the run also times one ``topic create`` with ``--engine spark``,
the way without a server: a local session, a JVM of the command's own (once: it takes a minute).

    python benchmarks/cli_remote.py [--runs 3]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from common import median, timed  # noqa: E402

TARGET_S = 5.0
#: One new process that opens a Spark Connect session and runs one statement.
FLOOR = ("import sys; from seqdedup.extensions.spark.connect_server import remote_session; "
         "remote_session(sys.argv[1]).sql('SELECT 1').collect()")


def seqdedup(url: str, cwd: pathlib.Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "seqdedup", *args, "--remote", url], cwd=cwd, capture_output=True,
                          text=True)
    if done.returncode != 0:
        sys.exit(f"seqdedup {' '.join(args)} failed: {done.stderr}")
    return done.stdout


def commands(run: int) -> list[tuple[str, list[str]]]:
    """(label, arguments) of the commands timed in run ``run`` (a topic of its own for those that change one)."""
    topic = f"t{run + 1}"
    return [("topic list", ["topic", "list"]),
            ("topic create", ["topic", "create", topic, "-c", "payload:STRING"]),
            ("ingest 10 rows", ["ingest", topic, "in.jsonl", "--producer-column", "producer", "--sequence-column",
                                "seq", "--no-progress"]),
            ("state", ["state", topic]),
            ("sql SELECT", ["sql", f"SELECT count(*) FROM {topic}"]),
            ("stats", ["stats", topic])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        (folder / "in.jsonl").write_text("".join(json.dumps({"producer": f"p{i % 3}", "seq": i, "payload": "x"}) + "\n"
                                                 for i in range(10)))
        server = subprocess.Popen([sys.executable, "-m", "seqdedup", "connect-server", "-d", str(folder / "home"),
                                   "--port", "0"], cwd=folder, stdout=subprocess.PIPE, text=True)
        try:
            found = re.search(r"ready at (sc://\S+) ", server.stdout.readline())
            if not found:
                sys.exit("the Spark Connect server did not start")
            url = found.group(1)
            for label, command in commands(-1):             # warm (topic t0): the catalog, the server's JIT and caches
                seqdedup(url, folder, *command)
            times: dict[str, list[float]] = {label: [] for label, _ in commands(0)}
            floor = []
            for run in range(args.runs):
                floor.append(timed(subprocess.run, [sys.executable, "-c", FLOOR, url], check=True)[0])
                for label, command in commands(run):
                    times[label].append(timed(seqdedup, url, folder, *command)[0])
            local = timed(subprocess.run, [sys.executable, "-m", "seqdedup", "topic", "create", "local", "-c",
                                           "payload:STRING", "--engine", "spark", "-d", str(folder / "local-home")],
                          cwd=folder, check=True, capture_output=True)[0]
            from seqdedup.extensions.spark.connect_server import remote_session

            spark = remote_session(url)
            spark.sql("SELECT 1").collect()
            plain = median([timed(lambda: spark.sql("SELECT 1").collect())[0] for _ in range(10)])
            spark.stop()
        finally:
            server.send_signal(signal.SIGTERM)             # the command stops its server
            server.wait()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"engine=connect cores={os.cpu_count()} load_average={load} runs={args.runs} (medians)")
    print(f"baselines: plain_spark_sql_s={plain:.3f} (a warm session of this process) "
          f"new_process_one_spark_sql_s={median(floor):.2f}")
    print(f"without a server: topic create --engine spark command_s={local:.1f} (once)")
    for label, seconds in times.items():
        took = median(seconds)
        print(f"{label}: command_s={took:.2f} over_plain_spark_sql={took / plain:.0f}x "
              f"over_new_process_one_spark_sql={took / median(floor):.1f}x target<={TARGET_S:.0f}s "
              f"{'MET' if took <= TARGET_S else 'NOT MET'}")


if __name__ == "__main__":
    main()
