#!/usr/bin/env python3
"""Target (issue 46): Spark drivers on one shared metastore, each writing small statements to one topic as fast as
it can: every statement completes, and the slowest takes at most 10x the median; commits a second are printed beside
one driver alone, in the same run.

Each driver is a process of its own (a local session, ``local[1]``, on a PostgreSQL metastore of the run's own,
tests/metastore.py), as a stream, a backfill and a retried batch would be. A statement holds ``--entries`` new ids of
the driver's own producer and as many ids of a producer every driver writes (the same ids from each: the repeats a
retried batch makes), so the drivers race for every commit and also drop each other's entries. First one driver
writes alone for ``--alone`` seconds, then ``--drivers`` of them at once for ``--seconds`` on a topic of their own;
a statement in flight at the end finishes. The topic's policies are the defaults (automatic compaction included).

    python benchmarks/drivers_contention.py [--drivers 3] [--seconds 600] [--alone 120] [--entries 10]
                                            [--compact-every N] [--logs DIR]

Prints, per phase: statements, commits a second, latency median / 99th percentile / max, lost races, failures, and
each driver's slowest statements (seconds, lost races, whether it ran the automatic compaction, when it ended: a
driver's log in ``--logs`` says, by the second, where that time went: waits for turns, catch-ups, recoveries);
then the targets: every statement completed, slowest over median at most 10. The number of cores and the load are
printed with them: on a busy machine every figure grows.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))       # the repository, for tests.metastore

TARGET_SLOWEST = 10.0
STATEMENT = "INSERT INTO {topic} SELECT payload FROM staging WHERE is_not_dup(producer, seq)"


def child(home: str, metastore: str, topic: str, name: str, seconds: float, entries: int, go: str,
          compact_every: str) -> None:
    """One driver: statements until ``seconds`` have passed since ``go`` appeared; one JSON line at the end. Its
    seqdedup log lines (turns, catch-ups, compactions) go to its standard error, timed, for a slow statement's why."""
    import logging

    import pyarrow as pa

    import seqdedup
    from seqdedup.extensions.spark import local_session

    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(f"%(asctime)s {name} %(name)s %(message)s"))
    logging.getLogger("seqdedup").addHandler(handler)
    logging.getLogger("seqdedup").setLevel(logging.INFO)
    session = seqdedup.connect(local_session(home, master="local[1]", metastore=metastore))
    policies = {} if compact_every == "default" else {"compact_every_commits": int(compact_every)}
    session.create_topic(topic, {"payload": "STRING"}, if_not_exists=True, **policies)
    warm = pa.table({"producer": [f"{name}-warm-up"], "seq": [0], "payload": ["x"]})
    session.sql(STATEMENT.format(topic=topic), staging=warm)     # first plans and the state in memory: not timed
    print(json.dumps({"ready": name}), flush=True)
    while not os.path.exists(go):
        time.sleep(0.02)
    latencies, slow, conflicts, failures, written, first = [], [], 0, [], 0, 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ids = list(range(first, first + entries))
        staging = pa.table({"producer": [name] * entries + ["shared"] * entries, "seq": ids + ids,
                            "payload": [f"{name}-{i}" for i in ids] * 2})
        started = time.monotonic()
        try:
            result = session.sql(STATEMENT.format(topic=topic), staging=staging)
        except seqdedup.SeqdedupError as error:       # (a statement that did not complete: the target counts it)
            failures.append(str(error)[:300])
            continue
        latencies.append(time.monotonic() - started)
        slow.append([latencies[-1], result.conflicts, result.compaction is not None, time.time()])
        conflicts += result.conflicts
        written += result.written
        first += entries
    session.close()
    slow = sorted(slow, reverse=True)[:3]       # the three slowest: seconds, lost races, compacted, when it ended
    print(json.dumps({"driver": name, "latencies": latencies, "slowest": slow, "conflicts": conflicts,
                      "failures": failures, "written": written}), flush=True)


def phase(label: str, drivers: int, seconds: float, entries: int, home: pathlib.Path, metastore: str,
          compact_every: str) -> list[dict]:
    """``drivers`` driver processes writing topic ``label`` at once for ``seconds``; their reports."""
    go = home.parent / f"go-{label}"
    logs = [home.parent / f"{label}-d{i}.log" for i in range(drivers)]
    fleet = [subprocess.Popen([sys.executable, __file__, "--child", str(home), metastore, label, f"d{i}",
                               str(seconds), str(entries), str(go), compact_every], stdout=subprocess.PIPE,
                              stderr=log.open("w"), text=True)
             for i, log in enumerate(logs)]

    def failed(process, log: pathlib.Path, what: str):
        sys.exit(f"a driver {what} ({process.wait()}): {log.read_text()[-3000:]}")

    for process, log in zip(fleet, logs):       # every JVM up and the topic there before the clock runs
        if not process.stdout.readline().startswith('{"ready"'):
            failed(process, log, "did not start")
    go.touch()
    reports = []
    for process, log in zip(fleet, logs):
        out, _ = process.communicate(timeout=seconds + 900)
        if process.returncode:
            failed(process, log, "failed")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


def summary(label: str, reports: list[dict], seconds: float) -> tuple[float, float, float, int]:
    """Prints the phase's line; (commits a second, median latency, max latency, failures)."""
    latencies = sorted(x for report in reports for x in report["latencies"])
    failures = sum(len(report["failures"]) for report in reports)
    if not latencies:
        sys.exit(f"{label}: no statement completed; failures: {[r['failures'][:2] for r in reports]}")
    median = latencies[len(latencies) // 2]
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    per_driver = " ".join(f"{r['driver']}={len(r['latencies'])}" for r in reports)
    rate = len(latencies) / seconds
    print(f"{label}: drivers={len(reports)} statements={len(latencies)} ({per_driver}) commits_per_s={rate:.2f} "
          f"latency_median_s={median:.2f} p99_s={p99:.2f} max_s={latencies[-1]:.2f} "
          f"lost_races={sum(r['conflicts'] for r in reports)} failures={failures}")
    for report in reports:
        for failure in report["failures"][:3]:
            print(f"  {report['driver']} failed: {failure}")
        for seconds_, lost, compacted, ended in report["slowest"][:1 if len(reports) == 1 else 3]:
            print(f"  {report['driver']} slow: {seconds_:.2f} s, {lost} lost races"
                  f"{', compacted' if compacted else ''}, ended {time.strftime('%H:%M:%S', time.gmtime(ended))}")
    return rate, median, latencies[-1], failures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drivers", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=600, help="how long the drivers write at once (default 600)")
    ap.add_argument("--alone", type=float, default=120, help="how long one driver writes alone (default 120)")
    ap.add_argument("--entries", type=int, default=10, help="new ids per statement (default 10)")
    ap.add_argument("--compact-every", default="default",
                    help="the topics' compact_every_commits (default: the policy's default, 100; the target's)")
    ap.add_argument("--logs", help="a folder to keep each driver's log in (its timed seqdedup lines)")
    ap.add_argument("--child", nargs=8, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        home, metastore, topic, name, seconds, entries, go, compact_every = args.child
        return child(home, metastore, topic, name, float(seconds), int(entries), go, compact_every)
    from tests.metastore import PostgresServer

    print(f"cores={os.cpu_count()} load_average={os.getloadavg()[0]:.2f} entries_per_statement={args.entries} "
          f"drivers={args.drivers} seconds={args.seconds:.0f} alone_seconds={args.alone:.0f}")
    with tempfile.TemporaryDirectory() as tmp, PostgresServer() as server:
        home, metastore = pathlib.Path(tmp) / "home", server.metastore()
        alone = summary("alone", phase("alone", 1, args.alone, args.entries, home, metastore, args.compact_every),
                        args.alone)
        several = summary("contended", phase("contended", args.drivers, args.seconds, args.entries, home, metastore,
                                             args.compact_every), args.seconds)
        if args.logs:
            pathlib.Path(args.logs).mkdir(parents=True, exist_ok=True)
            for log in home.parent.glob("*.log"):
                shutil.copy(log, args.logs)
    rate, median, slowest, failures = several
    print(f"commits_per_s_contended_over_alone={rate / alone[0]:.2f}")
    print(f"every_statement_completed={'yes' if failures == 0 else f'no ({failures} failed)'} target=yes "
          f"{'MET' if failures == 0 else 'NOT MET'}")
    ratio = slowest / median
    verdict = "MET" if ratio <= TARGET_SLOWEST else "NOT MET"
    print(f"slowest_over_median={ratio:.1f} target<={TARGET_SLOWEST:.0f} {verdict}")


if __name__ == "__main__":
    main()
