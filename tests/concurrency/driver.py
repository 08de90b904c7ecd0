"""A Spark driver process of test_drivers.py: it sends C17's statements, or opens, uses and closes producers (R14
across drivers), when told.

    python driver.py HOME LEASE_SECONDS (--metastore URL | --remote sc://HOST:PORT)

It connects (a local session on the shared metastore, or a Spark Connect client), prints {"ready": pid, "host": ...,
"application": ...}, then answers one JSON line per command line on stdin (the first "open" creates the topic ``r14``,
``producer_lease_seconds`` = LEASE_SECONDS, unless it exists):

    {"open": "n"}                -> {"opened": "n", "last": last_sequence_id, "epoch": its lease's epoch,
                                     "claimed": when it claimed it}
    {"send": "n", "rows": k}     -> {"sent": [[sequence_id, duplicate], ...]}
    {"close": "n"}               -> {"closed": "n"}
    {"entries": true}            -> {"entries": [[producer, sequence_id, payload], ...]}  (sorted)
    {"c17": "a", "size": k, "go": FILE}
                                 -> (creates C17's topic unless it exists, waits for FILE to exist, sends writer a's
                                     statements of k entries) {"sent": [[written, duplicates, conflicts], ...],
                                     "entries": [[producer, sequence_id], ...] (the topic as it saw it last),
                                     "at": time}
    {"freed": "hold", "rows": [[producer, id], ...], "until": FILE}
                                 -> (creates the topic ``freed``, never compacted by itself, unless it exists;
                                     covered partitions dropped after 2 s, not 10 minutes) sends the rows as one
                                     statement and, just before it publishes, says {"holding": commit} and waits for
                                     FILE; then {"held": [written, duplicates, conflicts]}
    {"freed": "race", "rows": [[producer, id], ...]}
                                 -> one statement per row, a compaction of them all, 3 s, and another compaction
                                     (which drops the partitions the first merged) {"raced": [commits]}
    {"freed": "entries"}         -> {"entries": [[producer, sequence_id], ...]} of ``freed`` (sorted)
    {"retried": "send", "rows": [[producer, id], ...]}
                                 -> (creates the topic ``retried`` unless it exists) sends the rows as one statement
                                     {"sent": [written, duplicates]}, or {"refused": message} where refused
    {"retried": "gaps", "policy": P}
                                 -> sets ``retried``'s gap_policy {"gaps": P}

A ProducerError is answered {"refused": message, "at": time} ("at": this process's clock, after the call returned).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
import time
from pathlib import Path

import pyarrow as pa
from sqlglot import exp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))     # the repository, for tests.concurrency.c17

import seqdedup  # noqa: E402
from seqdedup import failpoints  # noqa: E402
from seqdedup.errors import ProducerError, SeqdedupError  # noqa: E402
from seqdedup.extensions.spark import SparkAdapter  # noqa: E402
from tests.concurrency import c17  # noqa: E402

#: Not C17's ``events``: the tests of a module share a metastore, and an existing topic keeps its policies.
TOPIC = "r14"


def say(**line) -> None:
    print(json.dumps(line), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("home")
    parser.add_argument("lease", type=int)
    parser.add_argument("--metastore")
    parser.add_argument("--remote")
    args = parser.parse_args()
    # how each driver came by its states (a recovery, or a catch-up after a lost commit race), on its stderr
    logging.basicConfig(level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")
    logging.getLogger("seqdedup.state").setLevel(logging.INFO)
    if args.remote:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.remote(args.remote).getOrCreate()
    else:
        from seqdedup.extensions.spark import local_session

        spark = local_session(args.home, metastore=args.metastore)
    session = seqdedup.connect(spark)
    say(ready=os.getpid(), host=socket.gethostname(), application=spark.conf.get("spark.app.id"))
    producers, me, made = {}, f"{os.getpid()}", False
    for line in sys.stdin:
        command = json.loads(line)
        try:
            if "open" in command:
                if not made:        # (not at start: a driver that sends only C17's statements has no use for it)
                    session.create_topic(TOPIC, {"payload": "STRING"}, if_not_exists=True,
                                         producer_lease_seconds=args.lease)
                    made = True
                name = command["open"]
                producers[name] = producer = session.producer(TOPIC, name=name)
                lease = producer._lease
                say(opened=name, last=producer.last_sequence_id, epoch=lease.epoch, claimed=lease.claimed_at)
            elif "send" in command:
                receipts = producers[command["send"]].send([(f"{me}:{i}",) for i in range(command["rows"])])
                say(sent=[[r.sequence_id, r.duplicate] for r in receipts])
            elif "close" in command:
                producers.pop(command["close"]).close()
                say(closed=command["close"])
            elif "entries" in command:
                say(entries=sorted(session.sql(f"SELECT _producer, _sequence_id, payload FROM {TOPIC}").rows))
            elif "c17" in command:
                say(**send_c17(session, command["c17"], command["size"], Path(command["go"])))
            elif "freed" in command:
                say(**freed(session, command))
            elif "retried" in command:
                say(**retried(session, command))
        except ProducerError as error:
            say(refused=str(error), at=time.time())


def send_c17(session, writer: str, size: int, go: Path) -> dict:
    """Writer ``writer``'s statements of scenario C17, sent once ``go`` exists (so that several drivers start at
    once); what each returned, and the topic as this driver saw it last."""
    session.create_topic(c17.TOPIC, {"payload": "STRING"}, if_not_exists=True)
    while not go.exists():
        time.sleep(0.02)
    sent = []
    for rows in c17.statements(writer, size):
        result = c17.send(session, writer, rows)
        sent.append([result.written, result.duplicates, result.conflicts])
    return dict(sent=sent, entries=c17.topic_entries(session), at=time.time())


def freed(session, command: dict) -> dict:
    """A commit decided before another driver's compaction freed its number (test_drivers.py): see the commands."""
    SparkAdapter.COVERED_GRACE = 2.0
    session.create_topic("freed", {"payload": "STRING"}, if_not_exists=True, compact_every_commits="never")
    rows = [tuple(row) for row in command.get("rows", [])]
    if command["freed"] == "entries":
        return {"entries": sorted(session.sql("SELECT _producer, _sequence_id FROM freed").rows)}
    if command["freed"] == "race":
        commits = [send_rows(session, "freed", [row]).commit for row in rows]
        session.compact("freed", factor=max(len(rows), 2))
        time.sleep(3)
        session.compact("freed", factor=max(len(rows), 2))
        return {"raced": commits}
    until = Path(command["until"])

    def hold() -> None:
        say(holding=session.writer.attempted[session.ref("freed").key])
        while not until.exists():
            time.sleep(0.05)

    failpoints.inject("before_publish", hold)
    result = send_rows(session, "freed", rows)
    return {"held": [result.written, result.duplicates, result.conflicts]}


def retried(session, command: dict) -> dict:
    """Commits with no entry, another driver's to catch up over (test_drivers.py): see the commands."""
    session.create_topic("retried", {"payload": "STRING"}, if_not_exists=True)
    if command["retried"] == "gaps":
        session.alter_topic("retried", gap_policy=command["policy"])
        return {"gaps": command["policy"]}
    try:
        result = send_rows(session, "retried", [tuple(row) for row in command["rows"]])
    except SeqdedupError as error:
        return {"refused": str(error)}
    return {"sent": [result.written, result.duplicates]}


def send_rows(session, topic: str, rows: list[tuple[str, int]]):
    """One statement into ``topic`` with these (producer, id) entries, each payload "producer/id"."""
    staging = pa.table({"producer": [p for p, _ in rows], "seq": pa.array([s for _, s in rows], pa.int64()),
                        "payload": [f"{p}/{s}" for p, s in rows]})
    return session.sql(f"INSERT INTO {exp.to_identifier(topic).sql('spark')} SELECT payload FROM staging "
                       "WHERE is_not_dup(producer, seq)", staging=staging)


if __name__ == "__main__":
    main()
