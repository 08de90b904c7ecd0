"""The process test_kill.py kills: it opens a database, reports what it sees, retries a statement, runs another.

    python child.py ENGINE DATABASE [--retry FILE] [--send FILE]

Prints one JSON line per step: {"state": ...} on opening, {"retried": ...} after the retry, {"sent": ...} after
the statement (a killed process prints no more lines). A statement is
``INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq) ORDER BY arrival`` over a Parquet
file. ``SEQDEDUP_CRASH_AT`` (see seqdedup/failpoints.py) picks the step it dies at; ``MANY_FILES=1`` makes Spark
write a statement as a hundred files, so that its job commit (the renames) lasts long enough to be caught.
"""
from __future__ import annotations

import argparse
import json
import os

from sqlglot import exp

import seqdedup

STATEMENT = ("INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq) "
             "ORDER BY arrival")


def state(session) -> dict:
    entries = session.sql("SELECT _producer, _sequence_id, payload, _position, _commit FROM events "
                          "ORDER BY _position").rows
    marks = {p: s for p, s, _ in session.producer_state("events").rows}
    # the last snapshot, as recovery read it (what ``stats`` shows, without the four queries of its counts)
    header = session.state("events").header
    return {"entries": [list(row) for row in entries], "marks": marks,
            "snapshot": {"snapshot_id": header.snapshot_id, "position": header.position}}


def stage(session, engine: str, path: str) -> None:
    if engine == "spark":
        session.adapter.spark.read.parquet(path).createOrReplaceTempView("staging")
        return
    source = exp.Table(this=exp.Anonymous(this="read_parquet", expressions=[exp.Literal.string(path)]))
    session.adapter.execute(exp.Create(this=exp.table_("staging"), kind="VIEW", replace=True,
                                       expression=exp.select("*").from_(source),
                                       properties=exp.Properties(expressions=[exp.TemporaryProperty()])))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("engine")
    parser.add_argument("database")
    parser.add_argument("--retry")
    parser.add_argument("--send")
    args = parser.parse_args()
    if args.engine == "spark":
        from seqdedup.extensions.spark import local_session

        session = seqdedup.connect(local_session(args.database))
    else:
        session = seqdedup.connect(args.database)
    if "default.events" not in session.topics() and "main.events" not in session.topics():
        session.create_topic("events", {"payload": "STRING"}, snapshot_interval_entries=100)
    print(json.dumps({"state": state(session)}), flush=True)
    for step, path in (("retried", args.retry), ("sent", args.send)):
        if path:
            if step == "sent" and os.environ.get("MANY_FILES"):
                spark = session.adapter.spark
                spark.conf.set("spark.sql.adaptive.enabled", "false")
                spark.conf.set("spark.sql.shuffle.partitions", "100")
            stage(session, args.engine, path)
            written = session.sql(STATEMENT).written
            print(json.dumps({step: {"written": written, **state(session)}}), flush=True)
    session.close()


if __name__ == "__main__":
    main()
