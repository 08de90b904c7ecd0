#!/usr/bin/env python3
"""``Producer.send`` of one entry at a time: messages per second, beside a plain single-row INSERT loop into a
table of the same shape (the engine's own INSERT, through ``session.sql`` as a user would send it). Reported, not
a ratio target: a send is one statement, so its cost is the small-statement cost (see small_statements.py).

    python benchmarks/producer_send.py [--engine duckdb|spark] [--messages 200]
"""
from __future__ import annotations

import argparse
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
        print(f"engine={args.engine} messages={args.messages} written={written} expected={args.messages + 3}")
        print(f"producer_send_per_s={args.messages / sends:.1f} plain_single_row_insert_per_s="
              f"{args.messages / inserts:.1f} send_over_insert={sends / inserts:.2f}")
        if written != args.messages + 3:
            sys.exit("the producer wrote the wrong number of entries")


if __name__ == "__main__":
    main()
