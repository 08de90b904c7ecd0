#!/usr/bin/env python3
"""``Producer.send`` of one entry at a time, and ``send_async`` of single entries from one thread: messages per second,
beside a plain single-row INSERT loop into a table of the same shape (the engine's own INSERT, through
``session.sql`` as a user would send it).

``send`` is one statement per call, so its cost is the small-statement cost (see small_statements.py): reported, no
target. ``send_async`` groups entries (seqdedup/clients/batching.py, default settings); issue 41's
target for 100,000 entries
is at least 50,000 a second on DuckDB and 5,000 on Spark ``local[2]``, timed from the first call to the end of
``flush()`` (every entry's commit durable).

    python benchmarks/producer_send.py [--engine duckdb|spark] [--messages 200] [--async-messages 100000]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from common import Engines  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb")
    ap.add_argument("--messages", type=int, default=200)
    ap.add_argument("--async-messages", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        engines = Engines(args.engine, pathlib.Path(tmp))
        session = engines.fresh()
        session.create_topic("events", {"payload": "STRING"})
        session.sql("CREATE TABLE plain (payload STRING, producer STRING, seq BIGINT)"
                    + (" USING parquet" if engines.spark else ""))
        producer = session.producer("events", name="sender")
        for i in range(3):                          # warm-up
            producer.send([{"payload": f"warm-{i}"}])
            session.sql(f"INSERT INTO plain VALUES ('warm-{i}', 'sender', {i})")
        start = time.perf_counter()
        for i in range(args.messages):
            producer.send([{"payload": f"message-{i}"}])
        sends = time.perf_counter() - start
        start = time.perf_counter()
        for i in range(args.messages):
            session.sql(f"INSERT INTO plain VALUES ('message-{i}', 'sender', {i})")
        inserts = time.perf_counter() - start
        producer.close()
        written = session.sql("SELECT count(*) FROM events").rows[0][0]
        print(f"engine={args.engine} cores={os.cpu_count()} load_average={os.getloadavg()[0]:.2f} "
              f"messages={args.messages} written={written} expected={args.messages + 3}")
        print(f"producer_send_per_s={args.messages / sends:.1f} plain_single_row_insert_per_s="
              f"{args.messages / inserts:.1f} send_over_insert={sends / inserts:.2f}")
        if written != args.messages + 3:
            sys.exit("the producer wrote the wrong number of entries")
        send_async(session, args.engine, args.async_messages, args.messages / inserts)


def send_async(session, engine: str, messages: int, inserts_per_s: float) -> None:
    """``send_async`` of ``messages`` single entries from one thread, then ``flush``; every receipt checked."""
    with session.producer("events", name="batching") as producer:
        producer.send_async({"payload": "warm"}).result()
        start = time.perf_counter()
        futures = [producer.send_async({"payload": f"async-{i}"}) for i in range(messages)]
        producer.flush()
        seconds = time.perf_counter() - start
    receipts = [f.result() for f in futures]
    commits = session.sql("SELECT count(DISTINCT _commit) FROM events WHERE _producer = 'batching'").rows[0][0]
    per_s = messages / seconds
    target = 50_000 if engine == "duckdb" else 5_000
    print(f"send_async_messages={messages} groups={commits - 1} send_async_per_s={per_s:.0f} "
          f"over_plain_single_row_insert={per_s / inserts_per_s:.1f}x target>={target} "
          f"{'met' if per_s >= target else 'NOT MET'}")
    if [r.sequence_id for r in receipts] != list(range(1, messages + 1)) or any(r.duplicate for r in receipts):
        sys.exit("send_async's receipts are wrong")


if __name__ == "__main__":
    main()
